import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DispatchCommandV1 } from '@gateway/contracts';
import { OpenAiChatAdapter } from './openai-chat.adapter';
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
    api_kind: 'openai-chat',
    stream: false,
    route: {
      route_id: 'route-openai',
      route_version: 3,
      model_alias: 'approved-standard',
      provider_kind: 'openai-chat',
      base_url: 'https://api.openai.example/',
      upstream_model: 'gpt-4o-mini-2024-07-18',
      candidate_param: 'n',
      output_cap_param: 'max_completion_tokens',
      output_cap_semantics: 'per_candidate',
      price_revision_id: 'price-1',
      ...route,
    },
    requested_candidates: null,
    effective_candidates: 1,
    output_ceiling: 256,
    include_usage_for_client: false,
    deadline: '2026-01-01T00:00:30Z',
    dispatch_deadline: '2026-01-01T00:00:10Z',
    acceptance: { allow_length: false, allow_content_filter: false },
    request: { model: 'approved-standard', messages: [{ role: 'user', content: 'hi' }] },
    ...over,
  };
}

/** Feeds an SSE text through the decoder and the accumulator in reads of `size` bytes. */
function accumulate(text: string, size: number) {
  const acc = new OpenAiChatAdapter().streamAccumulator({});
  let sawDone = false;
  for (const data of sseData(text, size)) if (!acc.push(data)) sawDone = true;
  return { acc, sawDone };
}

describe('OpenAiChatAdapter.buildRequest', () => {
  const adapter = new OpenAiChatAdapter();

  it.each([
    { cap: 'max_completion_tokens', other: 'max_tokens' },
    { cap: 'max_tokens', other: 'max_completion_tokens' },
  ])('writes the contract cap field $cap and removes $other', ({ cap, other }) => {
    const req = adapter.buildRequest(
      command({ output_ceiling: 300, request: { messages: [], max_tokens: 9000, max_completion_tokens: 8000 } }, { output_cap_param: cap }),
    );
    expect(req.body[cap]).toBe(300);
    expect(req.body).not.toHaveProperty(other);
  });

  it.each([
    { name: 'omitted, effective 1 (written explicitly)', requested: null, effective: 1, param: 'n', sent: 1 },
    { name: 'explicit n=1', requested: 1, effective: 1, param: 'n', sent: 1 },
    { name: 'explicit n=3', requested: 3, effective: 3, param: 'n', sent: 3 },
    { name: 'aggregator parameter name', requested: 2, effective: 2, param: 'num_completions', sent: 2 },
  ])('candidate parameter: $name', ({ requested, effective, param, sent }) => {
    const req = adapter.buildRequest(
      command(
        { requested_candidates: requested, effective_candidates: effective, request: { messages: [], n: 7 } },
        { candidate_param: param },
      ),
    );
    expect(req.body[param]).toBe(sent);
    if (param !== 'n') expect(req.body).not.toHaveProperty('n');
  });

  it('defaults the candidate parameter to n when the contract names none', () => {
    const req = adapter.buildRequest(command({ requested_candidates: 2, effective_candidates: 2 }, { candidate_param: null }));
    expect(req.body.n).toBe(2);
  });

  it('never forwards a client n: the effective count replaces it', () => {
    const req = adapter.buildRequest(command({ request: { messages: [], n: 8 } }));
    expect(req.body.n).toBe(1);
  });

  it('exactly one candidate field and one cap field reach upstream, whatever spellings the request still held', () => {
    const req = adapter.buildRequest(
      command(
        {
          effective_candidates: 2,
          output_ceiling: 300,
          request: { messages: [], n: 8, num_completions: 8, max_tokens: 9000, max_completion_tokens: 9000, max_output_tokens: 9000 },
        },
        { candidate_param: 'num_completions', output_cap_param: 'max_output_tokens' },
      ),
    );
    const spend = Object.keys(req.body).filter((k) => /^(n|num_completions|max_tokens|max_completion_tokens|max_output_tokens)$/.test(k));
    expect(spend.sort()).toEqual(['max_output_tokens', 'num_completions']);
    expect(req.body).toMatchObject({ num_completions: 2, max_output_tokens: 300 });
  });

  it.each([
    { kind: 'openai-chat' as const, allow: undefined, sent: true, expected: false },
    { kind: 'openai-chat' as const, allow: false, sent: undefined, expected: false },
    { kind: 'openai-chat' as const, allow: true, sent: true, expected: true },
    { kind: 'openai-compatible' as const, allow: undefined, sent: true, expected: undefined },
  ])('store on $kind with allow_provider_storage=$allow, sent $sent → $expected', ({ kind, allow, sent, expected }) => {
    const req = adapter.buildRequest(
      command(
        { allow_provider_storage: allow, request: { messages: [], ...(sent === undefined ? {} : { store: sent }) } },
        { provider_kind: kind },
      ),
    );
    expect(req.body.store).toBe(expected);
  });

  it.each([
    { name: 'no stream_options', request: { messages: [], stream: true } },
    { name: 'include_usage false', request: { messages: [], stream: true, stream_options: { include_usage: false } } },
    { name: 'stream_options not an object', request: { messages: [], stream: true, stream_options: 'yes' } },
  ])('forces stream_options.include_usage on streams ($name)', ({ request }) => {
    const req = adapter.buildRequest(command({ stream: true, request }));
    expect(req.body.stream).toBe(true);
    expect(req.body.stream_options).toEqual({ include_usage: true });
  });

  it('keeps other stream options while forcing usage', () => {
    const req = adapter.buildRequest(
      command({ stream: true, request: { messages: [], stream_options: { include_usage: false, include_obfuscation: false } } }),
    );
    expect(req.body.stream_options).toEqual({ include_usage: true, include_obfuscation: false });
  });

  it('strips stream fields from non-stream requests', () => {
    const req = adapter.buildRequest(
      command({ stream: false, request: { messages: [], stream: true, stream_options: { include_usage: true } } }),
    );
    expect(req.body).not.toHaveProperty('stream');
    expect(req.body).not.toHaveProperty('stream_options');
  });

  it('targets the upstream model on the route base URL, with the upstream key as a bearer token', () => {
    const req = adapter.buildRequest(command(), 'sk-upstream');
    expect(req.url).toBe('https://api.openai.example/v1/chat/completions');
    expect(req.body.model).toBe('gpt-4o-mini-2024-07-18');
    expect(req.headers).toEqual({ 'content-type': 'application/json', authorization: 'Bearer sk-upstream' });
    expect(adapter.buildRequest(command()).headers).not.toHaveProperty('authorization');
  });

  it('does not mutate the command request', () => {
    const cmd = command({ stream: true, request: { messages: [], n: 5, max_tokens: 10 } });
    const before = structuredClone(cmd.request);
    adapter.buildRequest(cmd);
    expect(cmd.request).toEqual(before);
  });
});

describe('OpenAiChatAdapter.parseResponse', () => {
  const adapter = new OpenAiChatAdapter();

  it('reads every choice with its own finish reason and the aggregate usage (n=2)', () => {
    const parsed = adapter.parseResponse(json('openai-chat-n2.json'), {});
    expect(parsed).toEqual({
      providerRequestId: 'chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG',
      candidates: [
        { index: 0, finishReason: 'stop', hasContent: true, textBytes: 39 },
        { index: 1, finishReason: 'length', hasContent: true, textBytes: 59 },
      ],
      promptBlockReason: null,
      // completion_tokens already includes the reasoning tokens: not added twice
      usage: {
        ...NO_USAGE_DETAILS,
        inputTokens: 1117,
        cachedInputTokens: 1024,
        outputTokensTotal: 946,
        reasoningTokens: 704,
        unknownFields: [],
      },
      serviceTier: 'default',
      featureCalls: {},
    });
  });

  it('prefers the x-request-id header as provider request id', () => {
    expect(adapter.parseResponse(json('openai-chat-n2.json'), { 'x-request-id': 'req_abc' }).providerRequestId).toBe('req_abc');
    expect(adapter.parseResponse(json('openai-chat-n2.json'), { 'x-request-id': ['req_first', 'req_second'] }).providerRequestId).toBe(
      'req_first',
    );
  });

  it('returns usage null (never zero) when the body has no usage', () => {
    const parsed = adapter.parseResponse(json('openai-chat-no-usage.json'), {});
    expect(parsed.usage).toBeNull();
    expect(parsed.candidates).toEqual([{ index: 0, finishReason: 'stop', hasContent: true, textBytes: 6 }]);
  });

  it.each([
    { name: 'usage null', usage: null },
    { name: 'completion_tokens missing', usage: { prompt_tokens: 10, total_tokens: 10 } },
    { name: 'prompt_tokens a string', usage: { prompt_tokens: '10', completion_tokens: 3 } },
  ])('treats incomplete usage as absent: $name', ({ usage }) => {
    expect(adapter.parseResponse({ choices: [], usage }, {}).usage).toBeNull();
  });

  it('settles from the total and names usage fields it does not know', () => {
    const usage = adapter.parseResponse(
      { choices: [], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 20, search_tokens: 7, cost: 0 } },
      {},
    ).usage;
    expect(usage).toMatchObject({ inputTokens: 10, outputTokensTotal: 10, unknownFields: ['search_tokens', 'total_exceeds_parts'] });
  });

  it('reads usage without details as zero cached / zero reasoning', () => {
    expect(adapter.parseResponse({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 } }, {}).usage).toEqual({
      ...NO_USAGE_DETAILS,
      inputTokens: 10,
      cachedInputTokens: 0,
      outputTokensTotal: 3,
      reasoningTokens: 0,
      unknownFields: [],
    });
  });

  it.each([
    { name: 'text', message: { role: 'assistant', content: 'ok' }, hasContent: true },
    { name: 'empty text', message: { role: 'assistant', content: '' }, hasContent: false },
    { name: 'null content', message: { role: 'assistant', content: null }, hasContent: false },
    {
      name: 'tool call only',
      message: {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }],
      },
      hasContent: true,
    },
    { name: 'empty tool_calls', message: { role: 'assistant', content: null, tool_calls: [] }, hasContent: false },
    { name: 'no message', message: undefined, hasContent: false },
  ])('content detection: $name', ({ message, hasContent }) => {
    const parsed = adapter.parseResponse({ choices: [{ index: 0, message, finish_reason: 'stop' }] }, {});
    expect(parsed.candidates[0].hasContent).toBe(hasContent);
  });

  it('measures each choice for the usage floor: text parts, refusal and tool calls, in UTF-8 bytes (counts only)', () => {
    const parsed = adapter.parseResponse(
      {
        choices: [
          { index: 0, message: { content: [{ type: 'text', text: 'déjà' }], refusal: null } },
          { index: 1, message: { content: null, tool_calls: [{ function: { name: 'get', arguments: '{"a":1}' } }] } },
          { index: 2, message: { content: null, refusal: 'No' } },
        ],
      },
      {},
    );
    expect(parsed.candidates.map((c) => c.textBytes)).toEqual([6, 3 + 7, 2]);
  });

  it('falls back to the array position when a choice has no index, and null finish reason when absent', () => {
    const parsed = adapter.parseResponse({ choices: [{ message: { content: 'a' } }, { message: { content: 'b' } }] }, {});
    expect(parsed.candidates).toEqual([
      { index: 0, finishReason: null, hasContent: true, textBytes: 1 },
      { index: 1, finishReason: null, hasContent: true, textBytes: 1 },
    ]);
  });

  it.each([null, 'text', [], 42])('survives a non-object body (%p)', (body) => {
    expect(adapter.parseResponse(body, {})).toEqual(NOTHING_PARSED);
  });
});

describe('OpenAiChatAdapter.streamAccumulator', () => {
  const stream = fixture('openai-chat-stream-include-usage.sse');

  it.each([1, 7, 64, 1000, stream.length])('gives the whole-response facts for an include_usage stream (reads of %i bytes)', (size) => {
    const { acc, sawDone } = accumulate(stream, size);
    expect(sawDone).toBe(true);
    expect(acc.finished).toBe(true);
    expect(acc.sawUsage).toBe(true);
    expect(acc.result()).toEqual({
      providerRequestId: 'chatcmpl-BQx8rmKd0Ujr1yW4mY2nVv3Zq9TfG',
      candidates: [
        { index: 0, finishReason: 'stop', hasContent: true, textBytes: 12 },
        { index: 1, finishReason: 'length', hasContent: true, textBytes: 15 },
      ],
      promptBlockReason: null,
      usage: {
        ...NO_USAGE_DETAILS,
        inputTokens: 212,
        cachedInputTokens: 128,
        outputTokensTotal: 37,
        reasoningTokens: 0,
        unknownFields: [],
      },
      serviceTier: 'default',
      featureCalls: {},
    });
  });

  it.each([1, 5, 64])('handles CRLF line endings (reads of %i bytes)', (size) => {
    const { acc, sawDone } = accumulate(stream.replace(/\n/g, '\r\n'), size);
    expect(sawDone).toBe(true);
    expect(acc.result().candidates).toHaveLength(2);
    expect(acc.result().usage?.outputTokensTotal).toBe(37);
  });

  it('reports sawUsage false and usage null when the stream ends before its usage chunk', () => {
    // everything before the usage chunk (the one with `"choices":[]`)
    const cut = stream.slice(0, stream.lastIndexOf('data: ', stream.indexOf('"choices":[]')));
    const { acc, sawDone } = accumulate(cut, 33);
    expect(sawDone).toBe(false);
    expect(acc.finished).toBe(false);
    expect(acc.sawUsage).toBe(false);
    expect(acc.result().usage).toBeNull();
    // the candidates seen so far are still reported
    expect(acc.result().candidates.map((c) => c.finishReason)).toEqual(['stop', 'length']);
  });

  it('is finished only at [DONE]: usage without [DONE] is a cut stream, [DONE] without usage a whole one', () => {
    const beforeDone = stream.slice(0, stream.lastIndexOf('data: '));
    const cut = accumulate(beforeDone, 64).acc;
    expect(cut.sawUsage).toBe(true);
    expect(cut.finished).toBe(false);

    const withoutUsage = stream.replace(/^data: \{[^\n]*"choices":\[\][^\n]*\n\n/m, '');
    const whole = accumulate(withoutUsage, 64).acc;
    expect(whole.sawUsage).toBe(false);
    expect(whole.finished).toBe(true);
  });

  it('does not count a role-only or empty delta as content, and does count a tool call delta', () => {
    const acc = new OpenAiChatAdapter().streamAccumulator({});
    acc.push(JSON.stringify({ id: 'x', choices: [{ index: 0, delta: { role: 'assistant', content: '' } }], usage: null }));
    acc.push(
      JSON.stringify({
        id: 'x',
        choices: [
          { index: 1, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] } },
        ],
        usage: null,
      }),
    );
    acc.push(
      JSON.stringify({
        id: 'x',
        choices: [
          { index: 0, delta: {}, finish_reason: 'stop' },
          { index: 1, delta: {}, finish_reason: 'tool_calls' },
        ],
        usage: null,
      }),
    );
    expect(acc.result().candidates).toEqual([
      { index: 0, finishReason: 'stop', hasContent: false, textBytes: 0 },
      { index: 1, finishReason: 'tool_calls', hasContent: true, textBytes: 1 },
    ]);
    expect(acc.sawUsage).toBe(false);
  });

  it('ignores unparseable payloads and returns false only for [DONE]', () => {
    const acc = new OpenAiChatAdapter().streamAccumulator({ 'x-request-id': 'req_hdr' });
    expect(acc.push('{not json')).toBe(true);
    expect(acc.push(' [DONE] ')).toBe(false);
    expect(acc.result()).toEqual({
      providerRequestId: 'req_hdr',
      candidates: [],
      promptBlockReason: null,
      usage: null,
      serviceTier: null,
      featureCalls: {},
    });
  });
});

describe('OpenAiChatAdapter.errorCode', () => {
  const adapter = new OpenAiChatAdapter();

  it.each([
    { name: 'code present', body: json('openai-error-invalid-request.json'), code: 'integer_above_max_value' },
    { name: 'code null falls back to the type', body: json('openai-error-no-code.json'), code: 'invalid_request_error' },
    { name: 'not an error body', body: { choices: [] }, code: null },
    { name: 'unparseable body', body: null, code: null },
  ])('$name', ({ body, code }) => {
    expect(adapter.errorCode(body)).toBe(code);
  });
});

describe('OpenAiChatAdapter billable usage detail', () => {
  const adapter = new OpenAiChatAdapter();

  it('reads audio in and out, cached tokens and the priority tier of an audio answer (content null, audio is the answer)', () => {
    const parsed = adapter.parseResponse(json('openai-chat-audio-priority.json'), {});
    expect(parsed.serviceTier).toBe('priority');
    expect(parsed.featureCalls).toEqual({});
    expect(parsed.candidates).toEqual([{ index: 0, finishReason: 'stop', hasContent: true, textBytes: 0 }]);
    // text_tokens is a breakdown of the rest, known: no case
    expect(parsed.usage).toEqual({
      inputTokens: 1894,
      cachedInputTokens: 1024,
      cacheWriteInputTokens: 0,
      audioInputTokens: 610,
      outputTokensTotal: 312,
      reasoningTokens: 0,
      audioOutputTokens: 264,
      imageOutputTokens: 0,
      unknownFields: [],
    });
  });

  it('reads an OpenRouter cache write (prompt_tokens_details.cache_write_tokens) as a subset of the input', () => {
    const usage = adapter.parseResponse(json('openai-compatible-cache-write.json'), {}).usage;
    expect(usage).toMatchObject({
      inputTokens: 5210,
      cachedInputTokens: 0,
      cacheWriteInputTokens: 5120,
      outputTokensTotal: 21,
      unknownFields: [],
    });
  });

  it('reads the Anthropic spellings a proxy puts beside prompt_tokens, counting a detail reported twice once', () => {
    const usage = adapter.parseResponse(
      {
        choices: [],
        usage: {
          prompt_tokens: 3000,
          completion_tokens: 10,
          total_tokens: 3010,
          cache_creation_input_tokens: 1200,
          cache_read_input_tokens: 1500,
          prompt_tokens_details: { cached_tokens: 1500 },
        },
      },
      {},
    ).usage;
    expect(usage).toMatchObject({ inputTokens: 3000, cachedInputTokens: 1500, cacheWriteInputTokens: 1200, unknownFields: [] });
  });

  it('opens a case when the details cannot be subsets of the totals', () => {
    const usage = adapter.parseResponse(
      {
        choices: [],
        usage: {
          prompt_tokens: 100,
          completion_tokens: 10,
          total_tokens: 110,
          prompt_tokens_details: { cached_tokens: 80, cache_write_tokens: 40 },
        },
      },
      {},
    ).usage;
    expect(usage?.unknownFields).toEqual(['parts_exceed_total']);
  });

  it('still flags the prompt details it does not know (video, file)', () => {
    const usage = adapter.parseResponse(
      { choices: [], usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110, prompt_tokens_details: { video_tokens: 60 } } },
      {},
    ).usage;
    expect(usage?.unknownFields).toEqual(['prompt_tokens_details.video_tokens']);
  });

  it.each([1, 13, 4096])('takes the tier from the stream chunks and the details from the usage chunk (reads of %i bytes)', (size) => {
    const { acc, sawDone } = accumulate(fixture('openai-chat-stream-flex.sse'), size);
    expect(sawDone).toBe(true);
    const result = acc.result();
    expect(result.serviceTier).toBe('flex');
    expect(result.featureCalls).toEqual({});
    expect(result.usage).toEqual({
      ...NO_USAGE_DETAILS,
      inputTokens: 820,
      cachedInputTokens: 512,
      outputTokensTotal: 390,
      reasoningTokens: 384,
      unknownFields: [],
    });
  });

  it('reports no tier when the provider reports none, and ignores an echoed auto', () => {
    expect(adapter.parseResponse({ choices: [] }, {}).serviceTier).toBeNull();
    expect(adapter.parseResponse({ choices: [], service_tier: 'auto' }, {}).serviceTier).toBeNull();
    expect(adapter.parseResponse({ choices: [], service_tier: 'p'.repeat(40) }, {}).serviceTier).toBeNull();
    expect(adapter.parseResponse({ choices: [], service_tier: { tier: 'flex' } }, {}).serviceTier).toBeNull();
  });

  it('counts a streamed audio answer (delta.audio, no text) as content', () => {
    const acc = adapter.streamAccumulator({});
    acc.push(
      JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: { audio: { id: 'audio_1', data: 'UklGRg==' } }, finish_reason: null }] }),
    );
    acc.push(JSON.stringify({ id: 'c1', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }));
    expect(acc.result().candidates).toEqual([{ index: 0, finishReason: 'stop', hasContent: true, textBytes: 0 }]);
  });
});
