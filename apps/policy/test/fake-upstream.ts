import { createServer, IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface UpstreamRequest {
  path: string;
  body: Record<string, unknown>;
}

export interface FakeUpstream {
  url: string;
  requests: UpstreamRequest[];
  close(): Promise<void>;
}

/**
 * A minimal OpenAI chat / Gemini generateContent upstream for probe tests: it answers with as many
 * candidates as asked (or one, for a model named `*-serve-one`) and aggregate usage (none for
 * `*-no-usage`), 3 output tokens per candidate.
 */
export async function startFakeUpstream(): Promise<FakeUpstream> {
  const requests: UpstreamRequest[] = [];
  const server: Server = createServer((req, res) => {
    void readJson(req).then((body) => {
      const path = (req.url ?? '').split('?')[0];
      requests.push({ path, body });
      const gemini = /^\/v1beta\/models\/([^/:]+):generateContent$/.exec(path);
      const model = gemini ? decodeURIComponent(gemini[1]) : String(body.model ?? '');
      const asked = gemini
        ? Number((body.generationConfig as Record<string, unknown> | undefined)?.candidateCount ?? 1)
        : Number(body.n ?? 1);
      const served = model.endsWith('-serve-one') ? 1 : asked;
      const withUsage = !model.endsWith('-no-usage');
      res.setHeader('content-type', 'application/json');
      if (gemini) {
        res.end(
          JSON.stringify({
            responseId: `resp-${requests.length}`,
            candidates: Array.from({ length: served }, (_, index) => ({
              index,
              finishReason: 'STOP',
              content: { role: 'model', parts: [{ text: 'ok' }] },
            })),
            ...(withUsage
              ? { usageMetadata: { promptTokenCount: 8, candidatesTokenCount: 3 * served, totalTokenCount: 8 + 3 * served } }
              : {}),
          }),
        );
      } else if (path === '/v1/chat/completions') {
        res.end(
          JSON.stringify({
            id: `chatcmpl-${requests.length}`,
            object: 'chat.completion',
            choices: Array.from({ length: served }, (_, index) => ({
              index,
              finish_reason: 'stop',
              message: { role: 'assistant', content: 'ok' },
            })),
            ...(withUsage ? { usage: { prompt_tokens: 8, completion_tokens: 3 * served, total_tokens: 8 + 3 * served } } : {}),
          }),
        );
      } else {
        res.statusCode = 404;
        res.end(JSON.stringify({ error: { message: 'not found', code: 'not_found' } }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  } catch {
    return {};
  }
}
