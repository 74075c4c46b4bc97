import { settledAction } from './actions';
import {
  countingFetch,
  failureOf,
  gemini,
  openai,
  SDK_ERRORS,
  SDK_MAJORS,
  SdkMajor,
  sdkVersions,
  seedSimRoutes,
  simLastSeq,
  simRequestsSince,
  uid,
  withSeeder,
} from './support';

/**
 * Issue 9 item 7: the gateway keeps working with the current and the newest major of each official
 * SDK (installed side by side: `openai` / `openai-next`, `@google/genai` / `@google/genai-next`).
 * A compact set per major: chat whole and streamed, generateContent whole and streamed, and a
 * candidate count over policy refused with the stable code, in one HTTP call (no SDK retry) and
 * with nothing dispatched.
 */
describe('official SDK compatibility', () => {
  const run = uid();
  const chat = `sdk-oa-${run}`;
  const gm = `sdk-gm-${run}`;
  let key: string;

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      await seedSimRoutes(seed, { chat, gemini: gm });
      key = (await seed.workload({ id: `sdk-wl-${run}`, allowedAliases: [chat, gm] })).key;
    });
  });

  describe.each(SDK_MAJORS)('%s majors', (major: SdkMajor) => {
    const { openai: openaiVersion, genai: genaiVersion } = sdkVersions(major);
    /** Each major with its own default API version: /v1beta/models/… for 2.x, /v1/models/… for 3.x. */
    const ai = (overrides: { fetch?: typeof fetch } = {}) => gemini(key, major, overrides);
    const prompt = (what: string) => `${what} ${major} ${uid()}`;

    it(`${openaiVersion}: chat completion, whole: answer, x-gateway headers, usage as settled`, async () => {
      const { data, response } = await openai(key, major)
        .chat.completions.create({ model: chat, messages: [{ role: 'user', content: prompt('whole') }] })
        .withResponse();
      expect(data.choices).toHaveLength(1);
      expect(data.choices[0].message.content?.length).toBeGreaterThan(0);
      expect(data.choices[0].finish_reason).toBe('stop');
      expect(response.headers.get('x-gateway-requested-candidates')).toBe('omitted');
      expect(response.headers.get('x-gateway-effective-candidates')).toBe('1');
      const status = await settledAction(key, response.headers.get('x-gateway-action-id')!);
      expect(status.attempts[0]).toMatchObject({
        input_tokens: data.usage!.prompt_tokens,
        output_tokens_total: data.usage!.completion_tokens,
      });
    });

    it(`${openaiVersion}: chat completion, streamed: text in chunks, usage in the last one, settled from it`, async () => {
      const { data: stream, response } = await openai(key, major)
        .chat.completions.create({
          model: chat,
          messages: [{ role: 'user', content: prompt('stream') }],
          stream: true,
          stream_options: { include_usage: true },
        })
        .withResponse();
      let text = '';
      let usage: { prompt_tokens: number; completion_tokens: number } | null | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? '';
        usage = chunk.usage ?? usage;
      }
      expect(text.length).toBeGreaterThan(0);
      expect(usage).toBeDefined();
      const status = await settledAction(key, response.headers.get('x-gateway-action-id')!);
      expect(status.stream_mode).toBe('sse');
      expect(status.attempts[0]).toMatchObject({ output_tokens_total: usage!.completion_tokens, usage_source: 'stream_final_chunk' });
    });

    it(`${genaiVersion}: generateContent, whole: one candidate, x-gateway headers, usage as settled`, async () => {
      const resp = await ai().models.generateContent({ model: gm, contents: prompt('whole') });
      expect(resp.candidates).toHaveLength(1);
      expect(resp.text?.length).toBeGreaterThan(0);
      const headers = resp.sdkHttpResponse?.headers ?? {};
      expect(headers['x-gateway-effective-candidates']).toBe('1');
      const status = await settledAction(key, headers['x-gateway-action-id']);
      expect(status.attempts[0].output_tokens_total).toBe(resp.usageMetadata!.candidatesTokenCount);
    });

    it(`${genaiVersion}: generateContentStream: text in chunks, usage settled from the final chunk`, async () => {
      const stream = await ai().models.generateContentStream({ model: gm, contents: prompt('stream') });
      let text = '';
      let id: string | undefined;
      let output: number | undefined;
      for await (const chunk of stream) {
        text += chunk.text ?? '';
        id = id ?? chunk.sdkHttpResponse?.headers?.['x-gateway-action-id'];
        output = chunk.usageMetadata?.candidatesTokenCount ?? output;
      }
      expect(text.length).toBeGreaterThan(0);
      expect(id).toBeDefined();
      const status = await settledAction(key, id!);
      expect(status.attempts[0]).toMatchObject({ output_tokens_total: output, usage_source: 'stream_final_chunk' });
    });

    it(`${openaiVersion}: n over the policy → 400 candidate_count_exceeds_policy, x-should-retry: false, one HTTP call, nothing dispatched`, async () => {
      const before = await simLastSeq();
      const http = countingFetch();
      const err = await failureOf(
        openai(key, major, { fetch: http.fetch }).chat.completions.create({
          model: chat,
          messages: [{ role: 'user', content: prompt('n=3') }],
          n: 3,
        }),
      );
      expect(err).toBeInstanceOf(SDK_ERRORS[major].openai);
      const apiErr = err as InstanceType<(typeof SDK_ERRORS)[typeof major]['openai']>;
      expect(apiErr.status).toBe(400);
      expect(apiErr.code).toBe('candidate_count_exceeds_policy');
      expect(apiErr.headers?.get('x-should-retry')).toBe('false');
      // the SDK retries 4xx only when told to; a refusal must reach the gateway once
      expect(http.calls()).toBe(1);
      expect(await simRequestsSince(before)).toHaveLength(0);
    });

    it(`${genaiVersion}: candidateCount over the policy → 400 with the code in error.status, one HTTP call, nothing dispatched`, async () => {
      const before = await simLastSeq();
      const http = countingFetch();
      const err = await failureOf(
        ai({ fetch: http.fetch }).models.generateContent({
          model: gm,
          contents: prompt('candidateCount=2'),
          config: { candidateCount: 2 },
        }),
      );
      expect(err).toBeInstanceOf(SDK_ERRORS[major].genai);
      const apiErr = err as InstanceType<(typeof SDK_ERRORS)[typeof major]['genai']>;
      expect(apiErr.status).toBe(400);
      expect(JSON.parse(apiErr.message).error.status).toBe('candidate_count_exceeds_policy');
      expect(http.calls()).toBe(1);
      expect(await simRequestsSince(before)).toHaveLength(0);
    });

    it(`${genaiVersion} with its default API version: generateContent and generateContentStream are served on its path`, async () => {
      const http = countingFetch();
      const client = ai({ fetch: http.fetch });
      const whole = await client.models.generateContent({ model: gm, contents: prompt('default version') });
      expect(whole.text?.length).toBeGreaterThan(0);
      let streamed = '';
      for await (const chunk of await client.models.generateContentStream({ model: gm, contents: prompt('default stream') }))
        streamed += chunk.text ?? '';
      expect(streamed.length).toBeGreaterThan(0);
      const version = major === 'next' ? 'v1' : 'v1beta';
      expect(http.urls).toEqual([
        expect.stringContaining(`/${version}/models/${gm}:generateContent`),
        expect.stringContaining(`/${version}/models/${gm}:streamGenerateContent`),
      ]);
    });
  });
});
