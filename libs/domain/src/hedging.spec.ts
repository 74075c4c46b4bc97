import fc from 'fast-check';
import { MAX_BUDGET_MICROUSD } from './reservation';
import {
  requestToolNames,
  AttemptExposure,
  AttemptFailure,
  HedgePolicy,
  HedgeTimerContext,
  bucketAfter,
  bucketAllowsExtraAttempts,
  decideHedge,
  extraAttemptAllowance,
  fullBucket,
  hedgeDelayMs,
  hedgeIneligibility,
  hedgePolicyProblems,
  quantileMs,
  retryDecision,
  sameHedgeSettings,
  transientFailureOf,
} from './hedging';

const policy: HedgePolicy = {
  revisionId: 'hp-1',
  enabled: true,
  delay: { kind: 'quantile', quantilePerMille: 950, floorMs: 200, ceilingMs: 2_000, minSamples: 20 },
  maxHedges: 1,
  retry: { transient: ['connection_error', 'timeout_before_first_byte', 'rate_limited', 'server_error'], maxRetries: 1 },
  allowance: { maxAttempts: 3, maxExtraSpendMicrousd: 10_000n },
  stop: { spendFloorMicrousd: 1_000n, maxRouteErrorPerMille: 100, maxRouteInFlight: 50, minUsefulRemainingMs: 500 },
  bucket: { maxMilliTokens: 10_000, successRefillMilliTokens: 100 },
  owner: 'search-team',
  approvedPremiumMicrousd: 2_000n,
  experimentAllowance: { budgetMicrousd: 5_000_000n, period: 'month' },
  readOnlyTools: ['lookup'],
};

const t0 = new Date('2026-12-02T00:00:00Z');
const ctx = (over: Partial<HedgeTimerContext> = {}): HedgeTimerContext => ({
  now: t0,
  deadline: new Date(t0.getTime() + 5_000),
  winnerChosen: false,
  actionTerminal: false,
  route: { errorPerMille: 0, inFlight: 1, bucket: fullBucket(policy.bucket) },
  fundingHeadroomMicrousd: 1_000_000n,
  attempts: [{ role: 'primary', exposureMicrousd: 4_000n }],
  hedgeHoldMicrousd: 4_000n,
  ...over,
});

describe('decideHedge: the timer decision table', () => {
  it('fires with its own hold when every check passes', () => {
    expect(decideHedge(policy, ctx())).toEqual({ fire: true, holdMicrousd: 4_000n });
  });

  it.each<[string, Partial<HedgeTimerContext>, string]>([
    ['a winner exists', { winnerChosen: true }, 'winner_chosen'],
    ['the action is terminal', { actionTerminal: true }, 'action_terminal'],
    ['too little deadline left', { deadline: new Date(t0.getTime() + 499) }, 'deadline_too_short'],
    ['the route errs', { route: { errorPerMille: 101, inFlight: 1, bucket: fullBucket(policy.bucket) } }, 'route_unhealthy'],
    ['the route is full', { route: { errorPerMille: 0, inFlight: 50, bucket: fullBucket(policy.bucket) } }, 'route_unhealthy'],
    ['the funding budget would drop below its floor', { fundingHeadroomMicrousd: 4_999n }, 'spend_floor'],
    ['the overload bucket is at half', { route: { errorPerMille: 0, inFlight: 1, bucket: { milliTokens: 5_000 } } }, 'overload'],
    [
      'the action already has a hedge',
      {
        attempts: [
          { role: 'primary', exposureMicrousd: 4_000n },
          { role: 'hedge', exposureMicrousd: 4_000n },
        ],
      },
      'hedge_limit',
    ],
    [
      'the attempt allowance is spent',
      {
        attempts: [
          { role: 'primary', exposureMicrousd: 4_000n },
          { role: 'retry', exposureMicrousd: 1_000n },
          { role: 'fallback', exposureMicrousd: 1_000n },
        ],
      },
      'attempt_allowance_spent',
    ],
    [
      'the extra spend allowance cannot fund the hold (an uncertain retry counts)',
      {
        attempts: [
          { role: 'primary', exposureMicrousd: 4_000n },
          { role: 'retry', exposureMicrousd: 6_001n },
        ],
      },
      'spend_allowance_spent',
    ],
  ])('denies when %s', (_label, over, reason) => {
    expect(decideHedge(policy, ctx(over))).toEqual({ fire: false, reason });
  });

  it('checks in the issue’s order: a winner outranks every other reason', () => {
    const everythingWrong = ctx({
      winnerChosen: true,
      actionTerminal: true,
      deadline: t0,
      fundingHeadroomMicrousd: 0n,
      route: { errorPerMille: 1000, inFlight: 999, bucket: { milliTokens: 0 } },
    });
    expect(decideHedge(policy, everythingWrong)).toEqual({ fire: false, reason: 'winner_chosen' });
    expect(decideHedge(policy, { ...everythingWrong, winnerChosen: false })).toEqual({ fire: false, reason: 'action_terminal' });
  });
});

describe('hedgeIneligibility', () => {
  const request = { stream: false, effectiveCandidates: 1, toolNames: [] as string[], readOnlyTools: ['lookup'] };
  it.each<[string, Partial<typeof request>, Partial<HedgePolicy>, string | null]>([
    ['a plain request', {}, {}, null],
    ['read-only tools', { toolNames: ['lookup'] }, {}, null],
    ['hedging off', {}, { enabled: false }, 'hedging_disabled'],
    ['no hedges allowed', {}, { maxHedges: 0 }, 'hedging_disabled'],
    ['a stream', { stream: true }, {}, 'streaming'],
    ['two candidates', { effectiveCandidates: 2 }, {}, 'multi_candidate'],
    ['a tool with effects', { toolNames: ['lookup', 'send_email'] }, {}, 'tools_not_read_only'],
  ])('%s', (_label, r, p, expected) => {
    expect(hedgeIneligibility({ ...policy, ...p }, { ...request, ...r })).toBe(expected);
  });
});

describe('hedge delay', () => {
  it('nearest-rank quantiles', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(quantileMs(xs, 950)).toBe(95);
    expect(quantileMs(xs, 500)).toBe(50);
    expect(quantileMs(xs, 1000)).toBe(100);
    expect(quantileMs(xs, 0)).toBe(1);
    expect(quantileMs([], 950)).toBeNull();
  });

  it('fixed, clamped to floor and ceiling, and the ceiling while the route is unknown', () => {
    expect(hedgeDelayMs({ kind: 'fixed', ms: 300 }, [])).toBe(300);
    const q = policy.delay;
    expect(hedgeDelayMs(q, Array(20).fill(800))).toBe(800);
    expect(hedgeDelayMs(q, Array(20).fill(10))).toBe(200);
    expect(hedgeDelayMs(q, Array(20).fill(9_000))).toBe(2_000);
    expect(hedgeDelayMs(q, Array(19).fill(10))).toBe(2_000);
  });

  it('property: never below the floor nor above the ceiling, whatever the latencies', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(100_000)), (xs) => {
        const d = hedgeDelayMs(policy.delay, xs);
        expect(d).toBeGreaterThanOrEqual(200);
        expect(d).toBeLessThanOrEqual(2_000);
      }),
    );
  });
});

describe('overload bucket (gRPC A6)', () => {
  it('failures drain a token, successes refill a tenth; extra attempts only above half', () => {
    let b = fullBucket(policy.bucket);
    for (let i = 0; i < 5; i++) b = bucketAfter(b, 'failure', policy.bucket);
    expect(b.milliTokens).toBe(5_000);
    expect(bucketAllowsExtraAttempts(b, policy.bucket)).toBe(false);
    b = bucketAfter(b, 'success', policy.bucket);
    expect(b.milliTokens).toBe(5_100);
    expect(bucketAllowsExtraAttempts(b, policy.bucket)).toBe(true);
  });

  it('property: stays within [0, max] under any sequence', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom<'success' | 'failure'>('success', 'failure'), { maxLength: 200 }), (outcomes) => {
        let b = fullBucket(policy.bucket);
        for (const o of outcomes) {
          b = bucketAfter(b, o, policy.bucket);
          expect(b.milliTokens).toBeGreaterThanOrEqual(0);
          expect(b.milliTokens).toBeLessThanOrEqual(policy.bucket.maxMilliTokens);
        }
      }),
    );
  });
});

describe('retries', () => {
  it.each<[AttemptFailure, string | null]>([
    [{ kind: 'connection_error' }, 'connection_error'],
    [{ kind: 'timeout', firstByteReceived: false }, 'timeout_before_first_byte'],
    [{ kind: 'timeout', firstByteReceived: true }, null],
    [{ kind: 'http', status: 429 }, 'rate_limited'],
    [{ kind: 'http', status: 503 }, 'server_error'],
    [{ kind: 'http', status: 400 }, null],
    [{ kind: 'http', status: 401 }, null],
    [{ kind: 'answer_too_large' }, null],
  ])('%j is transient as %p', (failure, expected) => {
    expect(transientFailureOf(failure)).toBe(expected);
  });

  const base = {
    attempts: [{ role: 'primary', exposureMicrousd: 4_000n }] as AttemptExposure[],
    retryHoldMicrousd: 4_000n,
    remainingMs: 3_000,
    minUsefulRemainingMs: 500,
  };
  it('retries a transient failure inside the allowance', () => {
    expect(retryDecision(policy, { kind: 'http', status: 503 }, base)).toEqual({ retry: true, failure: 'server_error' });
  });
  it.each<[string, AttemptFailure, Partial<typeof base>, Partial<HedgePolicy>, string]>([
    ['a 400', { kind: 'http', status: 400 }, {}, {}, 'not_transient'],
    [
      'a 429 the policy does not retry',
      { kind: 'http', status: 429 },
      {},
      { retry: { transient: ['server_error'], maxRetries: 1 } },
      'not_transient',
    ],
    [
      'a second retry',
      { kind: 'connection_error' },
      {
        attempts: [
          { role: 'primary', exposureMicrousd: 1n },
          { role: 'retry', exposureMicrousd: 1n },
        ],
      },
      {},
      'retry_limit',
    ],
    ['too little time', { kind: 'connection_error' }, { remainingMs: 499 }, {}, 'deadline_too_short'],
    [
      'no attempts left',
      { kind: 'connection_error' },
      {},
      { allowance: { maxAttempts: 1, maxExtraSpendMicrousd: 10_000n } },
      'attempt_allowance_spent',
    ],
    ['no money left', { kind: 'connection_error' }, { retryHoldMicrousd: 10_001n }, {}, 'spend_allowance_spent'],
  ])('does not retry %s', (_label, failure, over, p, reason) => {
    expect(retryDecision({ ...policy, ...p }, failure, { ...base, ...over })).toEqual({ retry: false, reason });
  });

  it('the allowance counts every extra attempt, never the primary', () => {
    expect(
      extraAttemptAllowance(policy, [
        { role: 'primary', exposureMicrousd: 99_999n },
        { role: 'hedge', exposureMicrousd: 3_000n },
      ]),
    ).toEqual({ attemptsLeft: 1, extraSpendLeftMicrousd: 7_000n });
  });
});

describe('hedgePolicyProblems', () => {
  it('accepts a sound policy, fixed or quantile', () => {
    expect(hedgePolicyProblems(policy)).toEqual([]);
    expect(hedgePolicyProblems({ ...policy, delay: { kind: 'fixed', ms: 60_000 }, experimentAllowance: null })).toEqual([]);
  });

  const quantile = (over: Partial<Extract<HedgePolicy['delay'], { kind: 'quantile' }>>): Partial<HedgePolicy> => ({
    delay: { kind: 'quantile', quantilePerMille: 950, floorMs: 0, ceilingMs: 10, minSamples: 1, ...over },
  });

  it.each<[string, Partial<HedgePolicy>, string]>([
    ['quantile 0', quantile({ quantilePerMille: 0 }), 'delay.quantilePerMille'],
    ['quantile 1000', quantile({ quantilePerMille: 1000 }), 'delay.quantilePerMille'],
    ['floor above ceiling', quantile({ floorMs: 20 }), 'delay.floorMs'],
    ['ceiling above 60 s', quantile({ ceilingMs: 60_001 }), 'delay.ceilingMs'],
    ['fixed delay above 60 s', { delay: { kind: 'fixed', ms: 60_001 } }, 'delay.ms'],
    ['fractional delay', { delay: { kind: 'fixed', ms: 1.5 } }, 'delay.ms'],
    ['no sample needed', quantile({ minSamples: 0 }), 'delay.minSamples'],
    [
      '0 attempts',
      { allowance: { maxAttempts: 0, maxExtraSpendMicrousd: 0n }, retry: { transient: [], maxRetries: 0 } },
      'allowance.maxAttempts',
    ],
    ['11 attempts', { allowance: { maxAttempts: 11, maxExtraSpendMicrousd: 0n } }, 'allowance.maxAttempts'],
    ['retries beyond the attempts', { retry: { transient: [], maxRetries: 3 } }, 'retry.maxRetries'],
    ['negative extra spend', { allowance: { maxAttempts: 3, maxExtraSpendMicrousd: -1n } }, 'allowance.maxExtraSpendMicrousd'],
    [
      'extra spend above the budget bound',
      { allowance: { maxAttempts: 3, maxExtraSpendMicrousd: MAX_BUDGET_MICROUSD + 1n } },
      'allowance.maxExtraSpendMicrousd',
    ],
    ['negative premium', { approvedPremiumMicrousd: -1n }, 'approvedPremiumMicrousd'],
    [
      'huge experiment budget',
      { experimentAllowance: { budgetMicrousd: MAX_BUDGET_MICROUSD + 1n, period: 'day' } },
      'experimentAllowance.budgetMicrousd',
    ],
    ['empty bucket', { bucket: { maxMilliTokens: 0, successRefillMilliTokens: 100 } }, 'bucket.maxMilliTokens'],
    ['no refill', { bucket: { maxMilliTokens: 10, successRefillMilliTokens: 0 } }, 'bucket.successRefillMilliTokens'],
    ['error rate above 1000', { stop: { ...policy.stop, maxRouteErrorPerMille: 1001 } }, 'stop.maxRouteErrorPerMille'],
    ['no in-flight room', { stop: { ...policy.stop, maxRouteInFlight: 0 } }, 'stop.maxRouteInFlight'],
    ['transient listed twice', { retry: { transient: ['rate_limited', 'rate_limited'], maxRetries: 1 } }, 'retry.transient[1]'],
    ['tool listed twice', { readOnlyTools: ['a', 'a'] }, 'readOnlyTools[1]'],
    ['empty tool name', { readOnlyTools: [''] }, 'readOnlyTools[0]'],
    ['blank owner', { owner: ' ' }, 'owner'],
  ])('refuses %s', (_name, change, path) => {
    expect(hedgePolicyProblems({ ...policy, ...change }).map((p) => p.path)).toContain(path);
  });
});

describe('sameHedgeSettings', () => {
  const { revisionId: _id, ...settings } = {
    ...policy,
    owner: 'search',
    approvedPremiumMicrousd: 500n,
    experimentAllowance: { budgetMicrousd: 5_000_000n, period: 'month' as const },
    readOnlyTools: ['lookup'],
  };
  it('ignores key order and how the objects were built; sees any difference, bigints included', () => {
    const rebuilt = JSON.parse(JSON.stringify(settings, (_k, v) => (typeof v === 'bigint' ? `${v}` : v)));
    const same = {
      ...settings,
      delay: Object.assign(Object.create(null), {
        minSamples: 20,
        ceilingMs: 2_000,
        floorMs: 200,
        quantilePerMille: 950,
        kind: 'quantile',
      }),
      readOnlyTools: [...rebuilt.readOnlyTools],
    };
    expect(sameHedgeSettings(settings, same)).toBe(true);
    expect(sameHedgeSettings(settings, { ...settings, approvedPremiumMicrousd: 501n })).toBe(false);
    expect(sameHedgeSettings(settings, { ...settings, readOnlyTools: ['lookup', 'search'] })).toBe(false);
    expect(sameHedgeSettings(settings, { ...settings, experimentAllowance: null })).toBe(false);
    expect(sameHedgeSettings(settings, { ...settings, delay: { kind: 'fixed', ms: 200 } })).toBe(false);
  });
});

describe('requestToolNames', () => {
  it.each([
    ['openai-chat', { messages: [] }, []],
    ['openai-chat', { tools: [{ type: 'function', function: { name: 'lookup' } }, { type: 'web_search' }] }, ['lookup', 'web_search']],
    [
      'openai-responses',
      { tools: [{ type: 'function', name: 'lookup' }, { type: 'web_search_preview' }] },
      ['lookup', 'web_search_preview'],
    ],
    [
      'gemini-generate',
      { tools: [{ functionDeclarations: [{ name: 'lookup' }, { name: 'fetch' }] }, { googleSearch: {} }] },
      ['lookup', 'fetch', 'googleSearch'],
    ],
    ['gemini-generate', { tools: [{ function_declarations: [{ name: 'lookup' }] }] }, ['lookup']],
  ] as const)('%s %j → %j', (kind, body, names) => {
    expect(requestToolNames(body as Record<string, unknown>, kind)).toEqual(names);
  });

  it('a shape it cannot read is a tool no policy declares, so the request is not hedged', () => {
    const policy = { enabled: true, maxHedges: 1 as const };
    const cases: Array<[Record<string, unknown>, 'openai-chat' | 'gemini-generate']> = [
      [{ tools: 'x' }, 'openai-chat'],
      [{ tools: [7] }, 'openai-chat'],
      [{ tools: [{ function: {} }] }, 'openai-chat'],
      [{ tools: [{ functionDeclarations: 'x' }] }, 'gemini-generate'],
    ];
    for (const [body, kind] of cases) {
      const toolNames = requestToolNames(body, kind);
      expect(toolNames.length).toBeGreaterThan(0);
      expect(hedgeIneligibility(policy, { stream: false, effectiveCandidates: 1, toolNames, readOnlyTools: ['lookup'] })).toBe(
        'tools_not_read_only',
      );
    }
  });
});
