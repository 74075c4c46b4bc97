import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DispatchCommandV1 } from '@gateway/contracts';
import { GeminiGenerateAdapter } from './gemini-generate.adapter';
import { NO_USAGE_DETAILS } from './adapter';
import { sseData, NOTHING_PARSED } from './sse-testing';

const fixture = (name: string): string => readFileSync(join(__dirname, 'fixtures', name), 'utf8');
const json = (name: string): unknown => JSON.parse(fixture(name));

function command(over: Partial<DispatchCommandV1> = {}, route: Partial<DispatchCommandV1['route']> = {}): DispatchCommandV1 {
  return {
    action_id: 'act-1',
    request_id: 'req-1',
    workload_id: 'wl-1',
    environment: 'test',
    api_kind: 'gemini-generate',
    stream: false,
    route: {
      route_id: 'route-gemini',
      route_version: 2,
      model_alias: 'approved-gemini',
      provider_kind: 'gemini-generate',
      base_url: 'https://generativelanguage.example/',
      upstream_model: 'gemini-2.0-flash',
      candidate_param: 'candidateCount',
      output_cap_param: 'maxOutputTokens',
      output_cap_semantics: 'per_candidate',
      price_revision_id: 'price-1',
      ...route,
    },
    requested_candidates: null,
    effective_candidates: 1,
    output_ceiling: 512,
    include_usage_for_client: false,
    deadline: '2026-01-01T00:00:30Z',
    dispatch_deadline: '2026-01-01T00:00:10Z',
    acceptance: { allow_length: false, allow_content_filter: false },
    request: { model: 'approved-gemini', contents: [{ role: 'user', parts: [{ text: 'hi' }] }] },
    ...over,
  };
}

function accumulate(text: string, size: number, headers: Record<string, string> = {}) {
  const acc = new GeminiGenerateAdapter().streamAccumulator(headers);
  for (const data of sseData(text, size)) expect(acc.push(data)).toBe(true);
  return acc;
}

const sseOf = (...events: unknown[]): string => events.map((e) => `data: ${JSON.stringify(e)}\r\n\r\n`).join('');

describe('GeminiGenerateAdapter.buildRequest', () => {
  const adapter = new GeminiGenerateAdapter();

  it('always writes the contract output cap, overriding the client value and keeping the rest of generationConfig', () => {
    const req = adapter.buildRequest(
      command({ output_ceiling: 300, request: { contents: [], generationConfig: { maxOutputTokens: 9000, temperature: 0.2 } } }),
    );
    expect(req.body.generationConfig).toEqual({ candidateCount: 1, maxOutputTokens: 300, temperature: 0.2 });
  });

  it('writes the count and the cap even when the client sent no generationConfig', () => {
    expect(adapter.buildRequest(command()).body.generationConfig).toEqual({ candidateCount: 1, maxOutputTokens: 512 });
  });

  it('exactly one candidate field and one cap field reach upstream, whatever spellings the request still held', () => {
    const req = adapter.buildRequest(
      command({
        effective_candidates: 2,
        output_ceiling: 300,
        request: {
          contents: [],
          generation_config: { candidate_count: 8, max_output_tokens: 9000, top_k: 3 },
          generationConfig: { candidateCount: 8, max_output_tokens: 9000 },
        },
      }),
    );
    expect(req.body).not.toHaveProperty('generation_config');
    expect(req.body.generationConfig).toEqual({ candidateCount: 2, maxOutputTokens: 300, top_k: 3 });
  });

  it.each([
    { name: 'omitted, effective 1 (written explicitly)', requested: null, effective: 1, param: 'candidateCount', sent: 1 },
    { name: 'explicit candidateCount=1', requested: 1, effective: 1, param: 'candidateCount', sent: 1 },
    { name: 'explicit candidateCount=3', requested: 3, effective: 3, param: 'candidateCount', sent: 3 },
    { name: 'contract names another parameter', requested: 2, effective: 2, param: 'candidate_count', sent: 2 },
  ])('candidate parameter: $name', ({ requested, effective, param, sent }) => {
    const req = adapter.buildRequest(
      command(
        {
          requested_candidates: requested,
          effective_candidates: effective,
          request: { contents: [], generationConfig: { candidateCount: 8 } },
        },
        { candidate_param: param },
      ),
    );
    const config = req.body.generationConfig as Record<string, unknown>;
    expect(config[param]).toBe(sent);
    if (param !== 'candidateCount') expect(config).not.toHaveProperty('candidateCount');
  });

  it('defaults the candidate parameter to candidateCount when the contract names none', () => {
    const req = adapter.buildRequest(command({ requested_candidates: 2, effective_candidates: 2 }, { candidate_param: null }));
    expect(req.body.generationConfig).toMatchObject({ candidateCount: 2 });
  });

  it.each([
    { stream: false, url: 'https://generativelanguage.example/v1beta/models/gemini-2.0-flash:generateContent' },
    { stream: true, url: 'https://generativelanguage.example/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse' },
  ])('builds the method URL (stream: $stream)', ({ stream, url }) => {
    expect(adapter.buildRequest(command({ stream })).url).toBe(url);
  });

  it('encodes the upstream model in the path', () => {
    expect(adapter.buildRequest(command({}, { upstream_model: 'tunedModels/x y' })).url).toBe(
      'https://generativelanguage.example/v1beta/models/tunedModels%2Fx%20y:generateContent',
    );
  });

  it('drops the alias model field from the body and sends the upstream key as x-goog-api-key', () => {
    const req = adapter.buildRequest(command(), 'AIza-upstream');
    expect(req.body).not.toHaveProperty('model');
    expect(req.headers).toEqual({ 'content-type': 'application/json', 'x-goog-api-key': 'AIza-upstream' });
    expect(adapter.buildRequest(command()).headers).not.toHaveProperty('x-goog-api-key');
  });

  it('does not mutate the command request', () => {
    const cmd = command({
      requested_candidates: 2,
      effective_candidates: 2,
      request: { contents: [], generationConfig: { candidateCount: 5, maxOutputTokens: 1 } },
    });
    const before = structuredClone(cmd.request);
    adapter.buildRequest(cmd);
    expect(cmd.request).toEqual(before);
  });
});

describe('GeminiGenerateAdapter.parseResponse', () => {
  const adapter = new GeminiGenerateAdapter();

  it.each([
    {
      name: '3 candidates, the middle one filtered for SAFETY without parts',
      file: 'gemini-generate-3-candidates-one-safety.json',
      expected: {
        providerRequestId: 'kx8QaJ2vIo2_nvgP3pS1qAo',
        candidates: [
          { index: 0, finishReason: 'STOP', hasContent: true, textBytes: 51 },
          { index: 1, finishReason: 'SAFETY', hasContent: false, textBytes: 0 },
          { index: 2, finishReason: 'STOP', hasContent: true, textBytes: 54 },
        ],
        promptBlockReason: null,
        usage: { ...NO_USAGE_DETAILS, inputTokens: 58, cachedInputTokens: 0, outputTokensTotal: 41, reasoningTokens: 0, unknownFields: [] },
        serviceTier: null,
        featureCalls: {},
      },
    },
    {
      name: 'blocked prompt: no candidates, the block reason, input-only usage',
      file: 'gemini-generate-blocked-prompt.json',
      expected: {
        providerRequestId: 'Zx4QaP7sM8a9nvgPq5DPmQ4',
        candidates: [],
        promptBlockReason: 'SAFETY',
        usage: { ...NO_USAGE_DETAILS, inputTokens: 23, cachedInputTokens: 0, outputTokensTotal: 0, reasoningTokens: 0, unknownFields: [] },
        serviceTier: null,
        featureCalls: {},
      },
    },
    {
      name: 'thinking and cache: output = candidatesTokenCount + thoughtsTokenCount, cached counted apart',
      file: 'gemini-generate-thinking-cached.json',
      expected: {
        providerRequestId: 'pC4QaOGnF6-EnvgP2K_O8Aw',
        candidates: [{ index: 0, finishReason: 'STOP', hasContent: true, textBytes: 55 }],
        promptBlockReason: null,
        usage: {
          ...NO_USAGE_DETAILS,
          inputTokens: 4312,
          cachedInputTokens: 4096,
          outputTokensTotal: 19 + 349,
          reasoningTokens: 349,
          unknownFields: [],
        },
        serviceTier: null,
        featureCalls: {},
      },
    },
  ])('$name', ({ file, expected }) => {
    expect(adapter.parseResponse(json(file), { 'x-request-id': 'hdr' })).toEqual(expected);
  });

  it('settles toolUsePromptTokenCount as input', () => {
    const usage = adapter.parseResponse(
      {
        candidates: [],
        usageMetadata: { promptTokenCount: 10, toolUsePromptTokenCount: 400, candidatesTokenCount: 5, totalTokenCount: 415 },
      },
      {},
    ).usage;
    expect(usage).toEqual({
      ...NO_USAGE_DETAILS,
      inputTokens: 410,
      cachedInputTokens: 0,
      outputTokensTotal: 5,
      reasoningTokens: 0,
      unknownFields: [],
    });
  });

  it('settles from the total and names usage fields it does not know', () => {
    const usage = adapter.parseResponse(
      { candidates: [], usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, groundingTokenCount: 30, totalTokenCount: 45 } },
      {},
    ).usage;
    expect(usage).toMatchObject({ inputTokens: 10, outputTokensTotal: 35, unknownFields: ['groundingTokenCount', 'total_exceeds_parts'] });
  });

  it('falls back to the x-request-id header when the body has no responseId', () => {
    expect(adapter.parseResponse({ candidates: [] }, { 'x-request-id': 'hdr' }).providerRequestId).toBe('hdr');
  });

  it.each([
    { name: 'no usageMetadata', body: { candidates: [{ content: { parts: [{ text: 'a' }] }, finishReason: 'STOP', index: 0 }] } },
    { name: 'usageMetadata without promptTokenCount', body: { candidates: [], usageMetadata: { trafficType: 'ON_DEMAND' } } },
  ])('returns usage null (never zero) when absent: $name', ({ body }) => {
    expect(adapter.parseResponse(body, {}).usage).toBeNull();
  });

  it.each([
    { name: 'text part', content: { parts: [{ text: 'ok' }], role: 'model' }, hasContent: true },
    { name: 'function call part', content: { parts: [{ functionCall: { name: 'lookup', args: {} } }], role: 'model' }, hasContent: true },
    {
      name: 'empty text with thought signature only',
      content: { parts: [{ text: '', thoughtSignature: 'AY89a18i' }], role: 'model' },
      hasContent: false,
    },
    { name: 'empty parts', content: { parts: [], role: 'model' }, hasContent: false },
    { name: 'content without parts', content: { role: 'model' }, hasContent: false },
    { name: 'no content', content: undefined, hasContent: false },
  ])('content detection: $name', ({ content, hasContent }) => {
    expect(adapter.parseResponse({ candidates: [{ content, finishReason: 'STOP', index: 0 }] }, {}).candidates[0].hasContent).toBe(
      hasContent,
    );
  });

  // Regression test for a fixed bug (libs/providers/src/gemini-generate.adapter.ts, toCandidate): a part with `thought: true`
  // is a thought summary (includeThoughts), not answer content, but any non-empty text part counts
  // as content. A candidate that spent its whole maxOutputTokens thinking is then "returned" with
  // content and can be accepted as an answer. Fix: ignore parts whose `thought === true` when
  // deciding hasContent.
  it('does not count a thought summary as answer content', () => {
    const body = {
      candidates: [
        { content: { parts: [{ text: 'Considering the options…', thought: true }], role: 'model' }, finishReason: 'MAX_TOKENS', index: 0 },
      ],
    };
    expect(adapter.parseResponse(body, {}).candidates[0].hasContent).toBe(false);
  });

  it('uses the array position for candidates without an index (proto3 JSON omits zero values)', () => {
    const body = { candidates: [{ content: { parts: [{ text: 'a' }] }, finishReason: 'STOP' }, { finishReason: 'RECITATION' }] };
    expect(adapter.parseResponse(body, {}).candidates).toEqual([
      { index: 0, finishReason: 'STOP', hasContent: true, textBytes: 1 },
      { index: 1, finishReason: 'RECITATION', hasContent: false, textBytes: 0 },
    ]);
  });

  it('measures each candidate for the usage floor: bytes of text, thoughts and calls, and its own tokenCount (counts only)', () => {
    const body = {
      candidates: [
        { index: 0, tokenCount: 30, content: { parts: [{ text: 'Pensé…', thought: true }, { text: 'Oui' }] }, finishReason: 'STOP' },
        { index: 1, content: { parts: [{ functionCall: { name: 'f', args: { q: 1 } } }] }, finishReason: 'STOP' },
      ],
    };
    const [a, b] = adapter.parseResponse(body, {}).candidates;
    expect(a).toMatchObject({ textBytes: 'Pensé…'.length + 1 + 2 + 3, tokenCount: 30 });
    expect(b).toMatchObject({ textBytes: 'f{"q":1}'.length });
    expect(b.tokenCount).toBeUndefined();
  });

  it.each([null, 'text', [], 42])('survives a non-object body (%p)', (body) => {
    expect(adapter.parseResponse(body, {})).toEqual(NOTHING_PARSED);
  });
});

describe('GeminiGenerateAdapter.streamAccumulator', () => {
  const interleaved = fixture('gemini-stream-interleaved.sse');

  it.each([1, 9, 100, interleaved.length])('reads interleaved candidates and the final usage (reads of %i bytes)', (size) => {
    const acc = accumulate(interleaved, size);
    expect(acc.sawUsage).toBe(true);
    expect(acc.finished).toBe(true);
    expect(acc.result()).toEqual({
      providerRequestId: 'Vj0QaK3uAcKInvgP8Ji7kA0',
      candidates: [
        { index: 0, finishReason: 'STOP', hasContent: true, textBytes: 34 },
        { index: 1, finishReason: 'STOP', hasContent: true, textBytes: 22 },
      ],
      promptBlockReason: null,
      usage: { ...NO_USAGE_DETAILS, inputTokens: 9, cachedInputTokens: 0, outputTokensTotal: 14, reasoningTokens: 0, unknownFields: [] },
      serviceTier: null,
      featureCalls: {},
    });
  });

  it('reports sawUsage false when the stream ends before the chunk that carries usage', () => {
    const cut = interleaved.slice(0, interleaved.lastIndexOf('data: '));
    const acc = accumulate(cut, 17);
    expect(acc.sawUsage).toBe(false);
    expect(acc.finished).toBe(false);
    expect(acc.result().usage).toBeNull();
    expect(acc.result().candidates).toEqual([
      { index: 0, finishReason: null, hasContent: true, textBytes: 6 },
      { index: 1, finishReason: 'STOP', hasContent: true, textBytes: 22 },
    ]);
  });

  it('takes the usage of a trailing usage-only chunk (thoughts included in output)', () => {
    const stream = sseOf(
      { candidates: [{ content: { parts: [{ text: 'Yes.' }], role: 'model' }, finishReason: 'STOP', index: 0 }], responseId: 'r1' },
      {
        usageMetadata: {
          promptTokenCount: 40,
          candidatesTokenCount: 2,
          thoughtsTokenCount: 120,
          cachedContentTokenCount: 32,
          totalTokenCount: 162,
        },
        responseId: 'r1',
      },
    );
    const acc = accumulate(stream, 13);
    expect(acc.sawUsage).toBe(true);
    expect(acc.result().usage).toEqual({
      ...NO_USAGE_DETAILS,
      inputTokens: 40,
      cachedInputTokens: 32,
      outputTokensTotal: 122,
      reasoningTokens: 120,
      unknownFields: [],
    });
  });

  it('ignores the prompt-only usage Gemini repeats on unfinished chunks of a single candidate', () => {
    const partial = { promptTokenCount: 11, totalTokenCount: 11 };
    const stream = sseOf(
      { candidates: [{ content: { parts: [{ text: 'Par' }], role: 'model' } }], usageMetadata: partial, responseId: 'r2' },
      { candidates: [{ content: { parts: [{ text: 'is' }], role: 'model' } }], usageMetadata: partial, responseId: 'r2' },
    );
    const acc = accumulate(stream, 20);
    expect(acc.sawUsage).toBe(false);
    expect(acc.result().candidates).toEqual([{ index: 0, finishReason: null, hasContent: true, textBytes: 5 }]);
    acc.push(
      JSON.stringify({
        candidates: [{ content: { parts: [{ text: '' }], role: 'model' }, finishReason: 'STOP' }],
        usageMetadata: { promptTokenCount: 11, candidatesTokenCount: 2, totalTokenCount: 13 },
        responseId: 'r2',
      }),
    );
    expect(acc.sawUsage).toBe(true);
    expect(acc.result().usage?.outputTokensTotal).toBe(2);
  });

  it('reports a blocked prompt from a stream', () => {
    const acc = accumulate(sseOf(json('gemini-generate-blocked-prompt.json')), 50);
    expect(acc.sawUsage).toBe(true);
    expect(acc.result()).toMatchObject({
      candidates: [],
      promptBlockReason: 'SAFETY',
      usage: { ...NO_USAGE_DETAILS, inputTokens: 23, outputTokensTotal: 0 },
    });
  });

  // Regression test for a fixed bug (libs/providers/src/gemini-generate.adapter.ts, isFinalChunk): "final" is decided per
  // chunk ("every candidate in this chunk has a finishReason"), but interleaved multi-candidate
  // streams carry one candidate per chunk, and Gemini repeats a prompt-only usageMetadata on
  // chunks. So the chunk that finishes candidate 1 is taken as final and its prompt-only usage
  // (output 0) is kept; if the stream is then cut before candidate 0 finishes, sawUsage is true
  // and the attempt settles on input tokens only instead of going to reconciliation
  // (DESIGN §7: a stream that ended without its usage stays pending). Fix: keep the latest usage
  // seen, but only report it (and sawUsage) when every candidate accumulated so far has a
  // finishReason (or the prompt was blocked) — i.e. judge finality on `byIndex`, not on the chunk.
  it('does not take usage from a chunk that finished only one of several interleaved candidates', () => {
    const acc = accumulate(fixture('gemini-stream-cut-repeated-usage.sse'), 64);
    expect(acc.result().candidates.map((c) => c.finishReason)).toEqual([null, 'STOP']);
    expect(acc.sawUsage).toBe(false);
    expect(acc.result().usage).toBeNull();
  });

  it('uses the header request id until a chunk names its responseId', () => {
    const acc = new GeminiGenerateAdapter().streamAccumulator({ 'x-request-id': 'hdr' });
    expect(acc.push('{oops')).toBe(true);
    expect(acc.result().providerRequestId).toBe('hdr');
    acc.push(JSON.stringify({ candidates: [], responseId: 'resp-9' }));
    expect(acc.result().providerRequestId).toBe('resp-9');
  });
});

describe('GeminiGenerateAdapter.errorCode', () => {
  const adapter = new GeminiGenerateAdapter();

  it.each([
    { name: 'INVALID_ARGUMENT', body: json('gemini-error-invalid-argument.json'), code: 'INVALID_ARGUMENT' },
    { name: 'an OpenAI-shaped error has no status', body: json('openai-error-invalid-request.json'), code: null },
    { name: 'not an error', body: { candidates: [] }, code: null },
    { name: 'unparseable', body: null, code: null },
  ])('$name', ({ body, code }) => {
    expect(adapter.errorCode(body)).toBe(code);
  });
});

describe('GeminiGenerateAdapter billable usage detail', () => {
  const adapter = new GeminiGenerateAdapter();

  it('Gemini 2.x search grounding is one call per grounded prompt, however many queries ran', () => {
    const parsed = adapter.parseResponse(json('gemini-generate-search-grounded.json'), {});
    expect(parsed.featureCalls).toEqual({ search_grounding: 1 });
    expect(parsed.serviceTier).toBeNull();
    expect(parsed.usage).toEqual({
      ...NO_USAGE_DETAILS,
      inputTokens: 14 + 212,
      outputTokensTotal: 21 + 120,
      reasoningTokens: 120,
      unknownFields: [],
    });
  });

  it('Gemini 3 search grounding is one call per distinct non-empty query', () => {
    expect(adapter.parseResponse(json('gemini-generate-3-search-queries.json'), {}).featureCalls).toEqual({ search_grounding: 2 });
  });

  it.each(['gemini-2.0-flash-001', 'gemini-1.5-pro-002', 'gemini-3-pro-preview', undefined])(
    'a grounded answer without queries is still one call (%s)',
    (modelVersion) => {
      const body = {
        candidates: [
          {
            content: { parts: [{ text: 'x' }] },
            finishReason: 'STOP',
            groundingMetadata: { searchEntryPoint: { renderedContent: '<div></div>' } },
          },
        ],
        modelVersion,
      };
      expect(adapter.parseResponse(body, {}).featureCalls).toEqual({ search_grounding: 1 });
    },
  );

  it('an answer without grounding metadata made no grounding call', () => {
    expect(adapter.parseResponse(json('gemini-generate-thinking-cached.json'), {}).featureCalls).toEqual({});
  });

  it('reads audio input and image output from the modality breakdowns; an image part is content', () => {
    const parsed = adapter.parseResponse(json('gemini-generate-image-out-audio-in.json'), {});
    expect(parsed.usage).toEqual({
      ...NO_USAGE_DETAILS,
      inputTokens: 1030,
      audioInputTokens: 1008,
      outputTokensTotal: 1302,
      imageOutputTokens: 1290,
      unknownFields: [],
    });
    expect(parsed.candidates[0]).toMatchObject({ hasContent: true, finishReason: 'STOP' });
  });

  it.each([1, 40, 10_000])('gathers search and maps grounding from the final chunk of a Gemini 3 stream (reads of %i bytes)', (size) => {
    const acc = accumulate(fixture('gemini-stream-grounded-maps.sse'), size);
    const result = acc.result();
    expect(result.featureCalls).toEqual({ search_grounding: 1, maps_grounding: 1 });
    expect(result.usage).toMatchObject({ inputTokens: 31 + 301, outputTokensTotal: 15 + 66, unknownFields: [] });
  });

  it('reads the audio output of a speech stream; audio parts are content', () => {
    const acc = accumulate(fixture('gemini-stream-tts-audio.sse'), 17);
    const result = acc.result();
    expect(result.usage).toEqual({
      ...NO_USAGE_DETAILS,
      inputTokens: 9,
      outputTokensTotal: 344,
      audioOutputTokens: 344,
      unknownFields: [],
    });
    expect(result.candidates).toEqual([{ index: 0, finishReason: 'STOP', hasContent: true, textBytes: 0 }]);
  });
});
