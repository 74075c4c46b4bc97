import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DispatchCommandV1 } from '@gateway/contracts';
import { accept, priceUsage } from '@gateway/domain';
import { adapterForCommand } from './index';
import { OpenAiResponsesAdapter } from './openai-responses.adapter';
import { NO_USAGE_DETAILS } from './adapter';
import { sseData } from './sse-testing';

const fixture = (name: string): string => readFileSync(join(__dirname, 'fixtures', name), 'utf8');
const json = (name: string): Record<string, unknown> => JSON.parse(fixture(name)) as Record<string, unknown>;

function command(over: Partial<DispatchCommandV1> = {}): DispatchCommandV1 {
  return {
    action_id: 'act-1',
    request_id: 'req-1',
    workload_id: 'wl-1',
    environment: 'test',
    api_kind: 'openai-responses',
    stream: false,
    route: {
      route_id: 'route-openai',
      route_version: 3,
      model_alias: 'approved-standard',
      provider_kind: 'openai-chat',
      base_url: 'https://api.openai.example/',
      upstream_model: 'gpt-4.1-mini',
      candidate_param: 'n',
      output_cap_param: 'max_completion_tokens',
      output_cap_semantics: 'per_candidate',
      price_revision_id: 'price-1',
    },
    requested_candidates: null,
    effective_candidates: 1,
    output_ceiling: 256,
    include_usage_for_client: true,
    deadline: '2026-01-01T00:00:30Z',
    dispatch_deadline: '2026-01-01T00:00:10Z',
    acceptance: { allow_length: false, allow_content_filter: false },
    request: { model: 'approved-standard', input: 'hi' },
    ...over,
  };
}

const PRICE = {
  id: 'p',
  inputPerMTokMicrousd: 1_000_000n,
  cachedInputPerMTokMicrousd: 100_000n,
  outputPerMTokMicrousd: 4_000_000n,
  reasoningPerMTokMicrousd: 8_000_000n,
};

describe('OpenAiResponsesAdapter.buildRequest', () => {
  const adapter = new OpenAiResponsesAdapter();

  it('POSTs {base}/v1/responses with the upstream model, the reserved max_output_tokens and store: false', () => {
    const req = adapter.buildRequest(
      command({ output_ceiling: 300, request: { model: 'alias', input: 'q', instructions: 'be brief' } }),
      'sk-upstream',
    );
    expect(req.url).toBe('https://api.openai.example/v1/responses');
    expect(req.headers.authorization).toBe('Bearer sk-upstream');
    expect(req.body).toEqual({ model: 'gpt-4.1-mini', input: 'q', instructions: 'be brief', max_output_tokens: 300, store: false });
  });

  it('writes exactly one cap (every other spelling removed) and no candidate count', () => {
    const req = adapter.buildRequest(
      command({
        output_ceiling: 64,
        request: { input: 'q', max_output_tokens: 9000, max_tokens: 9000, max_completion_tokens: 9000, n: 4 },
      }),
    );
    expect(req.body.max_output_tokens).toBe(64);
    for (const f of ['max_tokens', 'max_completion_tokens', 'n']) expect(req.body).not.toHaveProperty(f);
  });

  it('keeps store as sent only when the workload allows provider storage', () => {
    expect(adapter.buildRequest(command({ request: { input: 'q', store: true } })).body.store).toBe(false);
    expect(adapter.buildRequest(command({ allow_provider_storage: true, request: { input: 'q', store: true } })).body.store).toBe(true);
    expect(adapter.buildRequest(command({ allow_provider_storage: true, request: { input: 'q' } })).body).not.toHaveProperty('store');
  });

  it('streams only when the command streams', () => {
    expect(adapter.buildRequest(command({ stream: true })).body.stream).toBe(true);
    const whole = adapter.buildRequest(command({ request: { input: 'q', stream: true, stream_options: { include_obfuscation: false } } }));
    expect(whole.body).not.toHaveProperty('stream');
    expect(whole.body).not.toHaveProperty('stream_options');
  });

  it('is chosen by the command api kind, on an openai-chat route', () => {
    // (each comes wrapped by boundedAdapter, so the request it builds tells which it is)
    expect(adapterForCommand(command()).buildRequest(command()).url).toMatch(/\/responses$/);
    expect(adapterForCommand(command({ api_kind: 'openai-chat' })).buildRequest(command({ api_kind: 'openai-chat' })).url).toMatch(
      /\/chat\/completions$/,
    );
  });
});

describe('OpenAiResponsesAdapter.parseResponse', () => {
  const adapter = new OpenAiResponsesAdapter();

  it('reads one candidate and the inclusive usage of a completed response (reasoning + cached)', () => {
    const parsed = adapter.parseResponse(json('openai-responses-reasoning-cached.json'), { 'x-request-id': 'req_abc' });
    expect(parsed).toEqual({
      providerRequestId: 'req_abc',
      candidates: [{ index: 0, finishReason: 'stop', hasContent: true }],
      promptBlockReason: null,
      usage: {
        ...NO_USAGE_DETAILS,
        inputTokens: 1408,
        cachedInputTokens: 1152,
        outputTokensTotal: 342,
        reasoningTokens: 320,
        unknownFields: [],
      },
      serviceTier: 'default',
      featureCalls: {},
    });
  });

  it('prices reasoning and cached tokens once: input_tokens holds the cached, output_tokens the reasoning', () => {
    const usage = adapter.parseResponse(json('openai-responses-reasoning-cached.json'), {}).usage!;
    const cost = priceUsage(
      {
        inputTokens: usage.inputTokens,
        cachedInputTokens: usage.cachedInputTokens,
        outputTokens: usage.outputTokensTotal,
        reasoningTokens: usage.reasoningTokens,
        outputIncludesReasoning: true,
      },
      PRICE,
    );
    // 256 uncached × $1 + 1152 cached × $0.1 + 22 visible × $4 + 320 reasoning × $8 (per MTok, in micro-USD)
    expect(cost).toMatchObject({ input: 256n, cachedInput: 116n, output: 88n, reasoning: 2560n, total: 3020n });
  });

  it('maps incomplete (max_output_tokens) to length, which acceptance refuses unless the workload allows it', () => {
    const parsed = adapter.parseResponse(json('openai-responses-incomplete-max-output.json'), {});
    expect(parsed.candidates).toEqual([{ index: 0, finishReason: 'length', hasContent: true }]);
    expect(parsed.providerRequestId).toBe('resp_68a1c3a2e5f081908c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f');
    const judge = (allowLength: boolean) =>
      accept(
        { providerKind: 'openai-chat', candidates: parsed.candidates, promptBlockReason: null },
        { allowLength, allowContentFilter: false, receivedAt: new Date(0), deadline: new Date(1) },
      ).reason;
    expect(judge(false)).toBe('finish_reason_not_allowed');
    expect(judge(true)).toBe('ok');
  });

  it.each<[string, Record<string, unknown>, { finishReason: string | null; hasContent: boolean }]>([
    [
      'content filter',
      { status: 'incomplete', incomplete_details: { reason: 'content_filter' }, output: [] },
      { finishReason: 'content_filter', hasContent: false },
    ],
    ['failed', { status: 'failed', error: { code: 'server_error' }, output: [] }, { finishReason: 'other', hasContent: false }],
    [
      'only reasoning, no message',
      { status: 'completed', output: [{ type: 'reasoning', summary: [] }] },
      { finishReason: 'stop', hasContent: false },
    ],
    [
      'a function call is an answer',
      { status: 'completed', output: [{ type: 'function_call', name: 'f', arguments: '{}', call_id: 'c' }] },
      { finishReason: 'stop', hasContent: true },
    ],
  ])('%s', (_name, body, candidate) => {
    expect(adapter.parseResponse(body, {}).candidates).toEqual([{ index: 0, ...candidate }]);
  });

  it('a response without usage has none (never zero); unknown usage fields are named and the total wins', () => {
    const body = json('openai-responses-reasoning-cached.json');
    expect(adapter.parseResponse({ ...body, usage: undefined }, {}).usage).toBeNull();
    const odd = adapter.parseResponse(
      {
        ...body,
        usage: { input_tokens: 10, output_tokens: 5, total_tokens: 40, output_tokens_details: { reasoning_tokens: 0, audio_tokens: 25 } },
      },
      {},
    ).usage;
    expect(odd).toMatchObject({
      inputTokens: 10,
      outputTokensTotal: 30,
      unknownFields: ['output_tokens_details.audio_tokens', 'total_exceeds_parts'],
    });
  });

  it('reads the error code of an error body', () => {
    expect(adapter.errorCode({ error: { message: 'x', type: 'invalid_request_error', code: 'unknown_parameter' } })).toBe(
      'unknown_parameter',
    );
  });
});

describe('OpenAiResponsesAdapter.streamAccumulator', () => {
  const adapter = new OpenAiResponsesAdapter();
  const stream = fixture('openai-responses-stream.sse');

  function feed(text: string, size: number) {
    const acc = adapter.streamAccumulator({});
    const forwarded = sseData(text, size).filter((d) => acc.push(d));
    return { acc, forwarded };
  }

  it.each([1, 7, 64, 100_000])('takes usage from response.completed whatever the read size (%i bytes)', (size) => {
    const { acc, forwarded } = feed(stream, size);
    expect(forwarded).toHaveLength(14);
    expect(acc.finished).toBe(true);
    expect(acc.sawUsage).toBe(true);
    expect(acc.result()).toEqual({
      providerRequestId: 'resp_68a1c4b7c2d88190a9b8c7d6e5f4a3b20f1e2d3c4b5a6978',
      candidates: [{ index: 0, finishReason: 'stop', hasContent: true }],
      promptBlockReason: null,
      usage: { ...NO_USAGE_DETAILS, inputTokens: 37, cachedInputTokens: 0, outputTokensTotal: 9, reasoningTokens: 0, unknownFields: [] },
      serviceTier: 'default',
      featureCalls: {},
    });
  });

  it('a stream cut before response.completed is unfinished and has no usage (reconciliation, never zero)', () => {
    const cut = stream.slice(0, stream.indexOf('event: response.completed'));
    const { acc } = feed(cut, 13);
    expect(acc.finished).toBe(false);
    expect(acc.sawUsage).toBe(false);
    expect(acc.result()).toMatchObject({ candidates: [{ index: 0, finishReason: null, hasContent: true }], usage: null });
  });

  it('response.incomplete ends the stream with its usage and a length finish', () => {
    const acc = adapter.streamAccumulator({ 'x-request-id': 'req_1' });
    acc.push(JSON.stringify({ type: 'response.created', response: { id: 'resp_1', status: 'in_progress', output: [] } }));
    acc.push(JSON.stringify({ type: 'response.output_text.delta', delta: 'partial' }));
    acc.push(
      JSON.stringify({
        type: 'response.incomplete',
        response: {
          id: 'resp_1',
          status: 'incomplete',
          incomplete_details: { reason: 'max_output_tokens' },
          output: [],
          usage: { input_tokens: 3, output_tokens: 16, total_tokens: 19 },
        },
      }),
    );
    expect(acc.finished).toBe(true);
    expect(acc.result()).toMatchObject({
      providerRequestId: 'req_1',
      candidates: [{ index: 0, finishReason: 'length', hasContent: true }],
      usage: { ...NO_USAGE_DETAILS, inputTokens: 3, outputTokensTotal: 16 },
    });
  });

  it('an error event does not end the stream; nothing before response.created is a candidate', () => {
    const acc = adapter.streamAccumulator({});
    expect(acc.push(JSON.stringify({ type: 'error', code: 'server_error', message: 'x', sequence_number: 0 }))).toBe(true);
    expect(acc.push('not json')).toBe(true);
    expect(acc.finished).toBe(false);
    expect(acc.result().candidates).toEqual([]);
  });
});

describe('OpenAiResponsesAdapter billable usage detail', () => {
  const adapter = new OpenAiResponsesAdapter();

  it('counts one call per hosted-tool output item and reads the tier', () => {
    const parsed = adapter.parseResponse(json('openai-responses-hosted-tools.json'), {});
    expect(parsed.featureCalls).toEqual({ web_search: 2, file_search: 1, code_execution: 1 });
    expect(parsed.serviceTier).toBe('priority');
    expect(parsed.usage).toEqual({
      ...NO_USAGE_DETAILS,
      inputTokens: 9321,
      outputTokensTotal: 611,
      reasoningTokens: 448,
      unknownFields: [],
    });
    expect(parsed.candidates).toEqual([{ index: 0, finishReason: 'stop', hasContent: true }]);
  });

  it.each([1, 50, 100_000])('takes calls and tier from the terminal event, not the echoed auto (reads of %i bytes)', (size) => {
    const acc = adapter.streamAccumulator({});
    for (const data of sseData(fixture('openai-responses-stream-hosted-tools.sse'), size)) acc.push(data);
    const result = acc.result();
    expect(result.featureCalls).toEqual({ web_search: 2, file_search: 1, code_execution: 1 });
    expect(result.serviceTier).toBe('priority');
  });

  it('a stream cut before its terminal event keeps the calls that had started', () => {
    const acc = adapter.streamAccumulator({});
    const events = sseData(fixture('openai-responses-stream-hosted-tools.sse'), 100_000);
    for (const data of events.slice(0, -1)) acc.push(data);
    expect(acc.finished).toBe(false);
    expect(acc.result()).toMatchObject({ featureCalls: { web_search: 2, file_search: 1, code_execution: 1 }, usage: null });
  });

  it('a stream cut after response.created has no calls and no billed tier yet', () => {
    const acc = adapter.streamAccumulator({});
    const first = sseData(fixture('openai-responses-stream-hosted-tools.sse'), 100_000)[0];
    acc.push(first);
    expect(acc.result()).toMatchObject({ featureCalls: {}, serviceTier: null, usage: null });
  });
});
