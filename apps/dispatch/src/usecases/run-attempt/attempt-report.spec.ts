import { attemptCompletedV1, DispatchCommandV1 } from '@gateway/contracts';
import { NO_USAGE_DETAILS, ParsedResponse, ParsedUsage } from '@gateway/providers';
import { buildAttemptEvent, deliveryOf, shortfallOf } from './attempt-report';
import { dispatchCommand } from './dispatch-command.fixture';

const NOW = new Date('2026-03-01T12:00:00.000Z');

const command = dispatchCommand;

const cand = (index: number, finishReason: string | null, hasContent = true) => ({ index, finishReason, hasContent });
const USAGE: ParsedUsage = {
  ...NO_USAGE_DETAILS,
  inputTokens: 58,
  cachedInputTokens: 16,
  outputTokensTotal: 141,
  reasoningTokens: 100,
  unknownFields: [],
};

function parsed(candidates: ParsedResponse['candidates'], over: Partial<ParsedResponse> = {}): ParsedResponse {
  return { providerRequestId: 'resp-1', candidates, promptBlockReason: null, usage: USAGE, serviceTier: null, featureCalls: {}, ...over };
}

function event(cmd: DispatchCommandV1, p: ParsedResponse | null, over: Partial<Parameters<typeof buildAttemptEvent>[0]> = {}) {
  return buildAttemptEvent({
    eventId: '6f1b8a52-3c1e-4d35-9a54-2f0d8c9e7b10',
    cmd,
    attemptId: 'att-1',
    attemptNo: 1,
    role: 'primary',
    status: p?.usage ? 'succeeded' : 'usage_missing',
    httpStatus: p ? 200 : null,
    parsed: p,
    usageSource: cmd.stream ? 'stream_final_chunk' : 'provider_response',
    now: NOW,
    attemptsTotal: 1,
    actionFinal: true,
    ...over,
  });
}

describe('buildAttemptEvent', () => {
  it('is a valid attempt.completed event carrying ids, counts and usage, no content', () => {
    const e = event(command(), parsed([cand(0, 'STOP'), cand(1, 'SAFETY', false), cand(2, 'STOP')]));
    expect(attemptCompletedV1.parse(e)).toEqual(e);
    expect(e).toMatchObject({
      event_id: '6f1b8a52-3c1e-4d35-9a54-2f0d8c9e7b10',
      timestamp: '2026-03-01T12:00:00.000Z',
      request_id: 'req-1',
      action_id: 'act-1',
      attempt_id: 'att-1',
      attempt_no: 1,
      attempt_role: 'primary',
      workload_id: 'wl-1',
      environment: 'prod',
      route_id: 'route-1',
      route_version: 4,
      model_alias: 'approved-standard',
      provider_request_id: 'resp-1',
      requested_candidate_count: 3,
      effective_candidate_count: 3,
      outcome: 'succeeded',
      http_status: 200,
      attempts_total: 1,
      action_final: true,
    });
  });

  it.each([
    {
      name: 'Gemini: one of three filtered without content',
      kind: 'gemini-generate' as const,
      candidates: [cand(0, 'STOP'), cand(1, 'SAFETY', false), cand(2, 'STOP')],
      returned: 2,
      outcomes: [
        { index: 0, finish_reason: 'STOP', outcome: 'ok' },
        { index: 1, finish_reason: 'SAFETY', outcome: 'filtered' },
        { index: 2, finish_reason: 'STOP', outcome: 'ok' },
      ],
    },
    {
      name: 'OpenAI: truncated candidate still has content',
      kind: 'openai-chat' as const,
      candidates: [cand(0, 'stop'), cand(1, 'length'), cand(2, 'content_filter', false)],
      returned: 2,
      outcomes: [
        { index: 0, finish_reason: 'stop', outcome: 'ok' },
        { index: 1, finish_reason: 'length', outcome: 'truncated' },
        { index: 2, finish_reason: 'content_filter', outcome: 'filtered' },
      ],
    },
    {
      name: 'empty candidate with a stop reason',
      kind: 'openai-chat' as const,
      candidates: [cand(0, 'stop', false), cand(1, 'stop'), cand(2, null, false)],
      returned: 1,
      outcomes: [
        { index: 0, finish_reason: 'stop', outcome: 'empty' },
        { index: 1, finish_reason: 'stop', outcome: 'ok' },
        { index: 2, finish_reason: null, outcome: 'empty' },
      ],
    },
    {
      name: 'blocked prompt: every requested index is recorded as blocked',
      kind: 'gemini-generate' as const,
      candidates: [],
      block: 'SAFETY',
      returned: 0,
      outcomes: [0, 1, 2].map((index) => ({ index, finish_reason: null, outcome: 'blocked' })),
    },
    {
      name: 'silent shortfall: absent indexes are recorded as missing',
      kind: 'gemini-generate' as const,
      candidates: [cand(0, 'STOP')],
      returned: 1,
      outcomes: [
        { index: 0, finish_reason: 'STOP', outcome: 'ok' },
        { index: 1, finish_reason: null, outcome: 'missing' },
        { index: 2, finish_reason: null, outcome: 'missing' },
      ],
    },
  ])('returned counts only candidates with content; per-candidate outcomes: $name', ({ kind, candidates, returned, outcomes, ...row }) => {
    const block = 'block' in row ? (row.block as string) : null;
    const e = event(command({}, kind), parsed(candidates, { promptBlockReason: block }));
    expect(e.returned_candidate_count).toBe(returned);
    expect(e.candidates).toEqual(outcomes);
  });

  it('copies aggregate usage and computes total_tokens = input + output (reasoning is inside output)', () => {
    const e = event(command(), parsed([cand(0, 'STOP')]));
    expect(e).toMatchObject({
      input_tokens: 58,
      output_tokens_total: 141,
      total_tokens: 58 + 141,
      cached_input_tokens: 16,
      reasoning_tokens: 100,
      output_includes_reasoning: true,
      usage_source: 'provider_response',
      stream_mode: 'none',
    });
  });

  it('carries the billable detail: cache writes, modalities, the billed tier and per-call features', () => {
    const detailed = {
      ...USAGE,
      cacheWriteInputTokens: 20,
      audioInputTokens: 7,
      audioOutputTokens: 30,
      imageOutputTokens: 0,
    };
    const e = event(
      command(),
      parsed([cand(0, 'STOP')], { usage: detailed, serviceTier: 'priority', featureCalls: { search_grounding: 2 } }),
    );
    expect(attemptCompletedV1.parse(e)).toEqual(e);
    expect(e).toMatchObject({
      cache_write_input_tokens: 20,
      audio_input_tokens: 7,
      audio_output_tokens: 30,
      image_output_tokens: 0,
      service_tier: 'priority',
      feature_calls: { search_grounding: 2 },
    });
  });

  it.each([
    { name: 'the reported tier wins over the requested one', reported: 'flex', request: { service_tier: 'priority' }, tier: 'flex' },
    { name: 'the requested tier when none is reported', reported: null, request: { service_tier: 'flex' }, tier: 'flex' },
    {
      name: 'auto requested and none reported stays auto (billed at the dearest priced tier)',
      reported: null,
      request: { service_tier: 'auto' },
      tier: 'auto',
    },
    { name: 'nothing requested or reported is default', reported: null, request: {}, tier: 'default' },
  ])('bills the service tier: $name', ({ reported, request, tier }) => {
    const e = event(command({ request }, 'openai-chat'), parsed([cand(0, 'stop')], { serviceTier: reported }));
    expect(e.service_tier).toBe(tier);
  });

  it('counts one web search per answered chat completion that asked for web_search_options, none for an error', () => {
    const cmd = command({ request: { web_search_options: {} } }, 'openai-chat');
    expect(event(cmd, parsed([cand(0, 'stop')])).feature_calls).toEqual({ web_search: 1 });
    const error = parsed([], { usage: null });
    expect(event(cmd, error, { status: 'failed', httpStatus: 500 }).feature_calls).toEqual({});
    expect(event(command({}, 'openai-chat'), parsed([cand(0, 'stop')])).feature_calls).toEqual({});
  });

  it('parses events written before the billable detail existed', () => {
    const { cache_write_input_tokens, audio_input_tokens, audio_output_tokens, image_output_tokens, service_tier, feature_calls, ...old } =
      event(command(), parsed([cand(0, 'STOP')]));
    expect([cache_write_input_tokens, audio_input_tokens, audio_output_tokens, image_output_tokens, service_tier, feature_calls]).toEqual([
      0,
      0,
      0,
      0,
      'default',
      {},
    ]);
    expect(attemptCompletedV1.parse(old)).toEqual(old);
  });

  it('carries the usage fields the adapter did not know, and nothing when it knew them all', () => {
    const unknown = { ...USAGE, unknownFields: ['groundingTokenCount'] };
    expect(event(command(), parsed([cand(0, 'STOP')], { usage: unknown })).usage_unknown_fields).toEqual(['groundingTokenCount']);
    expect(event(command(), parsed([cand(0, 'STOP')]))).not.toHaveProperty('usage_unknown_fields');
  });

  it('carries the usage floor of a multi-candidate answer as a number (sizes, never text), and none for one candidate', () => {
    const sized = [
      { ...cand(0, 'STOP'), textBytes: 81 },
      { ...cand(1, 'SAFETY', false), textBytes: 0 },
      { ...cand(2, 'STOP'), textBytes: 16, tokenCount: 9 },
    ];
    const e = event(command(), parsed(sized));
    expect(e.output_tokens_floor).toBe(11 + 0 + 9);
    expect(attemptCompletedV1.parse(e).output_tokens_floor).toBe(20);
    const one = event(command({ requested_candidates: null, effective_candidates: 1 }), parsed([{ ...cand(0, 'STOP'), textBytes: 800 }]));
    expect(one).not.toHaveProperty('output_tokens_floor');
  });

  it('keeps a zero usage from a provider error as zero, not null', () => {
    const zero = { ...NO_USAGE_DETAILS, inputTokens: 0, outputTokensTotal: 0, unknownFields: [] };
    const e = event(command(), parsed([], { usage: zero, providerRequestId: null }), { status: 'failed', httpStatus: 400 });
    expect(e).toMatchObject({
      input_tokens: 0,
      output_tokens_total: 0,
      total_tokens: 0,
      usage_source: 'provider_response',
      outcome: 'failed',
    });
  });

  it.each([
    { name: 'response without usage', p: parsed([cand(0, 'STOP')], { usage: null }), returned: 1 },
    { name: 'no response at all', p: null, returned: null },
  ])('null usage stays null, never 0: $name', ({ p, returned }) => {
    const e = event(command({ stream: true }), p, { status: 'usage_missing' });
    expect(e).toMatchObject({
      input_tokens: null,
      output_tokens_total: null,
      total_tokens: null,
      cached_input_tokens: null,
      reasoning_tokens: null,
      cache_write_input_tokens: null,
      audio_output_tokens: null,
      service_tier: null,
      // the source is reported only for usage that exists
      usage_source: null,
      stream_mode: 'sse',
      outcome: 'usage_missing',
      returned_candidate_count: returned,
    });
    expect(attemptCompletedV1.safeParse(e).success).toBe(true);
  });

  it('reports no candidates and no provider id when nothing came back', () => {
    const e = event(command(), null, { status: 'usage_missing' });
    expect(e).toMatchObject({ provider_request_id: null, candidates: [], prompt_block_reason: null, http_status: null });
  });

  it('carries the prompt block reason', () => {
    const e = event(command(), parsed([], { promptBlockReason: 'SAFETY', usage: { ...USAGE, outputTokensTotal: 0, reasoningTokens: 0 } }));
    expect(e).toMatchObject({ prompt_block_reason: 'SAFETY', returned_candidate_count: 0, total_tokens: 58 });
  });

  it('records the requested count as null when it was omitted', () => {
    const e = event(command({ requested_candidates: null, effective_candidates: 1 }), parsed([cand(0, 'STOP')]));
    expect(e).toMatchObject({ requested_candidate_count: null, effective_candidate_count: 1, returned_candidate_count: 1 });
  });
});

describe('shortfallOf', () => {
  it.each([
    {
      name: 'all returned',
      effective: 3,
      candidates: [cand(0, 'STOP'), cand(1, 'STOP'), cand(2, 'STOP')],
      block: null,
      expected: {
        returnedCount: 3,
        missingCount: 0,
        excessCount: 0,
        excess: false,
        unexplainedShortfall: false,
        blocked: false,
        returnedWithContent: 3,
      },
    },
    {
      name: 'more returned than effective',
      effective: 1,
      candidates: [cand(0, 'STOP'), cand(1, 'STOP')],
      block: null,
      expected: { returnedCount: 2, missingCount: 0, excessCount: 1, excess: true, unexplainedShortfall: false, returnedWithContent: 2 },
    },
    {
      name: 'silent shortfall: fewer, all fine',
      effective: 3,
      candidates: [cand(0, 'STOP'), cand(1, 'STOP')],
      block: null,
      expected: { returnedCount: 2, missingCount: 1, excess: false, unexplainedShortfall: true, returnedWithContent: 2 },
    },
    {
      name: 'shortfall explained by a filtered sibling',
      effective: 3,
      candidates: [cand(0, 'STOP'), cand(1, 'SAFETY', false)],
      block: null,
      expected: { returnedCount: 2, missingCount: 1, unexplainedShortfall: false, returnedWithContent: 1 },
    },
    {
      name: 'shortfall not explained by a truncated sibling',
      effective: 3,
      candidates: [cand(0, 'STOP'), cand(1, 'MAX_TOKENS')],
      block: null,
      expected: { returnedCount: 2, missingCount: 1, unexplainedShortfall: true, returnedWithContent: 2 },
    },
    {
      name: 'blocked prompt: zero candidates, explained',
      effective: 2,
      candidates: [],
      block: 'PROHIBITED_CONTENT',
      expected: { returnedCount: 0, missingCount: 2, blocked: true, unexplainedShortfall: false, returnedWithContent: 0 },
    },
    {
      name: 'zero candidates and no block: unexplained',
      effective: 1,
      candidates: [],
      block: null,
      expected: { returnedCount: 0, missingCount: 1, blocked: false, unexplainedShortfall: true, returnedWithContent: 0 },
    },
  ])('$name', ({ effective, candidates, block, expected }) => {
    const s = shortfallOf(command({ effective_candidates: effective }), parsed(candidates, { promptBlockReason: block }));
    expect(s).toMatchObject(expected);
  });

  it("keeps each candidate's raw finish reason beside its outcome, matched by index", () => {
    const s = shortfallOf(command({ effective_candidates: 2 }), parsed([cand(1, 'RECITATION', false), cand(0, 'STOP')]));
    expect(s.perCandidate).toEqual([
      { index: 0, finish_reason: 'STOP', outcome: 'ok' },
      { index: 1, finish_reason: 'RECITATION', outcome: 'filtered' },
    ]);
  });

  it("reads finish reasons in the route provider's vocabulary", () => {
    const openai = shortfallOf(command({ effective_candidates: 1 }, 'openai-compatible'), parsed([cand(0, 'max_tokens')]));
    expect(openai.perCandidate[0].outcome).toBe('truncated');
  });
});

describe('deliveryOf', () => {
  const LATE = new Date('2026-03-01T12:00:31.000Z');
  const one = command({ requested_candidates: null, effective_candidates: 1 }, 'openai-chat');

  it.each([
    [
      "an answer without usage is still answered (money is settlement's business)",
      200,
      parsed([cand(0, 'stop')], { usage: null }),
      NOW,
      { outcome: 'answered', verdict: 'valid', verdictReason: 'ok' },
    ],
    [
      'a truncated answer is answered but invalid when length is not allowed',
      200,
      parsed([cand(0, 'length')]),
      NOW,
      { outcome: 'answered', verdict: 'invalid', verdictReason: 'finish_reason_not_allowed' },
    ],
    [
      'a refused prompt',
      200,
      parsed([], { promptBlockReason: 'SAFETY' }),
      NOW,
      { outcome: 'refused', verdict: 'invalid', verdictReason: 'prompt_blocked' },
    ],
    [
      'an answer after the deadline',
      200,
      parsed([cand(0, 'stop')]),
      LATE,
      { outcome: 'deadline', verdict: 'invalid', verdictReason: 'after_deadline' },
    ],
    ['a provider error answer', 500, parsed([]), NOW, { outcome: 'failed', verdict: null, verdictReason: null }],
    ['no answer before the deadline', null, null, LATE, { outcome: 'deadline', verdict: null, verdictReason: null }],
    ['a connection failure', null, null, NOW, { outcome: 'failed', verdict: null, verdictReason: null }],
  ] as const)('%s', (_name, httpStatus, p, receivedAt, expected) => {
    expect(deliveryOf({ cmd: one, httpStatus, parsed: p, receivedAt })).toEqual(expected);
  });

  it('a stream the provider cut before its end marker was not delivered, whatever usage it carried (issue 7, item 4)', () => {
    expect(deliveryOf({ cmd: one, httpStatus: 200, parsed: parsed([cand(0, 'stop')]), receivedAt: NOW, streamFinished: false })).toEqual({
      outcome: 'failed',
      verdict: null,
      verdictReason: null,
    });
    expect(
      deliveryOf({ cmd: one, httpStatus: 200, parsed: parsed([cand(0, 'stop')]), receivedAt: NOW, streamFinished: true }).outcome,
    ).toBe('answered');
  });

  it('honours the workload allowing truncated answers', () => {
    const allowing = command(
      { requested_candidates: null, effective_candidates: 1, acceptance: { allow_length: true, allow_content_filter: false } },
      'openai-chat',
    );
    expect(deliveryOf({ cmd: allowing, httpStatus: 200, parsed: parsed([cand(0, 'length')]), receivedAt: NOW }).verdict).toBe('valid');
  });
});
