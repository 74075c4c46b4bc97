import {
  addUtcDays,
  assessWorkloadDay,
  controlThresholdProblems,
  ControlThresholds,
  DayTally,
  DEFAULT_CONTROL_THRESHOLDS,
  EMPTY_TALLY,
  parseUtcDay,
  WorkloadDayInput,
} from './controls';

const DAY_END = new Date('2026-11-09T00:00:00Z');
const tally = (over: Partial<DayTally>): DayTally => ({ ...EMPTY_TALLY, ...over });

function input(over: Partial<WorkloadDayInput> = {}): WorkloadDayInput {
  return {
    thresholds: DEFAULT_CONTROL_THRESHOLDS,
    perCandidateOutputCeiling: 500,
    day: new Map(),
    baseline: new Map(),
    output: new Map(),
    exceptions: [],
    ...over,
  };
}

describe('assessWorkloadDay', () => {
  const baseline = tally({ requested: { omitted: 140, '1': 140 }, admitted: 280 });

  it('raises one count_shift when the day’s n=1 callers switch to n=3, naming 3', () => {
    const day = tally({ requested: { omitted: 100, '3': 100 }, admitted: 200 });
    const found = assessWorkloadDay(input({ day: new Map([['r1', day]]), baseline: new Map([['r1', baseline]]) }), DAY_END);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ kind: 'count_shift', routeId: 'r1', dayTotal: 200, baselineTotal: 280 });
    expect(found[0].kind === 'count_shift' && found[0].grew[0].category).toBe('3');
  });

  it('raises nothing for a day like its baseline, or below the minimum sample', () => {
    const same = tally({ requested: { omitted: 100, '1': 100 }, admitted: 200 });
    const small = tally({ requested: { '3': 150 }, admitted: 150 });
    expect(assessWorkloadDay(input({ day: new Map([['r1', same]]), baseline: new Map([['r1', baseline]]) }), DAY_END)).toEqual([]);
    expect(assessWorkloadDay(input({ day: new Map([['r1', small]]), baseline: new Map([['r1', baseline]]) }), DAY_END)).toEqual([]);
  });

  it('compares each route with its own baseline only', () => {
    const shifted = tally({ requested: { '3': 250 }, admitted: 250 });
    const found = assessWorkloadDay(input({ day: new Map([['r2', shifted]]), baseline: new Map([['r1', baseline]]) }), DAY_END);
    expect(found).toEqual([]); // r2 has no baseline: insufficient sample, not an alert
  });

  it('alerts on output per request above the ceiling by default, and above an explicit threshold', () => {
    const output = new Map([['r1', { requests: 40, mean: 400, p50: 350, p95: 900 }]]);
    expect(assessWorkloadDay(input({ output }), DAY_END)).toEqual([
      { kind: 'output_per_request', routeId: 'r1', requests: 40, p95: 900, thresholdTokens: 500 },
    ]);
    const lenient: ControlThresholds = { ...DEFAULT_CONTROL_THRESHOLDS, outputP95MaxTokens: 1000 };
    expect(assessWorkloadDay(input({ output, thresholds: lenient }), DAY_END)).toEqual([]);
  });

  it('alerts on an exception at or above 80 % of its budget, with days to expiry, grouped by its route', () => {
    const exceptions = [
      {
        exceptionId: 'ex-hot',
        routeId: null,
        budgetMicrousd: 1_000_000n,
        spentMicrousd: 800_000n,
        expiresAt: new Date('2026-11-12T00:00:00Z'),
      },
      {
        exceptionId: 'ex-cool',
        routeId: null,
        budgetMicrousd: 1_000_000n,
        spentMicrousd: 799_999n,
        expiresAt: new Date('2026-11-12T00:00:00Z'),
      },
      // expired before the day began: not judged
      { exceptionId: 'ex-old', routeId: 'r1', budgetMicrousd: 10n, spentMicrousd: 10n, expiresAt: new Date('2026-11-07T00:00:00Z') },
    ];
    expect(assessWorkloadDay(input({ exceptions }), DAY_END)).toEqual([
      {
        kind: 'exception_budget',
        routeId: '*',
        exceptions: [{ exceptionId: 'ex-hot', share: 0.8, spentMicrousd: 800_000n, budgetMicrousd: 1_000_000n, daysToExpiry: 3 }],
      },
    ]);
  });

  it('alerts on a refusal-rate jump of at least the threshold, with the codes', () => {
    const base = tally({ admitted: 95, refused: 5, refusals: { budget_exhausted: 5 } });
    const jump = tally({ admitted: 80, refused: 20, refusals: { candidate_count_exceeds_policy: 20 } });
    const mild = tally({ admitted: 90, refused: 10, refusals: { budget_exhausted: 10 } });
    const found = assessWorkloadDay(input({ day: new Map([['r1', jump]]), baseline: new Map([['r1', base]]) }), DAY_END);
    expect(found).toEqual([
      {
        kind: 'refusal_rate_jump',
        routeId: 'r1',
        dayTotal: 100,
        dayRate: 0.2,
        baselineRate: 0.05,
        refusals: { candidate_count_exceeds_policy: 20 },
      },
    ]);
    expect(assessWorkloadDay(input({ day: new Map([['r1', mild]]), baseline: new Map([['r1', base]]) }), DAY_END)).toEqual([]);
  });
});

describe('controlThresholdProblems', () => {
  it('accepts the defaults', () => {
    expect(controlThresholdProblems(DEFAULT_CONTROL_THRESHOLDS)).toEqual([]);
  });

  it.each([
    [{ shift: { ...DEFAULT_CONTROL_THRESHOLDS.shift, minSample: 5 } }, 'shift.min_sample'],
    [{ shift: { ...DEFAULT_CONTROL_THRESHOLDS.shift, minDistance: 0 } }, 'shift.min_distance'],
    [{ shift: { ...DEFAULT_CONTROL_THRESHOLDS.shift, significance: 0.2 as 0.05 } }, 'shift.significance'],
    [{ outputP95MaxTokens: 0 }, 'output_p95_max_tokens'],
    [{ exceptionBudgetShare: 1.5 }, 'exception_budget_share'],
    [{ exceptionBudgetShare: Number.NaN }, 'exception_budget_share'],
    [{ refusal: { minSample: 0, minIncrease: 0.1 } }, 'refusal.min_sample'],
    [{ refusal: { minSample: 10, minIncrease: -0.1 } }, 'refusal.min_increase'],
  ] as Array<[Partial<ControlThresholds>, string]>)('refuses %j (%s)', (over, param) => {
    expect(controlThresholdProblems({ ...DEFAULT_CONTROL_THRESHOLDS, ...over }).map((p) => p.param)).toEqual([param]);
  });
});

describe('UTC days', () => {
  it('parses only calendar days and steps across months', () => {
    expect(parseUtcDay('2026-02-30')).toBeNull();
    expect(parseUtcDay('2026-1-01')).toBeNull();
    expect(parseUtcDay('2026-12-01')?.toISOString()).toBe('2026-12-01T00:00:00.000Z');
    expect(addUtcDays('2026-12-01', -7)).toBe('2026-11-24');
  });
});
