import fc from 'fast-check';
import {
  assignCohort,
  compareCohorts,
  compareIcer,
  Cohort,
  ExperimentAction,
  IcerValue,
  MIN_BOOTSTRAP_RESAMPLES,
  SamplePlan,
  seededUniform,
  summariseCohort,
  verdictOf,
} from './experiment';

/** `n` actions of one cohort, the first `k` on time, each costing `cost` micro-USD. */
function cohort(c: Cohort, n: number, k: number, cost: bigint, unresolved = 0n): ExperimentAction[] {
  return Array.from({ length: n }, (_, i) => ({ cohort: c, onTimeValid: i < k, settledMicrousd: cost, unresolvedMicrousd: unresolved }));
}

const plan = (over: Partial<SamplePlan> = {}): SamplePlan => ({
  minActionsPerCohort: 100,
  approvedPremiumMicrousd: 2_000n,
  maxUnresolvedShareBps: 0,
  ...over,
});
const boot = { seed: 7, resamples: MIN_BOOTSTRAP_RESAMPLES };
const finite = (v: IcerValue): bigint => {
  if (v.kind !== 'finite') throw new Error('expected a finite cost');
  return v.microusd;
};

describe('assignCohort', () => {
  const ids = Array.from({ length: 100_000 }, (_, i) => `act_${i.toString(36).padStart(6, '0')}`);

  it('is a pure function of (experiment, action): the same pair always lands in the same cohort', () => {
    for (const id of ids.slice(0, 1_000)) expect(assignCohort('exp_a', id, 1_000)).toBe(assignCohort('exp_a', id, 1_000));
  });

  it('is balanced within ±2 % on 100k ids, at an even split and at the default 10 % holdout', () => {
    const holdoutAt = (bps: number) => ids.filter((id) => assignCohort('exp_balance', id, bps) === 'holdout').length;
    const even = holdoutAt(5_000);
    expect(Math.abs(even - 50_000)).toBeLessThanOrEqual(1_000);
    const tenth = holdoutAt(1_000);
    expect(Math.abs(tenth - 10_000)).toBeLessThanOrEqual(200);
  });

  it('draws independently per experiment (another experiment reshuffles the same ids)', () => {
    const sample = ids.slice(0, 20_000);
    const agree = sample.filter((id) => assignCohort('exp_one', id, 5_000) === assignCohort('exp_two', id, 5_000)).length;
    expect(Math.abs(agree - 10_000)).toBeLessThanOrEqual(400);
  });

  it('holds every action back at 100 % and none at 0 %, and refuses shares outside 0..10,000 bps', () => {
    expect(ids.slice(0, 200).every((id) => assignCohort('e', id, 10_000) === 'holdout')).toBe(true);
    expect(ids.slice(0, 200).every((id) => assignCohort('e', id, 0) === 'hedged')).toBe(true);
    expect(() => assignCohort('e', 'a', -1)).toThrow(RangeError);
    expect(() => assignCohort('e', 'a', 10_001)).toThrow(RangeError);
    expect(() => assignCohort('e', 'a', 0.5)).toThrow(RangeError);
  });
});

describe('summariseCohort', () => {
  it('counts on-time answers and sums money exactly, rounding per-answer costs up', () => {
    const s = summariseCohort([...cohort('hedged', 9, 7, 1_000n), ...cohort('hedged', 1, 0, 1n, 50n)]);
    expect(s).toEqual({
      actions: 10,
      onTimeValid: 7,
      onTimeRate: 0.7,
      settledMicrousd: 9_001n,
      unresolvedMicrousd: 50n,
      costPerActionMicrousd: 901n, // 900.1 up
      costPerOnTimeMicrousd: 1_286n, // 1,285.857… up
    });
    expect(summariseCohort([])).toMatchObject({ actions: 0, onTimeRate: null, costPerActionMicrousd: null, costPerOnTimeMicrousd: null });
  });

  it('refuses negative or non-integer money', () => {
    expect(() => summariseCohort([{ cohort: 'hedged', onTimeValid: true, settledMicrousd: -1n, unresolvedMicrousd: 0n }])).toThrow(
      RangeError,
    );
    expect(() =>
      summariseCohort([{ cohort: 'hedged', onTimeValid: true, settledMicrousd: 1.5 as unknown as bigint, unresolvedMicrousd: 0n }]),
    ).toThrow(RangeError);
  });
});

describe('compareCohorts', () => {
  it('computes the point estimates a person computes by hand', () => {
    // Hedged: 10 actions, 9 on time, $0.001 each. Holdout: 10 actions, 6 on time, $0.0006 each.
    // Cost per action differs by 400 µ$, the on-time rate by 0.3: 400 / 0.3 = 1,333.3… → 1,334 µ$.
    const r = compareCohorts(
      [...cohort('hedged', 10, 9, 1_000n), ...cohort('holdout', 10, 6, 600n)],
      plan({ minActionsPerCohort: 10 }),
      boot,
    );
    expect(r.hedged).toMatchObject({
      actions: 10,
      onTimeValid: 9,
      settledMicrousd: 10_000n,
      costPerActionMicrousd: 1_000n,
      costPerOnTimeMicrousd: 1_112n,
    });
    expect(r.holdout).toMatchObject({
      actions: 10,
      onTimeValid: 6,
      settledMicrousd: 6_000n,
      costPerActionMicrousd: 600n,
      costPerOnTimeMicrousd: 1_000n,
    });
    expect(r.rateDifference?.estimate).toBeCloseTo(0.3, 12);
    expect(r.incrementalCost?.estimate).toEqual({ kind: 'finite', microusd: 1_334n });
  });

  // p_h = 0.95, p_0 = 0.85, n = 2,000 each; hedged actions cost 1,100 µ$, holdout ones 1,000 µ$.
  const strong = [...cohort('hedged', 2_000, 1_900, 1_100n), ...cohort('holdout', 2_000, 1_700, 1_000n)];
  let strongResult: ReturnType<typeof compareCohorts>;
  beforeAll(() => {
    strongResult = compareCohorts(strong, plan(), boot);
  });

  it("puts the rate difference's bootstrap interval where the normal approximation does (n = 2,000 per cohort)", () => {
    // SE = √(0.95·0.05/2000 + 0.85·0.15/2000) = 0.009354, so ±1.96·SE = ±0.01833.
    const r = strongResult;
    const i = r.rateDifference!.interval;
    expect(Math.abs(i.low - (0.1 - 0.01833))).toBeLessThan(0.004);
    expect(Math.abs(i.high - (0.1 + 0.01833))).toBeLessThan(0.004);
    // Costs per action are constant, so the cost interval is 100 µ$ over the rate interval's ends.
    expect(r.incrementalCost!.estimate).toEqual({ kind: 'finite', microusd: 1_000n });
    expect(Number(finite(r.incrementalCost!.interval.low))).toBeGreaterThan(100 / (0.1 + 0.01833) - 40);
    expect(Number(finite(r.incrementalCost!.interval.high))).toBeLessThan(100 / (0.1 - 0.01833) + 60);
    expect(r.result).toEqual({ verdict: 'established' });
  });

  it('judges the cost against the approved premium: above it, or an interval reaching past it, is not established', () => {
    const r = strongResult;
    const again = (p: SamplePlan) => verdictOf(p, r, r.rateDifference!.interval, r.incrementalCost!.interval);
    expect(again(plan())).toEqual({ verdict: 'established' });
    expect(again(plan({ approvedPremiumMicrousd: 500n }))).toEqual({ verdict: 'not_established', reason: 'cost_above_premium' });
    expect(again(plan({ approvedPremiumMicrousd: 1_000n }))).toEqual({ verdict: 'not_established', reason: 'cost_uncertain' });
    expect(again(plan({ minActionsPerCohort: 2_001 }))).toEqual({ verdict: 'pending', reason: 'sample_plan_not_met' });
  });

  it('a zero improvement is not established, whatever it costs', () => {
    const r = compareCohorts([...cohort('hedged', 1_000, 900, 1_000n), ...cohort('holdout', 1_000, 900, 1_000n)], plan(), boot);
    expect(r.rateDifference!.estimate).toBe(0);
    expect(r.rateDifference!.interval.low).toBeLessThan(0);
    expect(r.rateDifference!.interval.high).toBeGreaterThan(0);
    expect(r.incrementalCost!.estimate).toEqual({ kind: 'unbounded' });
    expect(r.result).toEqual({ verdict: 'not_established', reason: 'improvement_uncertain' });
  });

  it('a negative improvement is not established: its whole interval is below zero', () => {
    const r = compareCohorts([...cohort('hedged', 1_000, 800, 1_200n), ...cohort('holdout', 1_000, 900, 1_000n)], plan(), boot);
    expect(r.rateDifference!.estimate).toBeCloseTo(-0.1, 12);
    expect(r.rateDifference!.interval.high).toBeLessThan(0);
    expect(r.result).toEqual({ verdict: 'not_established', reason: 'no_improvement' });
  });

  it('stays pending until the sample plan is met and losers’ exposure is reconciled', () => {
    const good = [...cohort('hedged', 400, 380, 1_100n), ...cohort('holdout', 400, 300, 1_000n)];
    expect(compareCohorts(good, plan({ minActionsPerCohort: 400 }), boot).result).toEqual({ verdict: 'established' });
    expect(compareCohorts(good, plan({ minActionsPerCohort: 401 }), boot).result).toEqual({
      verdict: 'pending',
      reason: 'sample_plan_not_met',
    });
    const withLoserOpen = [...good, ...cohort('hedged', 1, 1, 1_100n, 1_100n)];
    const open = compareCohorts(withLoserOpen, plan(), boot);
    expect(open.unresolvedShareBps).toBe(14); // 1,100 of 842,200 µ$ is 13.06 bps, rounded up
    expect(open.result).toEqual({ verdict: 'pending', reason: 'exposure_unresolved' });
    expect(compareCohorts(withLoserOpen, plan({ maxUnresolvedShareBps: 14 }), boot).result).toEqual({ verdict: 'established' });
    expect(compareCohorts(cohort('hedged', 500, 400, 1n), plan(), boot)).toMatchObject({
      rateDifference: null,
      incrementalCost: null,
      result: { verdict: 'pending', reason: 'sample_plan_not_met' },
    });
  });

  it('never blends unresolved exposure into cost', () => {
    const r = compareCohorts(
      [...cohort('hedged', 100, 90, 1_000n, 5_000n), ...cohort('holdout', 100, 80, 1_000n)],
      plan({ maxUnresolvedShareBps: 10_000 }),
      boot,
    );
    expect(r.hedged.settledMicrousd).toBe(100_000n);
    expect(r.hedged.unresolvedMicrousd).toBe(500_000n);
    expect(r.hedged.costPerActionMicrousd).toBe(1_000n);
    expect(r.incrementalCost!.estimate).toEqual({ kind: 'finite', microusd: 0n });
  });

  it('is reproducible for a seed and refuses fewer than 2,000 resamples', () => {
    const data = [...cohort('hedged', 300, 270, 1_100n), ...cohort('holdout', 300, 240, 1_000n)];
    expect(compareCohorts(data, plan(), boot)).toEqual(compareCohorts(data, plan(), boot));
    expect(compareCohorts(data, plan(), { seed: 8, resamples: 2_000 }).rateDifference!.interval).not.toEqual(
      compareCohorts(data, plan(), boot).rateDifference!.interval,
    );
    expect(() => compareCohorts(data, plan(), { seed: 1, resamples: 1_999 })).toThrow(RangeError);
  });

  it('rounds the incremental cost up, never down (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 40 }),
        fc.array(fc.tuple(fc.boolean(), fc.bigInt({ min: 0n, max: 10_000_000n })), { minLength: 1, maxLength: 40 }),
        fc.array(fc.tuple(fc.boolean(), fc.bigInt({ min: 0n, max: 10_000_000n })), { minLength: 1, maxLength: 40 }),
        (_a, _b, h, o) => {
          const actions: ExperimentAction[] = [
            ...h.map(([t, c]) => ({ cohort: 'hedged' as const, onTimeValid: t, settledMicrousd: c, unresolvedMicrousd: 0n })),
            ...o.map(([t, c]) => ({ cohort: 'holdout' as const, onTimeValid: t, settledMicrousd: c, unresolvedMicrousd: 0n })),
          ];
          const r = compareCohorts(actions, plan({ minActionsPerCohort: 1 }), boot);
          const nh = BigInt(h.length);
          const no = BigInt(o.length);
          const kh = BigInt(h.filter(([t]) => t).length);
          const ko = BigInt(o.filter(([t]) => t).length);
          const ch = h.reduce((s, [, c]) => s + c, 0n);
          const co = o.reduce((s, [, c]) => s + c, 0n);
          const answers = kh * no - ko * nh;
          const money = ch * no - co * nh;
          const est = r.incrementalCost!.estimate;
          if (answers <= 0n) return est.kind === 'unbounded';
          const v = finite(est);
          return v * answers >= money && (v - 1n) * answers < money;
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe('compareIcer / seededUniform', () => {
  it('orders unbounded above every finite cost', () => {
    const xs: IcerValue[] = [{ kind: 'unbounded' }, { kind: 'finite', microusd: 5n }, { kind: 'finite', microusd: -3n }];
    expect([...xs].sort(compareIcer)).toEqual([{ kind: 'finite', microusd: -3n }, { kind: 'finite', microusd: 5n }, { kind: 'unbounded' }]);
  });

  it('draws reproducible, roughly uniform values in [0, 1)', () => {
    const a = seededUniform(42);
    const b = seededUniform(42);
    const draws = Array.from({ length: 50_000 }, () => a());
    expect(draws.slice(0, 5)).toEqual(Array.from({ length: 5 }, () => b()));
    expect(draws.every((x) => x >= 0 && x < 1)).toBe(true);
    const deciles = new Array(10).fill(0);
    for (const x of draws) deciles[Math.floor(x * 10)] += 1;
    for (const d of deciles) expect(Math.abs(d - 5_000)).toBeLessThan(300);
  });
});
