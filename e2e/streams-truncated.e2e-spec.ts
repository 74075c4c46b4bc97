import { ApiError } from '@google/genai';
import { APIError } from 'openai';
import { openai, stack, uid, withSeeder, gemini, failureOf } from './support';

/**
 * Issue 7, item 4: a stream the client did not receive to its end is a delivery failure the
 * client sees. The provider simulator drops the connection after the content, before the usage
 * chunk and `[DONE]` (OpenAI) / the final chunk (Gemini); the SDKs' iteration must raise the
 * gateway's error instead of ending as if the answer were whole.
 */
describe('a cut stream ends in an error the SDKs raise (openai and @google/genai SDKs)', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  const DEADLINE_MS = 1500;
  let key: string;
  let hurriedKey: string;

  const ai = (k = key) => gemini(k);

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
      // The simulator stalls mid-stream far past the action deadline.
      await seed.route({
        routeId: r('stall-oa'),
        alias: r('stall-oa'),
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;stall=20000',
      });
      await seed.route({
        routeId: r('stall-gm'),
        alias: r('stall-gm'),
        providerKind: 'gemini-generate',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'gemini-sim;stall=20000',
      });
      key = (await seed.workload({ id: r('w-cut'), allowedAliases: [r('cut-oa'), r('cut-gm')] })).key;
      hurriedKey = (await seed.workload({ id: r('w-hurried'), allowedAliases: [r('stall-oa'), r('stall-gm')], deadlineMs: DEADLINE_MS }))
        .key;
    });
  });

  it('openai: the stream raises APIError upstream_error after the text that arrived, never a clean end', async () => {
    const { data: stream, response } = await openai(key)
      .chat.completions.create({ model: r('cut-oa'), messages: [{ role: 'user', content: `cut ${run}` }], stream: true })
      .withResponse();
    expect(response.status).toBe(200);
    let text = '';
    const err = await failureOf(
      (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })(),
    );
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ code: 'upstream_error', type: 'api_error' });
    expect((err as APIError).message).toContain('incomplete');
    expect(text.split(' ')).toHaveLength(12);
  });

  it('@google/genai: the stream raises ApiError 502 after the text that arrived', async () => {
    const stream = await ai().models.generateContentStream({ model: r('cut-gm'), contents: `cut ${run}` });
    let text = '';
    const err = await failureOf(
      (async () => {
        for await (const chunk of stream) text += chunk.text ?? '';
      })(),
    );
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 502 });
    expect((err as ApiError).message).toContain('upstream_error');
    expect(text.split(' ')).toHaveLength(12);
  });

  // Admission's deadline timer and dispatch's upstream body timeout run out together; whichever
  // reaches the client first, the stream must end in an error, never a clean end.
  const DEADLINE_CODES = ['deadline_exceeded', 'upstream_error'];

  it('openai: the deadline passing mid-stream raises APIError after the text that arrived', async () => {
    const stream = await openai(hurriedKey).chat.completions.create({
      model: r('stall-oa'),
      messages: [{ role: 'user', content: `stall ${run}` }],
      stream: true,
    });
    let text = '';
    const err = await failureOf(
      (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })(),
    );
    expect(err).toBeInstanceOf(APIError);
    expect(DEADLINE_CODES).toContain((err as APIError).code);
    expect(text.length).toBeGreaterThan(0);
    expect(text.split(' ').length).toBeLessThan(12);
  });

  it('@google/genai: the deadline passing mid-stream raises ApiError after the text that arrived', async () => {
    const stream = await ai(hurriedKey).models.generateContentStream({ model: r('stall-gm'), contents: `stall ${run}` });
    let text = '';
    const err = await failureOf(
      (async () => {
        for await (const chunk of stream) text += chunk.text ?? '';
      })(),
    );
    expect(err).toBeInstanceOf(ApiError);
    expect([504, 502]).toContain((err as ApiError).status);
    expect(text.length).toBeGreaterThan(0);
    expect(text.split(' ').length).toBeLessThan(12);
  });
});
