import {
  fixedWindow,
  reconcileInstanceCounters,
  quotaScopeName,
  readWorkflowId,
  scopeLimitSpendRaises,
  ScopeLimitSpend,
  workflowIdHash,
} from './quota-scopes';
import { workloadSpendRaises, WorkloadSpendLimits } from './spend-changes';

describe('quotaScopeName', () => {
  it.each([
    [quotaScopeName('workload'), 'workload'],
    [quotaScopeName('workflow'), 'workflow'],
    [quotaScopeName('team', 'payments'), 'team:payments'],
    [quotaScopeName('environment', 'prod'), 'environment:prod'],
    [quotaScopeName('team', 'payments', 'adm-1'), 'instance:adm-1/team:payments'],
    [quotaScopeName('team', 'payments', null), 'team:payments'],
  ])('%s', (name, expected) => expect(name).toBe(expected));
});

describe('fixedWindow', () => {
  it.each([
    ['2026-11-30T12:00:00.000Z', 60, '2026-11-30T12:00:00.000Z', 60],
    ['2026-11-30T12:00:59.500Z', 60, '2026-11-30T12:00:00.000Z', 1],
    ['2026-11-30T12:07:15.000Z', 300, '2026-11-30T12:05:00.000Z', 165],
    ['2026-11-30T12:07:15.200Z', 10, '2026-11-30T12:07:10.000Z', 5],
  ])('%s in windows of %is → %s, retry after %is', (at, seconds, start, retry) => {
    const w = fixedWindow(new Date(at), seconds);
    expect(w.windowStart.toISOString()).toBe(start);
    expect(w.retryAfterSeconds).toBe(retry);
  });
  it('refuses a non-positive window', () => expect(() => fixedWindow(new Date(0), 0)).toThrow(RangeError));
});

describe('readWorkflowId', () => {
  const body = { user: 'u-1', metadata: { run: 'wf-7', n: 3 } };
  it.each([
    [{ header: 'wf-h', body, field: 'user' }, 'wf-h'],
    [{ header: null, body, field: 'user' }, 'u-1'],
    [{ header: null, body, field: 'metadata.run' }, 'wf-7'],
    [{ header: null, body, field: 'metadata.absent' }, null],
    [{ header: null, body, field: null }, null],
    [{ header: null, body: {}, field: 'user' }, null],
    [{ header: null, body: { metadata: 'x' }, field: 'metadata.run' }, null],
  ])('%j → %p', (input, expected) => expect(readWorkflowId(input)).toEqual({ ok: true, workflowId: expected }));

  it.each([
    [{ header: '', body, field: null }, 'x-gateway-workflow-id'],
    [{ header: 'x'.repeat(257), body, field: null }, 'x-gateway-workflow-id'],
    [{ header: 'a\u0000b', body, field: null }, 'x-gateway-workflow-id'],
    [{ header: 'a\u200bb', body, field: null }, 'x-gateway-workflow-id'],
    [{ header: null, body: { user: 42 }, field: 'user' }, 'user'],
    [{ header: null, body: { metadata: { run: 'a\nb' } }, field: 'metadata.run' }, 'metadata.run'],
  ])('refuses %j naming %s', (input, param) => {
    expect(readWorkflowId(input)).toMatchObject({ ok: false, code: 'invalid_request', param });
  });

  it('accepts exactly 256 printable characters, including non-ASCII letters', () => {
    expect(readWorkflowId({ header: 'é'.repeat(256), body: {}, field: null })).toMatchObject({ ok: true });
  });
});

describe('workflowIdHash', () => {
  it('is SHA-256 hex and never the id', () => {
    const h = workflowIdHash('run-42');
    expect(h).toMatch(/^[0-9a-f]{64}$/);
    expect(h).toBe(workflowIdHash('run-42'));
    expect(h).not.toBe(workflowIdHash('run-43'));
  });
});

describe('scopeLimitSpendRaises', () => {
  const base: ScopeLimitSpend = {
    tokensPerMinute: 1000,
    tokenRateEnforcement: 'organisation',
    budgetMicrousd: 5_000n,
    budgetPeriod: 'month',
  };
  it.each<[Partial<ScopeLimitSpend>, string[]]>([
    [{}, []],
    [{ tokensPerMinute: 500, budgetMicrousd: 1n }, []],
    [{ tokensPerMinute: 2000 }, ['tokens_per_minute up']],
    [{ tokensPerMinute: null }, ['tokens_per_minute removed']],
    [{ tokenRateEnforcement: 'instance' }, ['token rate enforced per instance']],
    [{ budgetMicrousd: 6_000n }, ['budget up']],
    [{ budgetMicrousd: null }, ['budget removed']],
    [{ budgetPeriod: 'day' }, ['budget period shortened']],
  ])('%j raises %j', (change, raises) => {
    expect(scopeLimitSpendRaises(base, { ...base, ...change })).toEqual(raises);
  });
  it('a first limit only restricts', () => expect(scopeLimitSpendRaises(null, base)).toEqual([]));
  it('setting a limit where there was none does not raise', () => {
    const none: ScopeLimitSpend = { ...base, tokensPerMinute: null, budgetMicrousd: null };
    expect(scopeLimitSpendRaises(none, base)).toEqual([]);
  });
});

describe('workload fan-out settings', () => {
  const w: WorkloadSpendLimits = {
    defaultMaxCandidates: 1,
    perCandidateOutputCeiling: 100,
    budgetMicrousd: 1n,
    budgetPeriod: 'month',
    maxInFlight: 1,
    tokensPerMinute: null,
    fallbackChain: [],
    maxCallsPerWorkflow: 5,
    workflowWindowSeconds: 60,
  };
  it.each<[Partial<WorkloadSpendLimits>, string[]]>([
    [{ maxCallsPerWorkflow: 4, workflowWindowSeconds: 120 }, []],
    [{ maxCallsPerWorkflow: 6 }, ['max_calls_per_workflow up']],
    [{ maxCallsPerWorkflow: null }, ['max_calls_per_workflow removed']],
    [{ workflowWindowSeconds: 30 }, ['workflow_window_seconds shortened']],
  ])('%j raises %j', (change, raises) => expect(workloadSpendRaises(w, { ...w, ...change })).toEqual(raises));
  it('a first fan-out limit only restricts', () =>
    expect(workloadSpendRaises({ ...w, maxCallsPerWorkflow: null }, { ...w, maxCallsPerWorkflow: 3, workflowWindowSeconds: 1 })).toEqual(
      [],
    ));
});

describe('reconcileInstanceCounters', () => {
  const w1 = new Date('2026-12-01T10:00:00Z');
  const w2 = new Date('2026-12-01T10:01:00Z');
  it('sums each scope and window over instances, and reports what no instance saw and the excess over the limit', () => {
    const out = reconcileInstanceCounters([
      { scope: 'team', scopeId: 'pay', windowStart: w1, instanceId: 'b', tokens: 700, limit: 1000 },
      { scope: 'team', scopeId: 'pay', windowStart: w1, instanceId: 'a', tokens: 600, limit: 1000 },
      { scope: 'team', scopeId: 'pay', windowStart: w2, instanceId: 'a', tokens: 10, limit: 1000 },
      { scope: 'environment', scopeId: 'prod', windowStart: w1, instanceId: 'a', tokens: 5, limit: null },
    ]);
    expect(out).toEqual([
      expect.objectContaining({
        scopeId: 'pay',
        windowStart: w2,
        organisationTokens: 10,
        unseenByAnyInstanceTokens: 0,
        overLimitTokens: 0,
      }),
      expect.objectContaining({ scope: 'environment', windowStart: w1, organisationTokens: 5, limit: null, overLimitTokens: 0 }),
      {
        scope: 'team',
        scopeId: 'pay',
        windowStart: w1,
        instances: [
          { instanceId: 'a', tokens: 600 },
          { instanceId: 'b', tokens: 700 },
        ],
        organisationTokens: 1300,
        largestInstanceTokens: 700,
        unseenByAnyInstanceTokens: 600,
        limit: 1000,
        overLimitTokens: 300,
      },
    ]);
  });
  it('nothing to reconcile', () => expect(reconcileInstanceCounters([])).toEqual([]));
});
