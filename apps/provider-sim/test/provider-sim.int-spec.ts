/**
 * @jest-environment ./libs/testing/src/node-undici.environment.ts
 */
// Drives the simulator in-process with the official OpenAI and Google GenAI SDKs.
import { createHash } from 'node:crypto';
import { request } from 'node:http';
import { eventually } from '@gateway/testing';
import { ApiError, GoogleGenAI } from '@google/genai';
import OpenAI from 'openai';
import { drawLatency, onTimeProbability, startProviderSim, type ProviderSim } from '../src';
import { resolveScript } from '../src/script';
import { createRng } from '../src/text';

let sim: ProviderSim;
let openai: OpenAI;
let gemini: GoogleGenAI;

const messages = [{ role: 'user' as const, content: 'Say something about spend limits.' }];

beforeAll(async () => {
  sim = await startProviderSim({ port: 0, seed: 7 });
  openai = new OpenAI({ baseURL: sim.url + '/v1', apiKey: 'x', maxRetries: 0 });
  gemini = new GoogleGenAI({ apiKey: 'x', httpOptions: { baseUrl: sim.url } });
});
afterAll(() => sim.close());
beforeEach(() => sim.reset());

const waitFor = (check: () => boolean, timeoutMs = 2000) => eventually(() => (check() ? true : undefined), { timeoutMs, intervalMs: 10 });

describe('OpenAI Responses API', () => {
  it('answers one response with max_output_tokens as the cap and inclusive usage (reasoning, cached)', async () => {
    const { data, response } = await openai.responses
      .create({
        model: 'sim-gpt;words=20;reasoning=2;cached=4',
        input: 'Say something about spend limits.',
        instructions: 'Be brief.',
        max_output_tokens: 10,
      })
      .withResponse();
    expect(response.headers.get('x-request-id')).toMatch(/^req_sim_/);
    expect(data.status).toBe('incomplete');
    expect(data.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(data.output_text.split(' ')).toHaveLength(8); // 10 - 2 reasoning
    expect(data.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
    expect(data.usage).toMatchObject({
      input_tokens_details: { cached_tokens: 4 },
      output_tokens: 10,
      output_tokens_details: { reasoning_tokens: 2 },
    });
    expect(data.usage!.total_tokens).toBe(data.usage!.input_tokens + 10);
    expect(sim.requests()[0]).toMatchObject({
      path: '/v1/responses',
      maxTokens: 10,
      candidateCount: null,
      capFields: { max_output_tokens: 10 },
    });
  });

  it('completes within the cap; refuses chat-completions fields as OpenAI does', async () => {
    const data = await openai.responses.create({ model: 'sim-gpt', input: [{ role: 'user', content: 'hello' }] });
    expect(data.status).toBe('completed');
    expect(data.output_text.split(' ')).toHaveLength(12);
    await expect(openai.responses.create({ model: 'sim-gpt', input: 'q', max_tokens: 5 } as never)).rejects.toMatchObject({
      status: 400,
      code: 'unsupported_parameter',
    });
  });

  it('streams typed events ending in response.completed with usage; the SDK assembles the text', async () => {
    const stream = await openai.responses.create({ model: 'sim-gpt;words=5', input: 'hi', stream: true });
    const types: string[] = [];
    let text = '';
    let usage: unknown = null;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed') usage = event.response.usage;
    }
    expect(types[0]).toBe('response.created');
    expect(types[types.length - 1]).toBe('response.completed');
    expect(text.split(' ')).toHaveLength(5);
    expect(usage).toMatchObject({ output_tokens: 5 });
  });

  it('cut-stream drops the connection before response.completed; no-usage leaves usage null', async () => {
    const stream = await openai.responses.create({ model: 'sim-gpt;cut-stream', input: 'hi', stream: true });
    const types: string[] = [];
    await expect(
      (async () => {
        for await (const event of stream) types.push(event.type);
      })(),
    ).rejects.toThrow();
    expect(types).toContain('response.output_text.delta');
    expect(types).not.toContain('response.completed');
    expect((await openai.responses.create({ model: 'sim-gpt;no-usage', input: 'hi' })).usage).toBeNull();
  });
});

describe('OpenAI chat completions', () => {
  it('serves n candidates with a per-candidate cap and summed usage', async () => {
    const { data, response } = await openai.chat.completions
      .create({ model: 'sim-gpt;words=20;reasoning=2;cached=4', messages, n: 3, max_tokens: 10 })
      .withResponse();
    expect(response.headers.get('x-request-id')).toBe('req_sim_1');
    expect(data).toMatchObject({ id: 'chatcmpl-sim-1', object: 'chat.completion', model: 'sim-gpt' });
    expect(data.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    for (const c of data.choices) {
      expect(c.finish_reason).toBe('length');
      expect(c.message.role).toBe('assistant');
      expect(c.message.content!.split(' ')).toHaveLength(8); // 10 - 2 reasoning
    }
    const promptTokens = Math.ceil(messages[0].content.length / 4) + 3;
    expect(data.usage).toMatchObject({
      prompt_tokens: promptTokens,
      completion_tokens: 30,
      total_tokens: promptTokens + 30,
      prompt_tokens_details: { cached_tokens: 4 },
      completion_tokens_details: { reasoning_tokens: 6 },
    });
  });

  it('is deterministic for the same seed and body', async () => {
    const body = { model: 'sim-gpt', messages, n: 2 };
    const a = await openai.chat.completions.create(body);
    const b = await openai.chat.completions.create(body);
    expect(b.choices).toEqual(a.choices);
    expect(b.usage).toEqual(a.usage);
    const other = await openai.chat.completions.create({ ...body, messages: [{ role: 'user', content: 'different' }] });
    expect(other.choices[0].message.content).not.toEqual(a.choices[0].message.content);
  });

  it('honours max_completion_tokens, serve and extra', async () => {
    const capped = await openai.chat.completions.create({ model: 'sim-gpt', messages, max_completion_tokens: 5 });
    expect(capped.usage!.completion_tokens).toBe(5);
    expect(capped.choices[0].finish_reason).toBe('length');
    const served = await openai.chat.completions.create({ model: 'sim-gpt;serve=1', messages, n: 4 });
    expect(served.choices).toHaveLength(1);
    const extra = await openai.chat.completions.create({ model: 'sim-gpt;extra=2', messages, n: 1 });
    expect(extra.choices.map((c) => c.index)).toEqual([0, 1, 2]);
  });

  it('streams interleaved choices, finish chunks, a usage chunk and [DONE]', async () => {
    const stream = await openai.chat.completions.create({
      model: 'sim-gpt;words=6;filter=2',
      messages,
      n: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    const text = ['', '', ''];
    const finish: (string | null)[] = [null, null, null];
    const order: number[] = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      for (const c of chunk.choices) {
        order.push(c.index);
        text[c.index] += c.delta.content ?? '';
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
      if (chunk.usage) {
        expect(chunk.choices).toEqual([]);
        usage = chunk.usage;
      }
    }
    expect(order.slice(0, 3)).toEqual([0, 1, 2]);
    expect(finish).toEqual(['stop', 'stop', 'content_filter']);
    expect(text[0].split(' ')).toHaveLength(6);
    expect(text[2]).toBe('');
    expect(usage!.completion_tokens).toBe(6 + 6 + 3);
    expect(text[0]).not.toEqual(text[1]);
  });

  it('omits the usage chunk unless include_usage, and with no-usage', async () => {
    for (const [model, include] of [
      ['sim-gpt', false],
      ['sim-gpt;no-usage', true],
    ] as const) {
      const stream = await openai.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: include } });
      for await (const chunk of stream) expect(chunk.usage ?? null).toBeNull();
    }
    const plain = await openai.chat.completions.create({ model: 'sim-gpt;no-usage', messages });
    expect(plain.usage).toBeUndefined();
  });

  it('fragment + echo: the stream arrives in pieces cut inside characters and CRLFs, and decodes to the prompt', async () => {
    const text = 'naïve 日本 🚀 café — ∑ ✓';
    const body = { model: 'sim-gpt;fragment;echo', messages: [{ role: 'user' as const, content: text }], stream: true as const };
    const res = await fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const reads: Uint8Array[] = [];
    for await (const piece of res.body as unknown as AsyncIterable<Uint8Array>) reads.push(piece);
    const whole = Buffer.concat(reads);
    expect([...whole.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    expect(whole.toString('utf8')).toContain('\r\n\r\ndata: [DONE]\r\n\r\n');
    // Decoding each read on its own would mangle the text: the reads end inside characters.
    expect(reads.map((r) => Buffer.from(r).toString('utf8')).join('')).toContain('\uFFFD');
    expect(reads.length).toBeGreaterThan(20);

    const stream = await openai.chat.completions.create(body);
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? '';
    expect(content).toBe(text);
  });

  it('cut-stream drops the connection after content, before usage and [DONE]', async () => {
    const stream = await openai.chat.completions.create({
      model: 'sim-gpt;cut-stream',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = '';
    let sawUsage = false;
    await expect(
      (async () => {
        for await (const chunk of stream) {
          content += chunk.choices[0]?.delta.content ?? '';
          if (chunk.usage) sawUsage = true;
        }
      })(),
    ).rejects.toThrow();
    expect(content.split(' ')).toHaveLength(12);
    expect(sawUsage).toBe(false);
    await waitFor(() => sim.requests().length === 1 && sim.requests()[0].durationMs !== null);
    expect(sim.requests()[0].aborted).toBe(false);
  });

  it('maps block, reject-n, status and unknown directives to OpenAI-shaped errors', async () => {
    const err = (p: Promise<unknown>) =>
      p.then(
        () => {
          throw new Error('expected failure');
        },
        (e: unknown) => e as InstanceType<typeof OpenAI.APIError>,
      );

    const blocked = await err(openai.chat.completions.create({ model: 'sim-gpt;block', messages }));
    expect(blocked).toBeInstanceOf(OpenAI.BadRequestError);
    expect(blocked.code).toBe('content_policy_violation');

    const rejected = await err(openai.chat.completions.create({ model: 'sim-gpt;reject-n', messages, n: 2 }));
    expect(rejected.status).toBe(400);
    expect(rejected.error).toMatchObject({ type: 'invalid_request_error', param: 'n', code: 'invalid_value' });
    await expect(openai.chat.completions.create({ model: 'sim-gpt;reject-n', messages, n: 1 })).resolves.toBeDefined();

    const limited = await err(openai.chat.completions.create({ model: 'sim-gpt;status=429', messages }));
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    const down = await err(openai.chat.completions.create({ model: 'sim-gpt;status=503', messages }));
    expect(down.status).toBe(503);
    expect(down.error).toMatchObject({ type: 'server_error' });

    const typo = await err(openai.chat.completions.create({ model: 'sim-gpt;filtr=1', messages }));
    expect(typo.status).toBe(400);
    expect(typo.message).toContain("unknown sim directive 'filtr'");
  });

  it('reads directives from the x-sim-script header, which wins over the model name', async () => {
    const res = await openai.chat.completions.create(
      { model: 'sim-gpt;serve=1;words=3', messages, n: 3 },
      { headers: { 'x-sim-script': 'serve=2' } },
    );
    expect(res.choices).toHaveLength(2);
    expect(res.choices[0].message.content!.split(' ')).toHaveLength(3);
    expect(sim.requests()[0].directives).toEqual(['serve=2', 'words=3']);
  });

  it('fail-first fails the first k identical requests with 503 (SDK retries succeed)', async () => {
    const retrying = new OpenAI({ baseURL: sim.url + '/v1', apiKey: 'x', maxRetries: 2 });
    const res = await retrying.chat.completions.create({ model: 'sim-gpt;fail-first=2', messages });
    expect(res.choices).toHaveLength(1);
    const log = sim.requests();
    expect(log.map((e) => e.status)).toEqual([503, 503, 200]);
    expect(new Set(log.map((e) => e.fingerprint)).size).toBe(1);
  });

  it('slow-first keeps the first request of a body waiting while the same body sent again answers (a hedge)', async () => {
    const model = 'sim-gpt;slow-first=1:20000';
    const primary = new AbortController();
    let primaryDone = false;
    const first = openai.chat.completions
      .create({ model, messages }, { signal: primary.signal, maxRetries: 0 })
      .then(() => (primaryDone = true))
      .catch(() => undefined);
    await eventually(async () => (sim.requests().length === 1 ? true : undefined), { what: 'the first request arrived' });
    const hedge = await openai.chat.completions.create({ model, messages });
    expect(hedge.choices).toHaveLength(1);
    expect(primaryDone).toBe(false);
    primary.abort();
    await first;
    const log = await eventually(async () => (sim.requests().some((e) => e.aborted) ? sim.requests() : undefined), {
      what: 'the abort logged',
    });
    expect(log.map((e) => [e.status, e.aborted])).toEqual([
      [expect.any(Number), true],
      [200, false],
    ]);
    expect(new Set(log.map((e) => e.fingerprint)).size).toBe(1);
  });

  it('applies latency and ttft', async () => {
    let started = Date.now();
    await openai.chat.completions.create({ model: 'sim-gpt;latency=120', messages });
    expect(Date.now() - started).toBeGreaterThanOrEqual(110);

    started = Date.now();
    const stream = await openai.chat.completions.create({ model: 'sim-gpt;ttft=120', messages, stream: true });
    const headersAt = Date.now() - started;
    let firstChunkAt = 0;
    for await (const _ of stream) firstChunkAt ||= Date.now() - started;
    expect(headersAt).toBeLessThan(100);
    expect(firstChunkAt).toBeGreaterThanOrEqual(110);
  });

  it('logs client aborts and stops the timer', async () => {
    const controller = new AbortController();
    const pending = openai.chat.completions.create({ model: 'sim-gpt;latency=5000', messages }, { signal: controller.signal });
    await waitFor(() => sim.requests().length === 1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await waitFor(() => sim.requests()[0].aborted);
    expect(sim.requests()[0]).toMatchObject({ aborted: true, status: 0 });
    expect(sim.requests()[0].durationMs!).toBeLessThan(2000);

    // mid-stream (headers sent, waiting for the first token)
    const streamAbort = new AbortController();
    const stream = await openai.chat.completions.create(
      { model: 'sim-gpt;ttft=5000', messages, stream: true },
      { signal: streamAbort.signal },
    );
    streamAbort.abort();
    await expect(
      (async () => {
        for await (const _ of stream);
      })(),
    ).resolves.toBeUndefined(); // SDK swallows user aborts
    await waitFor(() => sim.requests()[1]?.aborted === true);
    expect(sim.requests()[1]).toMatchObject({
      status: 200,
      stream: true,
      abortedAt: 'before_first_byte',
      wouldBill: { promptTokens: 12, cachedTokens: 0, outputTokens: 0, reasoningTokens: 0 },
    });
    expect(sim.requests()[1].durationMs!).toBeLessThan(2000);
  });

  it('records what a whole response aborted during its latency would bill: the prompt and the output generated so far', async () => {
    const body = JSON.stringify({ model: 'sim-gpt;latency=1000;words=40;reasoning=10', messages });
    const full = await openai.chat.completions.create(JSON.parse(body));
    // a plain HTTP client that closes its socket 400 ms in
    const req = request(`${sim.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    req.on('error', () => undefined);
    req.end(body);
    await new Promise((resolve) => setTimeout(resolve, 400));
    req.destroy();
    await waitFor(() => sim.requests()[1]?.aborted === true);
    const entry = sim.requests()[1];
    expect(entry).toMatchObject({ aborted: true, abortedAt: 'before_first_byte', status: 0 });
    // counted from the request's arrival, which on a busy box comes some ms after it was sent
    // (390 seen in a CI run): what matters is that the abort fell well inside the 1 s latency
    expect(entry.abortedAfterMs!).toBeGreaterThanOrEqual(300);
    expect(entry.abortedAfterMs!).toBeLessThan(900);
    const share = (entry.abortedAfterMs! - 50) / 1000; // the delay starts within a few ms of arrival
    expect(entry.wouldBill).toMatchObject({ promptTokens: full.usage!.prompt_tokens, cachedTokens: 0 });
    expect(entry.wouldBill!.outputTokens).toBeGreaterThanOrEqual(Math.floor(40 * share));
    expect(entry.wouldBill!.outputTokens).toBeLessThanOrEqual(Math.floor((40 * entry.abortedAfterMs!) / 1000));
    expect(entry.wouldBill!.reasoningTokens).toBeGreaterThanOrEqual(Math.floor(10 * share));
    expect(entry.wouldBill!.reasoningTokens).toBeLessThanOrEqual(Math.floor((10 * entry.abortedAfterMs!) / 1000));
    expect(sim.requests()[0]).toMatchObject({ aborted: false, abortedAt: null, wouldBill: null });
    const served = (await (await fetch(`${sim.url}/_sim/requests?since=1`)).json()) as { requests: unknown[] };
    expect(served.requests).toEqual([entry]);
  });

  it('a request scripted to fail would bill nothing when aborted during its delay', async () => {
    const controller = new AbortController();
    const pending = openai.chat.completions.create({ model: 'sim-gpt;latency=5000;status=503', messages }, { signal: controller.signal });
    await waitFor(() => sim.requests().length === 1);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await waitFor(() => sim.requests()[0].aborted);
    expect(sim.requests()[0]).toMatchObject({
      abortedAt: 'before_first_byte',
      wouldBill: { promptTokens: 0, cachedTokens: 0, outputTokens: 0, reasoningTokens: 0 },
    });
  });

  it('records a mid-stream abort with the output tokens streamed before it', async () => {
    const controller = new AbortController();
    const res = await fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-gpt;words=40;stall=5000', messages, stream: true }),
      signal: controller.signal,
    });
    // read up to the stall (about half the content), then go away
    const reader = res.body!.getReader();
    let text = '';
    const decoder = new TextDecoder();
    while (!text.includes('"content":" ')) text += decoder.decode((await reader.read()).value);
    await new Promise((resolve) => setTimeout(resolve, 100));
    controller.abort();
    await waitFor(() => sim.requests()[0]?.aborted === true);
    const entry = sim.requests()[0];
    expect(entry).toMatchObject({ aborted: true, abortedAt: 'mid_response', status: 200, stream: true });
    expect(entry.abortedAfterMs!).toBeLessThan(2000);
    expect(entry.wouldBill).toMatchObject({ promptTokens: 12, reasoningTokens: 0 });
    // about half of the 40 words (the stall comes after the event that ends past the middle of the content)
    expect(entry.wouldBill!.outputTokens).toBeGreaterThanOrEqual(18);
    expect(entry.wouldBill!.outputTokens).toBeLessThanOrEqual(22);
  });

  it('latency-tail: over seeded requests, the slow ones are exactly the seeded draws, at about the directive share', async () => {
    const spec = 'latency=0-5;latency-tail=200:250-300';
    const n = 40;
    const rng = createRng(7);
    const script = resolveScript(`sim-gpt;${spec}`).script;
    const expectedSlow = Array.from({ length: n }, () => drawLatency(rng, script) >= 250);
    for (let i = 0; i < n; i++) await openai.chat.completions.create({ model: `sim-gpt;${spec}`, messages });
    // fast ones take 0-5 ms, slow ones 250-300 ms: 150 ms splits them even on a loaded box
    const slow = sim.requests().map((e) => e.durationMs! >= 150);
    expect(slow).toEqual(expectedSlow);
    const slowShare = slow.filter(Boolean).length / n;
    expect(slowShare).toBeGreaterThan(0.05);
    expect(slowShare).toBeLessThan(0.4);
    expect(1 - onTimeProbability(spec, 249)).toBeCloseTo(0.2, 12);
  });
});

describe('Gemini generateContent', () => {
  it('serves candidateCount candidates with per-candidate maxOutputTokens and summed usage', async () => {
    const res = await gemini.models.generateContent({
      model: 'gemini-sim;reasoning=3;cached=2',
      contents: 'Tell me about spend limits please',
      config: { candidateCount: 2, maxOutputTokens: 8 },
    });
    expect(res.candidates).toHaveLength(2);
    res.candidates!.forEach((c, i) => {
      expect(c.index).toBe(i);
      expect(c.finishReason).toBe('MAX_TOKENS');
      expect(c.content!.role).toBe('model');
      expect(c.content!.parts![0].text!.split(' ')).toHaveLength(5);
    });
    const prompt = Math.ceil('Tell me about spend limits please'.length / 4) + 3;
    expect(res.usageMetadata).toEqual({
      promptTokenCount: prompt,
      candidatesTokenCount: 10,
      thoughtsTokenCount: 6,
      cachedContentTokenCount: 2,
      totalTokenCount: prompt + 16,
    });
    expect(res.modelVersion).toBe('gemini-sim');
    expect(res.responseId).toBe('simresp1');
    expect(sim.requests()[0]).toMatchObject({
      provider: 'gemini',
      path: '/v1beta/models/gemini-sim;reasoning=3;cached=2:generateContent',
      model: 'gemini-sim',
      candidateCount: 2,
      maxTokens: 8,
      stream: false,
      directives: ['cached=2', 'reasoning=3'],
    });
  });

  it('filters a candidate for SAFETY and still counts its tokens', async () => {
    const res = await gemini.models.generateContent({
      model: 'gemini-sim;filter=1;words=4',
      contents: 'hi',
      config: { candidateCount: 2 },
    });
    expect(res.candidates![0].finishReason).toBe('STOP');
    expect(res.candidates![1]).toMatchObject({ index: 1, finishReason: 'SAFETY' });
    expect(res.candidates![1].content?.parts).toBeUndefined();
    expect(res.candidates![1].safetyRatings!.some((r) => r.blocked)).toBe(true);
    expect(res.usageMetadata!.candidatesTokenCount).toBe(4 + 3);
  });

  it('blocks the prompt with promptFeedback and prompt-only usage', async () => {
    const res = await gemini.models.generateContent({ model: 'gemini-sim;block', contents: 'hi' });
    expect(res.candidates ?? []).toEqual([]);
    expect(res.promptFeedback!.blockReason).toBe('SAFETY');
    expect(res.usageMetadata).toEqual({ promptTokenCount: 4, totalTokenCount: 4 });
  });

  it('serve=1 silently drops candidates; no-usage drops usageMetadata', async () => {
    const res = await gemini.models.generateContent({
      model: 'gemini-sim;serve=1;no-usage',
      contents: 'hi',
      config: { candidateCount: 3 },
    });
    expect(res.candidates).toHaveLength(1);
    expect(res.usageMetadata).toBeUndefined();
  });

  it('maps reject-n and status to Gemini-shaped errors', async () => {
    const rejected = await gemini.models
      .generateContent({ model: 'gemini-sim;reject-n', contents: 'hi', config: { candidateCount: 2 } })
      .catch((e: unknown) => e as ApiError);
    expect(rejected).toBeInstanceOf(ApiError);
    expect((rejected as ApiError).status).toBe(400);
    const body = JSON.parse((rejected as ApiError).message);
    expect(body.error).toMatchObject({ code: 400, status: 'INVALID_ARGUMENT' });
    expect(body.error.message).toContain('candidateCount');

    const limited = await gemini.models.generateContent({ model: 'gemini-sim;status=429', contents: 'hi' }).catch((e: ApiError) => e);
    expect((limited as ApiError).status).toBe(429);
    expect(JSON.parse((limited as ApiError).message).error.status).toBe('RESOURCE_EXHAUSTED');
  });

  it('streams interleaved candidates over SSE with usage on the final chunk', async () => {
    const stream = await gemini.models.generateContentStream({
      model: 'gemini-sim;words=12;reasoning=2',
      contents: 'hi',
      config: { candidateCount: 2 },
    });
    const text = ['', ''];
    const finish: (string | undefined)[] = [];
    const order: number[] = [];
    const usages = [];
    for await (const chunk of stream) {
      for (const c of chunk.candidates ?? []) {
        order.push(c.index!);
        text[c.index!] += c.content?.parts?.map((p) => p.text).join('') ?? '';
        if (c.finishReason) finish[c.index!] = c.finishReason;
      }
      if (chunk.usageMetadata) usages.push(chunk.usageMetadata);
    }
    expect(order.slice(0, 4)).toEqual([0, 1, 0, 1]);
    expect(finish).toEqual(['STOP', 'STOP']);
    expect(usages).toHaveLength(1);
    expect(usages[0]).toMatchObject({ candidatesTokenCount: 24, thoughtsTokenCount: 4 });
    expect(sim.requests()[0]).toMatchObject({ path: '/v1beta/models/gemini-sim;words=12;reasoning=2:streamGenerateContent', stream: true });
    expect(text.map((t) => t.split(' ').length)).toEqual([12, 12]);

    // Gemini's stream flag lives in the path, so the body (and thus the text) matches the unary call
    const plain = await gemini.models.generateContent({
      model: 'gemini-sim;words=12;reasoning=2',
      contents: 'hi',
      config: { candidateCount: 2 },
    });
    expect(plain.candidates!.map((c) => c.content!.parts![0].text)).toEqual(text);
  });

  it('returns a JSON array of chunks for streamGenerateContent without alt=sse', async () => {
    const res = await fetch(`${sim.url}/v1beta/models/gemini-sim;words=3:streamGenerateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
    expect(res.headers.get('content-type')).toContain('application/json');
    const chunks = (await res.json()) as { candidates?: unknown[]; usageMetadata?: { candidatesTokenCount: number } }[];
    expect(chunks.length).toBe(2);
    expect(chunks[0].candidates).toHaveLength(1);
    expect(chunks[1].usageMetadata!.candidatesTokenCount).toBe(3);
  });

  it('fragment + echo over SSE: the SDK assembles the prompt text exactly', async () => {
    const text = 'naïve 日本 🚀 café — ∑ ✓ and some more words to fill two chunks';
    const stream = await gemini.models.generateContentStream({ model: 'gemini-sim;fragment;echo', contents: text });
    let got = '';
    for await (const chunk of stream) got += chunk.text ?? '';
    expect(got).toBe(text);
  });

  it('cut-stream makes the SDK stream fail after the content', async () => {
    const stream = await gemini.models.generateContentStream({ model: 'gemini-sim;cut-stream', contents: 'hi' });
    let text = '';
    await expect(
      (async () => {
        for await (const chunk of stream) text += chunk.text ?? '';
      })(),
    ).rejects.toThrow();
    expect(text.split(' ')).toHaveLength(12);
  });
});

describe("the day's export (issue 15 ground truth)", () => {
  const exportOf = async (format: 'jsonl' | 'csv') => {
    const res = await fetch(`${sim.url}/_sim/export?day=${new Date().toISOString().slice(0, 10)}&format=${format}`);
    expect(res.status).toBe(200);
    return res.text();
  };

  it('bills what was generated: in full when usage was withheld or under-reported or candidates were extra, part of an aborted answer, nothing for an error', async () => {
    const full = await openai.chat.completions.create({ model: 'sim-gpt;words=30;reasoning=5', messages });
    const withheld = await openai.chat.completions.create({ model: 'sim-gpt;words=20;no-usage', messages });
    const under = await openai.chat.completions.create({ model: 'sim-gpt;words=10;under-usage', messages, n: 2 });
    await expect(openai.chat.completions.create({ model: 'sim-gpt;status=503', messages })).rejects.toThrow();
    const gem = await gemini.models.generateContent({ model: 'gemini-sim;words=12', contents: 'Say something about spend limits.' });
    // aborted 300 ms into a 1 s delay, carrying the gateway's attempt id
    const body = JSON.stringify({ model: 'sim-gpt;latency=1000;words=40', messages });
    const req = request(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-client-request-id': 'att-loser-1' },
    });
    req.on('error', () => undefined);
    req.end(body);
    await new Promise((resolve) => setTimeout(resolve, 300));
    req.destroy();
    await waitFor(() => sim.requests()[5]?.aborted === true);

    const lines = (await exportOf('jsonl'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, number | string>);
    // OpenAI: the x-request-id header (what the gateway records); Gemini: the responseId
    expect(lines.map((l) => l.provider_request_id)).toEqual([
      full._request_id,
      withheld._request_id,
      under._request_id,
      gem.responseId,
      'sim-unanswered-6',
    ]);
    expect(full._request_id).toMatch(/^req_sim_/);
    expect(lines[0]).toMatchObject({
      input_tokens: full.usage!.prompt_tokens,
      output_tokens_total: 35,
      reasoning_tokens: 5,
      model: 'sim-gpt',
    });
    expect(withheld.usage).toBeUndefined();
    expect(lines[1]).toMatchObject({ output_tokens_total: 20 });
    expect(under.usage!.completion_tokens).toBe(10); // the response under-reports: one candidate of two
    expect(lines[2]).toMatchObject({ output_tokens_total: 20 });
    expect(lines[3]).toMatchObject({ output_tokens_total: 12, model: 'gemini-sim' });
    expect(lines[4]).toMatchObject({ client_request_id: 'att-loser-1', input_tokens: full.usage!.prompt_tokens });
    expect(lines[4].output_tokens_total).toBeGreaterThan(0);
    expect(lines[4].output_tokens_total).toBeLessThan(40);
    expect(JSON.stringify(lines)).not.toContain('spend limits');

    const csv = (await exportOf('csv')).trim().split('\n');
    expect(csv[0]).toBe(
      'provider_request_id,client_request_id,input_tokens,cached_input_tokens,output_tokens_total,reasoning_tokens,model,timestamp',
    );
    expect(csv).toHaveLength(6);
    expect(csv[1].startsWith(`${full._request_id},,`)).toBe(true);
    expect((await fetch(`${sim.url}/_sim/export?day=yesterday`)).status).toBe(400);
  });
});

describe('control endpoints', () => {
  it('serves health, metrics and the request log with since and DELETE', async () => {
    expect(await (await fetch(`${sim.url}/health`)).json()).toEqual({ status: 'ok' });

    await openai.chat.completions.create({ model: 'sim-gpt;serve=1', messages, n: 2, max_tokens: 50 });
    await openai.chat.completions.create({ model: 'sim-gpt', messages });
    const all = (await (await fetch(`${sim.url}/_sim/requests`)).json()) as { requests: Record<string, unknown>[] };
    expect(all.requests).toHaveLength(2);
    expect(all.requests[0]).toMatchObject({
      seq: 1,
      path: '/v1/chat/completions',
      provider: 'openai',
      model: 'sim-gpt',
      candidateCount: 2,
      maxTokens: 50,
      stream: false,
      directives: ['serve=1'],
      status: 200,
      aborted: false,
    });
    expect(all.requests[1].candidateCount).toBeNull();
    expect(all.requests[0].fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(all)).not.toContain('spend limits');

    const since = (await (await fetch(`${sim.url}/_sim/requests?since=1`)).json()) as { requests: { seq: number }[] };
    expect(since.requests.map((r) => r.seq)).toEqual([2]);

    const metrics = await (await fetch(`${sim.url}/metrics`)).text();
    expect(metrics).toContain('provider_sim_requests_total{endpoint="openai.chat_completions",scenario="serve",status="200"} 1');

    await fetch(`${sim.url}/_sim/requests`, { method: 'DELETE' });
    expect(sim.requests()).toEqual([]);
  });

  it('answers malformed JSON with a provider-shaped 400 and keeps running', async () => {
    const post = (path: string) =>
      fetch(sim.url + path, { method: 'POST', body: '{"model":', headers: { 'content-type': 'application/json' } });
    const oa = await post('/v1/chat/completions');
    expect(oa.status).toBe(400);
    expect(((await oa.json()) as { error: { type: string } }).error.type).toBe('invalid_request_error');
    const gm = await post('/v1beta/models/gemini-sim:generateContent');
    expect(gm.status).toBe(400);
    expect(((await gm.json()) as { error: { status: string } }).error.status).toBe('INVALID_ARGUMENT');
    expect((await fetch(`${sim.url}/health`)).status).toBe(200);
  });
});

describe('key-sha256: an upstream that requires its key', () => {
  const hash = (k: string) => createHash('sha256').update(k).digest('hex');

  it('OpenAI: answers only a matching Bearer key; the log says where the key was and whether it matched, never the key', async () => {
    const model = `sim-gpt;key-sha256=${hash('sk-right')}`;
    const right = new OpenAI({ baseURL: sim.url + '/v1', apiKey: 'sk-right', maxRetries: 0 });
    await expect(right.chat.completions.create({ model, messages })).resolves.toMatchObject({ object: 'chat.completion' });
    const wrong = await openai.chat.completions.create({ model, messages }).catch((e: unknown) => e);
    expect(wrong).toMatchObject({ status: 401, code: 'invalid_api_key' });
    expect(sim.requests().map((r) => [r.keyHeader, r.keyVerdict, r.status])).toEqual([
      ['authorization', 'matched', 200],
      ['authorization', 'mismatched', 401],
    ]);
    expect(JSON.stringify(sim.requests())).not.toContain('sk-right');
  });

  it('Gemini: reads x-goog-api-key', async () => {
    const model = `gemini-sim;key-sha256=${hash('AIza-right')}`;
    const right = new GoogleGenAI({ apiKey: 'AIza-right', httpOptions: { baseUrl: sim.url } });
    await expect(right.models.generateContent({ model, contents: 'hi' })).resolves.toHaveProperty('candidates');
    await expect(gemini.models.generateContent({ model, contents: 'hi' })).rejects.toBeInstanceOf(ApiError);
    expect(sim.requests().map((r) => [r.keyHeader, r.keyVerdict, r.status])).toEqual([
      ['x-goog-api-key', 'matched', 200],
      ['x-goog-api-key', 'mismatched', 401],
    ]);
  });
});

describe('billable usage detail', () => {
  it('chat: audio output as message.audio with audio tokens, the asked tier echoed, cache writes and audio input', async () => {
    const data = (await openai.chat.completions.create({
      model: 'sim-gpt;words=4;audio-out=9;cache-write=3;audio-in=2',
      messages,
      modalities: ['text', 'audio'],
      audio: { voice: 'alloy', format: 'wav' },
      service_tier: 'priority',
    })) as OpenAI.ChatCompletion & { usage: { prompt_tokens_details: Record<string, number> } };
    expect(data.choices[0].message.content).toBeNull();
    expect(data.choices[0].message.audio?.transcript?.split(' ')).toHaveLength(4);
    expect(data.service_tier).toBe('priority');
    expect(data.usage).toMatchObject({
      completion_tokens: 13,
      prompt_tokens_details: { audio_tokens: 2, cache_write_tokens: 3 },
      completion_tokens_details: { audio_tokens: 9 },
    });
  });

  it('chat: no tier field for a request that names none; a scripted tier wins over the asked one, on every chunk', async () => {
    const plain = await openai.chat.completions.create({ model: 'sim-gpt', messages });
    expect(plain).not.toHaveProperty('service_tier');
    const stream = await openai.chat.completions.create({
      model: 'sim-gpt;tier=flex',
      messages,
      service_tier: 'priority',
      stream: true,
      stream_options: { include_usage: true },
    });
    const tiers = new Set<unknown>();
    for await (const chunk of stream) tiers.add(chunk.service_tier);
    expect([...tiers]).toEqual(['flex']);
  });

  it('responses: web_search_call items per search, one call per other hosted tool, the tier resolved at the end', async () => {
    const data = await openai.responses.create({
      model: 'sim-gpt;searches=2',
      input: 'hi',
      tools: [{ type: 'web_search' }, { type: 'code_interpreter', container: { type: 'auto' } }],
      service_tier: 'auto',
    });
    expect(data.output.map((o) => o.type)).toEqual(['web_search_call', 'web_search_call', 'code_interpreter_call', 'message']);
    expect(data.service_tier).toBe('default');
    const stream = await openai.responses.create({ model: 'sim-gpt', input: 'hi', tools: [{ type: 'web_search' }], stream: true });
    const added: string[] = [];
    for await (const event of stream) if (event.type === 'response.output_item.added') added.push(event.item.type);
    expect(added).toEqual(['web_search_call', 'message']);
  });

  it('gemini: image and audio output with modality breakdowns, grounding metadata for search and maps tools', async () => {
    const res = await gemini.models.generateContent({
      model: 'gemini-sim;words=3;image-out=20;searches=3',
      contents: 'Draw the office',
      config: { responseModalities: ['TEXT', 'IMAGE'], tools: [{ googleSearch: {} }, { googleMaps: {} }] },
    });
    const c = res.candidates![0];
    expect(c.content!.parts!.map((p) => (p.inlineData ? p.inlineData.mimeType : 'text'))).toEqual(['text', 'image/png']);
    expect(c.groundingMetadata?.webSearchQueries).toHaveLength(3);
    expect(c.groundingMetadata?.groundingChunks?.some((g) => g.maps)).toBe(true);
    expect(res.usageMetadata).toMatchObject({
      candidatesTokenCount: 23,
      candidatesTokensDetails: [
        { modality: 'TEXT', tokenCount: 3 },
        { modality: 'IMAGE', tokenCount: 20 },
      ],
    });
    const plain = await gemini.models.generateContent({ model: 'gemini-sim', contents: 'hi' });
    expect(plain.candidates![0].groundingMetadata).toBeUndefined();
    expect(plain.usageMetadata).not.toHaveProperty('candidatesTokensDetails');
  });

  it('gemini stream: grounding and audio arrive on the final piece', async () => {
    const stream = await gemini.models.generateContentStream({
      model: 'gemini-sim;words=12;audio-in=4',
      contents: 'Read it out',
      config: { responseModalities: ['AUDIO'], tools: [{ googleSearch: {} }] },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const withGrounding = chunks.filter((ch) => ch.candidates?.[0]?.groundingMetadata);
    expect(withGrounding).toHaveLength(1);
    expect(withGrounding[0].candidates![0].finishReason).toBe('STOP');
    const last = chunks[chunks.length - 1];
    expect(last.usageMetadata?.candidatesTokensDetails).toContainEqual({ modality: 'AUDIO', tokenCount: 32 });
    expect(last.usageMetadata?.promptTokensDetails).toContainEqual({ modality: 'AUDIO', tokenCount: 4 });
  });
});
