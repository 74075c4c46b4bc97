import { Readable } from 'node:stream';
import fc from 'fast-check';
import { attemptCompletedV1, EVIDENCE_BOUNDS } from '@gateway/contracts';
import type { ParsedResponse, StreamAccumulator } from './adapter';
import { GeminiGenerateAdapter } from './gemini-generate.adapter';
import { OpenAiChatAdapter } from './openai-chat.adapter';
import { OpenAiResponsesAdapter } from './openai-responses.adapter';
import { AnswerTooLarge, boundedResponse, DistinctCount, readBounded, STREAM_KEYS_MAX, UNRECOGNISED_REASON } from './bounded';
import { adapterFor, adapterForCommand } from './index';
import { SseDecoder } from './sse';

/**
 * A provider's answer is as untrusted as a client's request: whatever it puts in an id, a reason or
 * a usage field name reaches the attempt row, its jsonb and `attempt.completed` only within
 * `EVIDENCE_BOUNDS`, through every adapter the gateway hands out.
 */
const NUL_ID = 'chatcmpl-\u0000abc';
const LONG_ID = 'r'.repeat(3000); // past the btree row limit of attempt_provider_request_id_idx

const parsed = (over: Partial<ParsedResponse> = {}): ParsedResponse => ({
  providerRequestId: 'req_1',
  candidates: [{ index: 0, finishReason: 'stop', hasContent: true }],
  promptBlockReason: null,
  usage: null,
  serviceTier: null,
  featureCalls: {},
  ...over,
});

/** Usage whose only oddity is the unknown field names the provider sent. */
const usageWith = (unknownFields: string[]): NonNullable<ParsedResponse['usage']> => ({
  inputTokens: 1,
  cachedInputTokens: 0,
  cacheWriteInputTokens: 0,
  audioInputTokens: 0,
  outputTokensTotal: 1,
  reasoningTokens: 0,
  audioOutputTokens: 0,
  imageOutputTokens: 0,
  unknownFields,
});

describe('boundedResponse', () => {
  it('keeps what real providers send as it is', () => {
    const real = parsed({
      providerRequestId: 'Vj0QaK3uAcKInvgP8Ji7kA0',
      candidates: [
        { index: 0, finishReason: 'MAX_TOKENS', hasContent: true },
        { index: 1, finishReason: 'content_filter', hasContent: false },
        { index: 2, finishReason: null, hasContent: false },
      ],
      promptBlockReason: 'PROHIBITED_CONTENT',
    });
    expect(boundedResponse(real)).toEqual(real);
  });

  it.each([
    ['a NUL (jsonb refuses it)', NUL_ID],
    ['3,000 characters (past the index row size)', LONG_ID],
    ['a space', 'req 1'],
    ['a line break (a forged log line)', 'req_1\n{"level":50}'],
    ['non-ASCII', 'réq'],
    ['empty', ''],
  ])('drops a provider request id with %s', (_, id) => {
    expect(boundedResponse(parsed({ providerRequestId: id })).providerRequestId).toBeNull();
  });

  it('makes a reason that is not a short name `unrecognised`, never null (a finish stays a finish)', () => {
    const r = boundedResponse(
      parsed({ promptBlockReason: 'x'.repeat(65), candidates: [{ index: 0, finishReason: 'st\u0000op', hasContent: true }] }),
    );
    expect(r.promptBlockReason).toBe(UNRECOGNISED_REASON);
    expect(r.candidates[0].finishReason).toBe(UNRECOGNISED_REASON);
  });

  it('reads at most 128 candidates', () => {
    const many = Array.from({ length: 10_000 }, (_, index) => ({ index, finishReason: 'stop', hasContent: true }));
    expect(boundedResponse(parsed({ candidates: many })).candidates).toHaveLength(EVIDENCE_BOUNDS.candidatesMax);
  });

  it('cuts unknown usage field names to 32 printable names of at most 128 characters, the last saying how many more', () => {
    const names = Array.from({ length: 40 }, (_, i) => `f\u0000${'x'.repeat(200)}${i}`);
    const fields = boundedResponse(parsed({ usage: usageWith(names) })).usage?.unknownFields ?? [];
    expect(fields).toHaveLength(32);
    expect(fields[0]).toBe(`f?${'x'.repeat(126)}`);
    expect(fields[31]).toBe('(9 more)');
  });

  it('whatever the strings, the result is within the bounds the event schema and the columns take, and bounding it again changes nothing', () => {
    const anyString = fc.string({ unit: 'binary', maxLength: 400 });
    fc.assert(
      fc.property(
        fc.option(anyString),
        fc.option(anyString),
        fc.array(fc.option(anyString), { maxLength: 140 }),
        fc.array(anyString, { maxLength: 40 }),
        (id, block, reasons, fields) => {
          const r = boundedResponse(
            parsed({
              providerRequestId: id,
              promptBlockReason: block,
              candidates: reasons.map((finishReason, index) => ({ index, finishReason, hasContent: true })),
              usage: usageWith(fields),
            }),
          );
          expect(r.providerRequestId === null || /^[\x21-\x7e]{1,256}$/.test(r.providerRequestId)).toBe(true);
          for (const reason of [r.promptBlockReason, ...r.candidates.map((c) => c.finishReason)]) {
            expect(reason === null || /^[A-Za-z0-9_.:-]{1,64}$/.test(reason)).toBe(true);
          }
          expect(r.candidates.length).toBeLessThanOrEqual(EVIDENCE_BOUNDS.candidatesMax);
          expect(attemptCompletedV1.shape.usage_unknown_fields.safeParse(r.usage?.unknownFields).success).toBe(true);
          expect(boundedResponse(r)).toEqual(r);
        },
      ),
    );
  });
});

describe('every adapter the gateway hands out bounds its answers', () => {
  it('OpenAI chat, whole: an id in the body with a NUL, a finish reason of 5,000 characters', () => {
    const r = adapterFor('openai-chat').parseResponse(
      {
        id: NUL_ID,
        choices: [{ index: 0, finish_reason: 'x'.repeat(5000), message: { role: 'assistant', content: 'hi' } }],
        usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
      },
      {},
    );
    expect(r.providerRequestId).toBeNull();
    expect(r.candidates[0].finishReason).toBe(UNRECOGNISED_REASON);
    expect(r.usage?.outputTokensTotal).toBe(7);
  });

  it('Gemini, streamed: a responseId of 3,000 characters and a block reason with a line break', () => {
    const acc = adapterFor('gemini-generate').streamAccumulator({});
    acc.push(
      JSON.stringify({
        responseId: LONG_ID,
        promptFeedback: { blockReason: 'SAFETY\nforged' },
        candidates: [{ index: 0, content: { parts: [{ text: 'hi' }] }, finishReason: 'STOP' }],
        usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 7, totalTokenCount: 12 },
      }),
    );
    const r = acc.result();
    expect(r.providerRequestId).toBeNull();
    expect(r.promptBlockReason).toBe(UNRECOGNISED_REASON);
    expect(r.candidates[0].finishReason).toBe('STOP');
    expect(acc.sawUsage).toBe(true);
  });

  it('OpenAI Responses, whole: the id kept when it is a sane one', () => {
    const r = adapterForCommand({ api_kind: 'openai-responses', route: { provider_kind: 'openai-chat' } }).parseResponse(
      { id: 'resp_123', status: 'completed', output: [], usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 } },
      {},
    );
    expect(r.providerRequestId).toBe('resp_123');
  });
});

describe('readBounded: a whole answer read up to a bound', () => {
  const pieces = (...sizes: number[]) => sizes.map((n) => new Uint8Array(n).fill(0x61));

  it('reads an answer up to the bound, a character split across reads joined', async () => {
    const euro = Buffer.from('€');
    const body = [euro.subarray(0, 1), euro.subarray(1), ...pieces(5)];
    await expect(readBounded(Readable.from(body), 8)).resolves.toBe('€aaaaa');
  });

  it('past the bound: AnswerTooLarge, and the body is not read on (the stream destroyed)', async () => {
    const source = Readable.from(pieces(4, 4, 4, 4));
    const read = readBounded(source, 10);
    await expect(read).rejects.toBeInstanceOf(AnswerTooLarge);
    await expect(read).rejects.toMatchObject({ limitBytes: 10 });
    expect(source.destroyed).toBe(true);
  });
});

describe('SseDecoder with a bound on one event', () => {
  const bytes = (s: string) => Buffer.from(s);

  it('events of any number pass while each ends within the bound', () => {
    const d = new SseDecoder(32);
    const all: string[] = [];
    for (let i = 0; i < 100; i++) all.push(...d.push(bytes(`data: ${i}\r\n\r\n`)));
    all.push(...d.end());
    expect(all).toHaveLength(100);
  });

  it('an event that never ends: the events before it are handed out, then the next read throws', () => {
    const d = new SseDecoder(64);
    expect(d.push(bytes(`data: first\n\ndata: ${'x'.repeat(100)}`))).toEqual(['first']);
    expect(() => d.push(bytes('x'))).toThrow(AnswerTooLarge);
  });

  it('an event grown read by read past the bound (no read completes one)', () => {
    const d = new SseDecoder(64);
    d.push(bytes('data: '));
    for (let i = 0; i < 6; i++) d.push(bytes('y'.repeat(10)));
    expect(() => d.end()).toThrow(AnswerTooLarge);
  });

  it('CRLF line ends are not taken for an event end', () => {
    const d = new SseDecoder(64);
    // 48 characters of an unfinished event after the first event's end; a CRLF taken for a blank line would count 0
    expect(d.push(bytes(`data: a\n\ndata: ${'b'.repeat(40)}\r\n`))).toEqual(['a']);
    d.push(bytes(`data: ${'c'.repeat(20)}\r\n`));
    expect(() => d.push(bytes('data: d\r\n'))).toThrow(AnswerTooLarge);
  });
});

describe('a usage total no provider could mean is unreadable, never zero', () => {
  const chat = (usage: string) =>
    adapterFor('openai-chat').parseResponse(
      JSON.parse(`{"id":"x","choices":[{"index":0,"finish_reason":"stop","message":{"content":"hi"}}],"usage":${usage}}`),
      {},
    ).usage;

  it.each([
    ['1e999 (Infinity once parsed)', '{"prompt_tokens":1e999,"completion_tokens":7,"total_tokens":16}'],
    ['a negative count', '{"prompt_tokens":9,"completion_tokens":-7,"total_tokens":2}'],
    ['a fraction', '{"prompt_tokens":9,"completion_tokens":7.5,"total_tokens":16}'],
    ['a total as a string', '{"prompt_tokens":9,"completion_tokens":7,"total_tokens":"16"}'],
    ['beyond 2^53', '{"prompt_tokens":9007199254740993,"completion_tokens":7,"total_tokens":16}'],
    ['a cache write as a string', '{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16,"cache_creation_input_tokens":"5"}'],
  ])('OpenAI chat: %s', (_, usage) => {
    expect(chat(usage)).toBeNull();
  });

  it('the same usage with sane counts is read (and null details count as absent)', () => {
    expect(chat('{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16,"cache_creation_input_tokens":null}')).toMatchObject({
      inputTokens: 9,
      outputTokensTotal: 7,
    });
  });

  it('Gemini, streamed: thoughts reported as 1e999 (they are added to the output)', () => {
    const acc = adapterFor('gemini-generate').streamAccumulator({});
    acc.push(
      '{"candidates":[{"index":0,"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],' +
        '"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":7,"thoughtsTokenCount":1e999,"totalTokenCount":12}}',
    );
    expect(acc.result().usage).toBeNull();
  });

  it('OpenAI Responses: output_tokens negative', () => {
    const r = adapterForCommand({ api_kind: 'openai-responses', route: { provider_kind: 'openai-chat' } }).parseResponse(
      { id: 'resp_1', status: 'completed', output: [], usage: { input_tokens: 3, output_tokens: -4, total_tokens: 7 } },
      {},
    );
    expect(r.usage).toBeNull();
  });
});

/**
 * A stream has no total bound, so what an accumulator keeps must not grow with it: candidate
 * indexes, hosted tool call ids and grounding queries the provider chooses are kept within
 * `candidatesMax` and STREAM_KEYS_MAX, and a count that bills is never below the truth.
 */
describe("what a stream's accumulator keeps, however long the stream", () => {
  const sse = (o: unknown) => JSON.stringify(o);

  // the adapters themselves, not `boundedAdapter`'s wrapping: what they hold while the stream runs
  it.each([
    ['openai-chat', () => new OpenAiChatAdapter(), (i: number) => sse({ id: 'c', choices: [{ index: i, delta: { content: 'x' } }] })],
    [
      'gemini-generate',
      () => new GeminiGenerateAdapter(),
      (i: number) => sse({ candidates: [{ index: i, content: { parts: [{ text: 'x' }] } }] }),
    ],
  ] as const)('%s: 10,000 distinct candidate indexes leave candidatesMax entries', (_, adapter, chunk) => {
    const acc = adapter().streamAccumulator({});
    for (let i = 0; i < 10_000; i++) acc.push(chunk(i));
    const { candidates } = acc.result();
    expect(candidates).toHaveLength(EVIDENCE_BOUNDS.candidatesMax);
    expect(candidates.map((c) => c.index)).toEqual(Array.from({ length: EVIDENCE_BOUNDS.candidatesMax }, (_, i) => i));
  });

  it('an index the accumulator holds is still updated once it is full (its finish arrives last)', () => {
    const acc = new OpenAiChatAdapter().streamAccumulator({});
    for (let i = 0; i < 200; i++) acc.push(sse({ choices: [{ index: i, delta: { content: 'x' } }] }));
    acc.push(sse({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
    expect(acc.result().candidates[0]).toMatchObject({ index: 0, finishReason: 'stop', hasContent: true });
  });

  describe('hosted tool calls of a Responses stream cut before its end', () => {
    const item = (id: string, type: string, extra: object = {}) => ({ id, type, status: 'completed', ...extra });
    const push = (acc: StreamAccumulator, ev: string, it: object) => acc.push(sse({ type: ev, item: it }));
    const responses = () => new OpenAiResponsesAdapter().streamAccumulator({});

    it('count each call once, added and done, and leave message items out', () => {
      const acc = responses();
      acc.push(sse({ type: 'response.created', response: { id: 'resp_1' } }));
      for (const id of ['ws_1', 'ws_2', 'ws_3']) {
        push(acc, 'response.output_item.added', item(id, 'web_search_call'));
        push(acc, 'response.output_item.done', item(id, 'web_search_call'));
      }
      push(acc, 'response.output_item.done', item('fs_1', 'file_search_call'));
      push(acc, 'response.output_item.done', item('msg_1', 'message', { content: [{ type: 'output_text', text: 'y'.repeat(100_000) }] }));
      expect(acc.result().featureCalls).toEqual({ web_search: 3, file_search: 1 });
    });

    it(`past ${STREAM_KEYS_MAX} distinct ids the count goes on, never below the truth`, () => {
      const acc = responses();
      const n = STREAM_KEYS_MAX + 500;
      for (let i = 0; i < n; i++) {
        push(acc, 'response.output_item.added', item(`ws_${i}`, 'web_search_call'));
        push(acc, 'response.output_item.done', item(`ws_${i}`, 'web_search_call'));
      }
      const calls = acc.result().featureCalls.web_search ?? 0;
      expect(calls).toBeGreaterThanOrEqual(n);
      expect(calls).toBeLessThanOrEqual(2 * n);
    });
  });

  it('Gemini 3 grounding queries: distinct ones counted, in bounded memory, never below the truth', () => {
    const acc = new GeminiGenerateAdapter().streamAccumulator({});
    const grounded = (queries: string[]) =>
      sse({ modelVersion: 'gemini-3-pro', candidates: [{ index: 0, groundingMetadata: { webSearchQueries: queries } }] });
    acc.push(grounded(['same query', 'same query', 'q'.repeat(1_000_000)]));
    for (let i = 0; i < STREAM_KEYS_MAX + 100; i++) acc.push(grounded([`query ${i}`]));
    expect(acc.result().featureCalls.search_grounding).toBe(2 + STREAM_KEYS_MAX + 100);
  });

  it('DistinctCount: exact below its bound, and above it never below the truth (fast-check)', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ maxLength: 4 }), { maxLength: 3000 }), (values) => {
        const count = new DistinctCount();
        for (const v of values) count.add(v);
        const truth = new Set(values).size;
        if (truth <= STREAM_KEYS_MAX) expect(count.size).toBe(truth);
        else expect(count.size).toBeGreaterThanOrEqual(truth);
      }),
      { numRuns: 50 },
    );
  });
});
