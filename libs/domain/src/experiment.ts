/**
 * The hedging experiment's rules (issue 11): which cohort an action belongs to, and whether the
 * hedged cohort buys additional on-time answers at a price the owner approved.
 *
 * - **Assignment** is a pure function of (experiment id, action id): reproducible, needs no shared
 *   state, and concurrent instances agree on it.
 * - **Statistics** compare concurrently randomised cohorts, never hedge "wins": a hedge that won may
 *   only have beaten a primary that would also have been on time. Per cohort: eligible actions n,
 *   on-time valid answers k (at most one per action), settled cost C (micro-USD). Between cohorts:
 *   the difference in on-time rate, and the incremental cost per additional on-time answer
 *
 *       ICER = (C_h/n_h − C_0/n_0) / (k_h/n_h − k_0/n_0) = (C_h·n_0 − C_0·n_h) / (k_h·n_0 − k_0·n_h)
 *
 *   which is a ratio of integers, so the point estimate and every bootstrap replicate are computed
 *   exactly in bigint and only rounded once (up: the owner is never told a hedge is cheaper than it
 *   is). Intervals: percentile bootstrap over actions, resampled within each cohort, seeded.
 * - **Verdict**: `pending` until the sample plan is met and the unresolved exposure is within the
 *   stated share (losers' costs reconciled); `established` only when the improvement's interval is
 *   above zero and the incremental cost's interval is within the approved premium; otherwise
 *   `not_established`, with the reason.
 *
 * Unresolved exposure is reported apart and never blended into cost.
 */
import { createHash } from 'node:crypto';

export type Cohort = 'hedged' | 'holdout';

/** Basis points (1/10,000): shares are integers so assignment never depends on float rounding. */
export const BPS = 10_000;

/**
 * The cohort of an action: a SHA-256 of `experimentId`, a separator and `actionId`, its first 32
 * bits scaled to [0, 10,000); below `holdoutShareBps` is the primary-only holdout.
 */
export function assignCohort(experimentId: string, actionId: string, holdoutShareBps: number): Cohort {
  if (!Number.isInteger(holdoutShareBps) || holdoutShareBps < 0 || holdoutShareBps > BPS) {
    throw new RangeError(`holdoutShareBps must be an integer in 0..${BPS}`);
  }
  const digest = createHash('sha256').update(experimentId, 'utf8').update('\u0000').update(actionId, 'utf8').digest();
  const bucket = Math.floor((digest.readUInt32BE(0) * BPS) / 2 ** 32);
  return bucket < holdoutShareBps ? 'holdout' : 'hedged';
}

/** One eligible action of an experiment, as the report reads it (ineligible actions are excluded before). */
export interface ExperimentAction {
  cohort: Cohort;
  /** a valid answer reached the client within the experiment's useful deadline */
  onTimeValid: boolean;
  /** settled cost of all the action's attempts, micro-USD */
  settledMicrousd: bigint;
  /** exposure of its attempts still without evidence, micro-USD (reported apart, never added to cost) */
  unresolvedMicrousd: bigint;
}

export interface CohortSummary {
  actions: number;
  onTimeValid: number;
  /** k / n as a proportion (not money); null without actions */
  onTimeRate: number | null;
  settledMicrousd: bigint;
  unresolvedMicrousd: bigint;
  /** settled / actions, rounded up; null without actions */
  costPerActionMicrousd: bigint | null;
  /** settled / on-time answers, rounded up; null without on-time answers */
  costPerOnTimeMicrousd: bigint | null;
}

/** A 95 % percentile interval. */
export interface Interval<T> {
  low: T;
  high: T;
}

/**
 * The incremental cost per additional on-time answer, micro-USD rounded up, or `unbounded` when
 * the hedged cohort has no more on-time answers per action than the holdout, whatever it costs:
 * no price buys an answer that does not come. Negative when the hedged cohort answers more on time
 * for less money per action.
 */
export type IcerValue = { kind: 'finite'; microusd: bigint } | { kind: 'unbounded' };

export interface SamplePlan {
  /** eligible actions each cohort needs before a verdict other than pending */
  minActionsPerCohort: number;
  /** the most the owner pays per additional on-time answer (the policy's approved premium), micro-USD */
  approvedPremiumMicrousd: bigint;
  /**
   * the most unresolved exposure tolerated, in basis points of settled + unresolved over both
   * cohorts, before the verdict stays pending (0: every loser's cost reconciled first)
   */
  maxUnresolvedShareBps: number;
}

export interface BootstrapOptions {
  seed: number;
  /** at least 2,000 */
  resamples: number;
}

export const MIN_BOOTSTRAP_RESAMPLES = 2_000;

export type Verdict =
  | { verdict: 'established' }
  | { verdict: 'not_established'; reason: 'no_improvement' | 'improvement_uncertain' | 'cost_above_premium' | 'cost_uncertain' }
  | { verdict: 'pending'; reason: 'sample_plan_not_met' | 'exposure_unresolved' };

export interface ExperimentComparison {
  hedged: CohortSummary;
  holdout: CohortSummary;
  /** on-time rate, hedged − holdout (a proportion); null when a cohort is empty */
  rateDifference: { estimate: number; interval: Interval<number> } | null;
  /** null when a cohort is empty */
  incrementalCost: { estimate: IcerValue; interval: Interval<IcerValue> } | null;
  unresolvedShareBps: number;
  resamples: number;
  seed: number;
  result: Verdict;
}

/** Per-cohort figures (exact sums, costs rounded up). */
export function summariseCohort(actions: readonly ExperimentAction[]): CohortSummary {
  let k = 0;
  let settled = 0n;
  let unresolved = 0n;
  for (const a of actions) {
    assertMicrousd(a.settledMicrousd, 'settledMicrousd');
    assertMicrousd(a.unresolvedMicrousd, 'unresolvedMicrousd');
    if (a.onTimeValid) k += 1;
    settled += a.settledMicrousd;
    unresolved += a.unresolvedMicrousd;
  }
  const n = actions.length;
  return {
    actions: n,
    onTimeValid: k,
    onTimeRate: n === 0 ? null : k / n,
    settledMicrousd: settled,
    unresolvedMicrousd: unresolved,
    costPerActionMicrousd: n === 0 ? null : ceilDiv(settled, BigInt(n)),
    costPerOnTimeMicrousd: k === 0 ? null : ceilDiv(settled, BigInt(k)),
  };
}

/** The cohort comparison, its intervals and the verdict. Deterministic for a given seed. */
export function compareCohorts(actions: readonly ExperimentAction[], plan: SamplePlan, opts: BootstrapOptions): ExperimentComparison {
  if (!Number.isInteger(opts.resamples) || opts.resamples < MIN_BOOTSTRAP_RESAMPLES) {
    throw new RangeError(`resamples must be an integer ≥ ${MIN_BOOTSTRAP_RESAMPLES}`);
  }
  assertMicrousd(plan.approvedPremiumMicrousd, 'approvedPremiumMicrousd');
  const hedgedActions = actions.filter((a) => a.cohort === 'hedged');
  const holdoutActions = actions.filter((a) => a.cohort === 'holdout');
  const hedged = summariseCohort(hedgedActions);
  const holdout = summariseCohort(holdoutActions);
  const exposure = hedged.settledMicrousd + holdout.settledMicrousd + hedged.unresolvedMicrousd + holdout.unresolvedMicrousd;
  const unresolved = hedged.unresolvedMicrousd + holdout.unresolvedMicrousd;
  const unresolvedShareBps = exposure === 0n ? 0 : Number(ceilDiv(unresolved * BigInt(BPS), exposure));
  const base = { hedged, holdout, unresolvedShareBps, resamples: opts.resamples, seed: opts.seed };
  if (hedged.actions === 0 || holdout.actions === 0) {
    return { ...base, rateDifference: null, incrementalCost: null, result: { verdict: 'pending', reason: 'sample_plan_not_met' } };
  }
  const point = contrast(tally(hedgedActions), tally(holdoutActions));
  const boot = bootstrap(hedgedActions, holdoutActions, opts);
  const rateDifference = { estimate: point.rateDifference, interval: boot.rate };
  const incrementalCost = { estimate: point.icer, interval: boot.icer };
  return { ...base, rateDifference, incrementalCost, result: verdictOf(plan, base, rateDifference.interval, incrementalCost.interval) };
}

/** The verdict from a comparison's figures and a sample plan (the report may apply another plan to the same figures). */
export function verdictOf(
  plan: SamplePlan,
  s: { hedged: CohortSummary; holdout: CohortSummary; unresolvedShareBps: number },
  rate: Interval<number>,
  icer: Interval<IcerValue>,
): Verdict {
  if (s.hedged.actions < plan.minActionsPerCohort || s.holdout.actions < plan.minActionsPerCohort) {
    return { verdict: 'pending', reason: 'sample_plan_not_met' };
  }
  if (s.unresolvedShareBps > plan.maxUnresolvedShareBps) return { verdict: 'pending', reason: 'exposure_unresolved' };
  if (rate.high <= 0) return { verdict: 'not_established', reason: 'no_improvement' };
  if (rate.low <= 0) return { verdict: 'not_established', reason: 'improvement_uncertain' };
  if (icer.low.kind === 'unbounded' || icer.low.microusd > plan.approvedPremiumMicrousd) {
    return { verdict: 'not_established', reason: 'cost_above_premium' };
  }
  if (icer.high.kind === 'unbounded' || icer.high.microusd > plan.approvedPremiumMicrousd) {
    return { verdict: 'not_established', reason: 'cost_uncertain' };
  }
  return { verdict: 'established' };
}

interface Tally {
  n: bigint;
  k: bigint;
  cost: bigint;
}

function tally(actions: readonly ExperimentAction[]): Tally {
  let k = 0n;
  let cost = 0n;
  for (const a of actions) {
    if (a.onTimeValid) k += 1n;
    cost += a.settledMicrousd;
  }
  return { n: BigInt(actions.length), k, cost };
}

/** Rate difference and ICER of two tallies, exactly (the ICER's only rounding is the final ceiling). */
function contrast(h: Tally, o: Tally): { rateDifference: number; icer: IcerValue } {
  const answers = h.k * o.n - o.k * h.n; // n_h·n_0 × (rate difference)
  const money = h.cost * o.n - o.cost * h.n; // n_h·n_0 × (cost-per-action difference)
  const rateDifference = Number(answers) / Number(h.n * o.n);
  // No additional on-time answers per action: no price buys an answer that does not come.
  if (answers <= 0n) return { rateDifference, icer: { kind: 'unbounded' } };
  // Rounded towards +∞ either way: a cheaper-and-better hedged cohort gives a negative cost.
  return { rateDifference, icer: { kind: 'finite', microusd: money < 0n ? -(-money / answers) : ceilDiv(money, answers) } };
}

/** Percentile bootstrap, resampling actions with replacement within each cohort. */
function bootstrap(
  hedged: readonly ExperimentAction[],
  holdout: readonly ExperimentAction[],
  opts: BootstrapOptions,
): { rate: Interval<number>; icer: Interval<IcerValue> } {
  const rng = seededUniform(opts.seed);
  const h = columns(hedged);
  const o = columns(holdout);
  const rates: number[] = [];
  const icers: IcerValue[] = [];
  for (let b = 0; b < opts.resamples; b++) {
    const c = contrast(resampleTally(h, rng), resampleTally(o, rng));
    rates.push(c.rateDifference);
    icers.push(c.icer);
  }
  rates.sort((x, y) => x - y);
  icers.sort(compareIcer);
  const lo = Math.floor(0.025 * opts.resamples);
  const hi = Math.ceil(0.975 * opts.resamples) - 1;
  return { rate: { low: rates[lo], high: rates[hi] }, icer: { low: icers[lo], high: icers[hi] } };
}

/**
 * A cohort as plain arrays for resampling. Costs are summed as doubles, which is exact while every
 * partial sum is an integer below 2^53: guaranteed when the cohort's largest cost × its size is
 * (a resample sums `n` draws of at most that cost); beyond that the sums stay in bigint.
 */
function columns(actions: readonly ExperimentAction[]): { onTime: Uint8Array; cost: number[] | null; costBig: bigint[] } {
  const costBig = actions.map((a) => a.settledMicrousd);
  const max = costBig.reduce((m, c) => (c > m ? c : m), 0n);
  const exact = max * BigInt(actions.length) <= BigInt(Number.MAX_SAFE_INTEGER);
  return { onTime: Uint8Array.from(actions, (a) => (a.onTimeValid ? 1 : 0)), cost: exact ? costBig.map(Number) : null, costBig };
}

function resampleTally(c: ReturnType<typeof columns>, rng: () => number): Tally {
  const n = c.onTime.length;
  let k = 0;
  if (c.cost) {
    let cost = 0;
    for (let i = 0; i < n; i++) {
      const j = Math.floor(rng() * n);
      k += c.onTime[j];
      cost += c.cost[j];
    }
    return { n: BigInt(n), k: BigInt(k), cost: BigInt(cost) };
  }
  let cost = 0n;
  for (let i = 0; i < n; i++) {
    const j = Math.floor(rng() * n);
    k += c.onTime[j];
    cost += c.costBig[j];
  }
  return { n: BigInt(n), k: BigInt(k), cost };
}

/** Orders ICER values: finite by amount, unbounded above every finite value. */
export function compareIcer(a: IcerValue, b: IcerValue): number {
  if (a.kind === 'unbounded') return b.kind === 'unbounded' ? 0 : 1;
  if (b.kind === 'unbounded') return -1;
  return a.microusd < b.microusd ? -1 : a.microusd > b.microusd ? 1 : 0;
}

/**
 * A seeded uniform generator in [0, 1) for resampling (sfc32 seeded through splitmix32). The
 * provider simulator keeps a generator of its own on purpose: it stands for the outside world,
 * and the gateway's statistics must not share code with the ground truth they are tested against.
 */
export function seededUniform(seed: number): () => number {
  let s = seed >>> 0;
  const splitmix = () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  let a = splitmix();
  let b = splitmix();
  let c = splitmix();
  let d = splitmix();
  return () => {
    const t = (((a + b) >>> 0) + d) >>> 0;
    d = (d + 1) >>> 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0;
    c = ((c << 21) | (c >>> 11)) >>> 0;
    c = (c + t) >>> 0;
    return t / 4294967296;
  };
}

function ceilDiv(a: bigint, b: bigint): bigint {
  if (b <= 0n) throw new RangeError('divisor must be positive');
  if (a < 0n) throw new RangeError('dividend must not be negative');
  return (a + b - 1n) / b;
}

function assertMicrousd(v: bigint, name: string): void {
  if (typeof v !== 'bigint' || v < 0n) throw new RangeError(`${name} must be a non-negative bigint`);
}

/** What counts as a valid answer for the experiment (the shared acceptance policy's knobs). */
export interface ExperimentAcceptance {
  /** at least one candidate with non-empty content */
  nonEmptyContent: boolean;
  /** finish reasons that count as a complete answer, as the provider spells them (e.g. `stop`, `STOP`) */
  allowedFinishReasons: readonly string[];
  /** a refusal (the model declining, or a prompt blocked) is an invalid answer */
  refusalsInvalid: boolean;
}

/**
 * When hedging pauses for the experiment: the holdout's primary latency (p95 over the last
 * `windowActions` holdout actions) above a bound means the hedges interfere with the route; the
 * route's error rate (per mille over the same window) above a bound means it lacks capacity.
 */
export interface PauseRules {
  holdoutP95AboveMs: number;
  routeErrorPerMilleAbove: number;
  windowActions: number;
}

/** An experiment as an operator designs it; the decision threshold is copied from the policy revision. */
export interface ExperimentDesign {
  owner: string;
  /** the hedge policy revision the hedged cohort runs under (of this workload) */
  hedgePolicyRevisionId: string;
  holdoutShareBps: number;
  /** an answer after this many ms from admission is late, whatever its content */
  usefulDeadlineMs: number;
  acceptance: ExperimentAcceptance;
  samplePlan: Pick<SamplePlan, 'minActionsPerCohort' | 'maxUnresolvedShareBps'>;
  /** gateway/coordination cost per attempt added to each cohort's cost, micro-USD */
  overheadMicrousdPerAttempt: bigint;
  pause: PauseRules;
  /** the bootstrap's seed, fixed in advance with the plan */
  seed: number;
}

export const EXPERIMENT_LIMITS = {
  /** a holdout below 1 % or above half cannot be compared in reasonable time / starves the treatment */
  minHoldoutShareBps: 100,
  maxHoldoutShareBps: 5_000,
  maxUsefulDeadlineMs: 600_000,
  minActionsPerCohort: 100,
  maxActionsPerCohort: 10_000_000,
  maxFinishReasons: 16,
  maxFinishReasonLength: 64,
  maxOverheadMicrousdPerAttempt: 1_000_000n,
  minWindowActions: 20,
  maxWindowActions: 100_000,
} as const;

export type ExperimentDesignProblem = { path: string; message: string };

/** The one check of an experiment design's ranges (the wire codec only checks types). */
export function experimentDesignProblems(d: ExperimentDesign): ExperimentDesignProblem[] {
  const L = EXPERIMENT_LIMITS;
  const problems: ExperimentDesignProblem[] = [];
  const intIn = (path: string, v: number, min: number, max: number) => {
    if (!Number.isInteger(v) || v < min || v > max) problems.push({ path, message: `must be an integer in ${min}..${max}` });
  };
  intIn('holdoutShareBps', d.holdoutShareBps, L.minHoldoutShareBps, L.maxHoldoutShareBps);
  intIn('usefulDeadlineMs', d.usefulDeadlineMs, 1, L.maxUsefulDeadlineMs);
  intIn('samplePlan.minActionsPerCohort', d.samplePlan.minActionsPerCohort, L.minActionsPerCohort, L.maxActionsPerCohort);
  intIn('samplePlan.maxUnresolvedShareBps', d.samplePlan.maxUnresolvedShareBps, 0, BPS);
  intIn('pause.holdoutP95AboveMs', d.pause.holdoutP95AboveMs, 1, L.maxUsefulDeadlineMs);
  intIn('pause.routeErrorPerMilleAbove', d.pause.routeErrorPerMilleAbove, 0, 1_000);
  intIn('pause.windowActions', d.pause.windowActions, L.minWindowActions, L.maxWindowActions);
  intIn('seed', d.seed, 0, 2 ** 32 - 1);
  if (d.overheadMicrousdPerAttempt < 0n || d.overheadMicrousdPerAttempt > L.maxOverheadMicrousdPerAttempt) {
    problems.push({ path: 'overheadMicrousdPerAttempt', message: `must be 0..${L.maxOverheadMicrousdPerAttempt} micro-USD` });
  }
  const reasons = d.acceptance.allowedFinishReasons;
  if (reasons.length === 0 || reasons.length > L.maxFinishReasons) {
    problems.push({ path: 'acceptance.allowedFinishReasons', message: `must list 1..${L.maxFinishReasons} finish reasons` });
  }
  reasons.forEach((r, i) => {
    if (!/^[A-Za-z0-9_.-]+$/.test(r) || r.length > L.maxFinishReasonLength) {
      problems.push({
        path: `acceptance.allowedFinishReasons[${i}]`,
        message: `must be 1..${L.maxFinishReasonLength} of A-Z a-z 0-9 _ . -`,
      });
    } else if (reasons.indexOf(r) !== i) problems.push({ path: `acceptance.allowedFinishReasons[${i}]`, message: `${r} is listed twice` });
  });
  return problems;
}

/** A running or stopped experiment: its design, fixed when it started, and who decided what. */
export interface Experiment extends ExperimentDesign {
  id: string;
  workloadId: string;
  status: 'running' | 'stopped';
  /** the decision threshold, copied from the policy revision when the experiment started */
  approvedPremiumMicrousd: bigint;
  requestedBy: string;
  approvedBy: string;
  reason: string;
  startedAt: Date;
  stoppedAt: Date | null;
  stoppedBy: string | null;
  stopReason: string | null;
}

/** An approved design as it starts: running, with the policy revision's premium as its decision threshold. */
export function startedExperiment(
  design: ExperimentDesign & Pick<Experiment, 'id' | 'workloadId' | 'requestedBy' | 'approvedBy' | 'reason'>,
  approvedPremiumMicrousd: bigint,
  now: Date,
): Experiment {
  return { ...design, status: 'running', approvedPremiumMicrousd, startedAt: now, stoppedAt: null, stoppedBy: null, stopReason: null };
}
