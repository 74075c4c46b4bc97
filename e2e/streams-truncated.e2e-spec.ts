import { ApiError, GoogleGenAI } from '@google/genai';
import { APIError } from 'openai';
import { openai, stack, uid, withSeeder } from './support';

/**
 * Issue 7, item 4: a stream the client did not receive to its end is a delivery failure the
 * client sees. The provider simulator drops the connection after the content, before the usage
 * chunk and `[DONE]` (OpenAI) / the final chunk (Gemini); the SDKs' iteration must raise the
 * gateway's error instead of ending as if the answer were whole.
 */
describe('a cut stream ends in an error the SDKs raise (openai and @google/genai SDKs)', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  let key: string;

  const ai = () => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: stack.admission } });

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      await seed.route({
        routeId: r('cut-oa'),
        alias: r('cut-oa'),
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;cut-stream',
      });
      await seed.route({
        routeId: r('cut-gm'),
        alias: r('cut-gm'),
        providerKind: 'gemini-generate',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'gemini-sim;cut-stream',
      });
      key = (await seed.workload({ id: r('w-cut'), allowedAliases: [r('cut-oa'), r('cut-gm')] })).key;
    });
  });

  it('openai: the stream raises APIError upstream_error after the text that arrived, never a clean end', async () => {
    const { data: stream, response } = await openai(key)
      .chat.completions.create({ model: r('cut-oa'), messages: [{ role: 'user', content: `cut ${run}` }], stream: true })
      .withResponse();
    expect(response.status).toBe(200);
    let text = '';
    const iteration = (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    })();
    const err = await iteration.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ code: 'upstream_error', type: 'api_error' });
    expect((err as APIError).message).toContain('incomplete');
    expect(text.split(' ')).toHaveLength(12);
  });

  it('@google/genai: the stream raises ApiError 502 after the text that arrived', async () => {
    const stream = await ai().models.generateContentStream({ model: r('cut-gm'), contents: `cut ${run}` });
    let text = '';
    const err = await (async () => {
      for await (const chunk of stream) text += chunk.text ?? '';
    })().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 502 });
    expect((err as ApiError).message).toContain('upstream_error');
    expect(text.split(' ')).toHaveLength(12);
  });
});
