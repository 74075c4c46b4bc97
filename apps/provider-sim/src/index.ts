// Scripted, deterministic fake OpenAI/Gemini upstream on plain node:http.
import { exportText } from './billing-export';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createContext, type SimContext } from './context';
import { handleProviderRequest } from './exchange';
import { GEMINI_PATH, geminiGenerate, geminiStream } from './gemini.handler';
import { sendJson } from './http';
import { openAiChat } from './openai.handler';
import { openAiResponses } from './responses.handler';
import type { SimRequestLogEntry } from './request-log';

export type { SimRequestLogEntry } from './request-log';
export type { WouldBill } from './would-bill';
export { SCRIPT_HEADER } from './exchange';
export { drawLatency, onTimeProbability } from './latency';

export interface ProviderSimOptions {
  port?: number;
  host?: string;
  seed?: number;
  /** Request-log entries kept (oldest dropped first). Default 10 000. */
  logLimit?: number;
}

export interface ProviderSim {
  /** Base URL, e.g. http://127.0.0.1:40123 (OpenAI clients use url + '/v1'). */
  url: string;
  port: number;
  close(): Promise<void>;
  requests(): SimRequestLogEntry[];
  /** Clears the request log (seq restarts), fail-first counters, metrics, id counter and latency RNG. */
  reset(): void;
}

async function route(ctx: SimContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://sim');
  const path = url.pathname;
  const method = req.method ?? 'GET';

  if (method === 'POST' && path === '/v1/chat/completions') return handleProviderRequest(ctx, req, res, url, openAiChat);
  if (method === 'POST' && path === '/v1/responses') return handleProviderRequest(ctx, req, res, url, openAiResponses);
  const gemini = method === 'POST' ? GEMINI_PATH.exec(path) : null;
  if (gemini) return handleProviderRequest(ctx, req, res, url, gemini[3] === 'generateContent' ? geminiGenerate : geminiStream);

  if (path === '/_sim/requests' && method === 'GET') {
    const since = Number(url.searchParams.get('since') ?? 0);
    return sendJson(res, 200, { requests: ctx.log.list(Number.isFinite(since) ? since : 0) });
  }
  if (path === '/_sim/export' && method === 'GET') {
    const day = url.searchParams.get('day') ?? new Date().toISOString().slice(0, 10);
    const format = url.searchParams.get('format') ?? 'jsonl';
    if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || (format !== 'jsonl' && format !== 'csv')) {
      return sendJson(res, 400, { error: { message: 'provider-sim: day=YYYY-MM-DD and format=jsonl|csv' } });
    }
    res.writeHead(200, { 'content-type': format === 'csv' ? 'text/csv' : 'application/x-ndjson' });
    res.end(exportText(ctx.billing.day(day), format));
    return;
  }
  if (path === '/_sim/requests' && method === 'DELETE') {
    ctx.log.clear();
    return sendJson(res, 200, { cleared: true });
  }
  if (path === '/health' && method === 'GET') return sendJson(res, 200, { status: 'ok' });
  if (path === '/metrics' && method === 'GET') {
    const text = await ctx.registry.metrics();
    res.writeHead(200, { 'content-type': ctx.registry.contentType });
    res.end(text);
    return;
  }
  req.resume();
  sendJson(res, 404, { error: { message: `provider-sim: no route for ${method} ${path}` } });
}

function urlHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

export async function startProviderSim(options: ProviderSimOptions = {}): Promise<ProviderSim> {
  const { port = 0, host = '127.0.0.1', seed = 1, logLimit } = options;
  const ctx = createContext(seed, logLimit);
  const server = createServer((req, res) => {
    route(ctx, req, res).catch((err: unknown) => {
      if (res.headersSent) return void res.destroy();
      sendJson(res, 500, { error: { message: `provider-sim internal error: ${(err as Error)?.message ?? err}` } });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const actualPort = (server.address() as AddressInfo).port;
  return {
    url: `http://${urlHost(host)}:${actualPort}`,
    port: actualPort,
    requests: () => ctx.log.list(),
    reset: () => ctx.reset(),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
