/**
 * Daily controls (issue 13): the "a client library changed the request" detector. A workload's
 * distribution of requested candidate counts on one UTC day is compared with its trailing baseline
 * (the 7 days before); an alert needs all three of: enough requests on both sides, a practically
 * large change (total-variation distance at or above a threshold), and a statistically clear one
 * (Pearson's chi-square test of homogeneity at a fixed significance level, critical values from
 * simple-statistics' table). Sparse categories are pooled before the test so no expected cell is
 * below 5, the usual condition for the chi-square approximation.
 */
import { chiSquaredDistributionTable } from 'simple-statistics';

/** How a request asked for candidates: `omitted`, `1` … `8`, or `9+`. */
export type CountCategory = string;

export const COUNT_CATEGORIES: readonly CountCategory[] = ['omitted', '1', '2', '3', '4', '5', '6', '7', '8', '9+'];

/** The category of a request's candidate count as the client sent it (null: the field was omitted). */
export function countCategory(requested: number | null): CountCategory {
  if (requested === null) return 'omitted';
  if (!Number.isInteger(requested) || requested < 1) throw new RangeError('requested count must be a positive integer or null');
  return requested >= 9 ? '9+' : String(requested);
}

/** Requests per category; categories absent count 0. */
export type CountDistribution = Readonly<Partial<Record<CountCategory, number>>>;

/** Significance levels simple-statistics tabulates that make sense for an alert. */
export type ShiftSignificance = 0.05 | 0.025 | 0.01 | 0.005;

export interface ShiftThresholds {
  /** requests needed on the day and in the baseline before anything is judged */
  minSample: number;
  /** total-variation distance (0..1) at or above which a change is large enough to matter */
  minDistance: number;
  significance: ShiftSignificance;
}

export const DEFAULT_SHIFT_THRESHOLDS: ShiftThresholds = { minSample: 200, minDistance: 0.1, significance: 0.01 };

export type ShiftResult =
  | { alert: false; reason: 'insufficient_sample'; dayTotal: number; baselineTotal: number }
  | {
      alert: boolean;
      reason: 'shift' | 'small_change' | 'not_significant';
      dayTotal: number;
      baselineTotal: number;
      /** total-variation distance between the day's and the baseline's shares */
      distance: number;
      chiSquare: number;
      degreesOfFreedom: number;
      criticalValue: number;
      /** categories whose share grew most, largest first (what the alert names) */
      grew: { category: CountCategory; dayShare: number; baselineShare: number }[];
    };

/** Compares one day's requested-count distribution with its baseline. */
export function detectCountShift(
  day: CountDistribution,
  baseline: CountDistribution,
  t: ShiftThresholds = DEFAULT_SHIFT_THRESHOLDS,
): ShiftResult {
  assertCounts(day, 'day');
  assertCounts(baseline, 'baseline');
  const dayTotal = total(day);
  const baselineTotal = total(baseline);
  if (dayTotal < t.minSample || baselineTotal < t.minSample)
    return { alert: false, reason: 'insufficient_sample', dayTotal, baselineTotal };
  const share = (d: CountDistribution, n: number, c: CountCategory) => (d[c] ?? 0) / n;
  const categories = COUNT_CATEGORIES.filter((c) => (day[c] ?? 0) + (baseline[c] ?? 0) > 0);
  const distance = categories.reduce((s, c) => s + Math.abs(share(day, dayTotal, c) - share(baseline, baselineTotal, c)), 0) / 2;
  const test = chiSquareHomogeneity(pooled(day, baseline, categories, dayTotal, baselineTotal));
  const grew = categories
    .map((category) => ({ category, dayShare: share(day, dayTotal, category), baselineShare: share(baseline, baselineTotal, category) }))
    .filter((g) => g.dayShare > g.baselineShare)
    .sort((a, b) => b.dayShare - b.baselineShare - (a.dayShare - a.baselineShare));
  const criticalValue = test.df > 0 ? criticalChiSquare(test.df, t.significance) : Number.POSITIVE_INFINITY;
  const significant = test.statistic > criticalValue;
  const large = distance >= t.minDistance;
  return {
    alert: significant && large,
    reason: !large ? 'small_change' : !significant ? 'not_significant' : 'shift',
    dayTotal,
    baselineTotal,
    distance,
    chiSquare: test.statistic,
    degreesOfFreedom: test.df,
    criticalValue,
    grew,
  };
}

/**
 * The day's and baseline's counts per category, sparse categories pooled: walking the categories
 * in order, a category joins the next until every pooled cell's expected count is at least 5 on
 * both rows (a last cell that is still short joins the one before it).
 */
function pooled(
  day: CountDistribution,
  baseline: CountDistribution,
  categories: readonly CountCategory[],
  nDay: number,
  nBase: number,
): [number, number][] {
  const n = nDay + nBase;
  const enough = ([a, b]: [number, number]) => ((a + b) * Math.min(nDay, nBase)) / n >= 5;
  const cells: [number, number][] = [];
  let open: [number, number] = [0, 0];
  for (const c of categories) {
    open = [open[0] + (day[c] ?? 0), open[1] + (baseline[c] ?? 0)];
    if (enough(open)) {
      cells.push(open);
      open = [0, 0];
    }
  }
  if (open[0] + open[1] > 0) {
    if (cells.length === 0) cells.push(open);
    else cells[cells.length - 1] = [cells[cells.length - 1][0] + open[0], cells[cells.length - 1][1] + open[1]];
  }
  return cells;
}

/** Pearson's chi-square statistic of a 2 × k table (columns: pooled categories) and its degrees of freedom. */
function chiSquareHomogeneity(cells: readonly [number, number][]): { statistic: number; df: number } {
  const rows = [cells.reduce((s, c) => s + c[0], 0), cells.reduce((s, c) => s + c[1], 0)];
  const n = rows[0] + rows[1];
  let statistic = 0;
  for (const cell of cells) {
    const column = cell[0] + cell[1];
    for (const r of [0, 1]) {
      const expected = (rows[r] * column) / n;
      statistic += (cell[r] - expected) ** 2 / expected;
    }
  }
  return { statistic, df: cells.length - 1 };
}

function criticalChiSquare(df: number, significance: ShiftSignificance): number {
  // df ≤ 9 here (ten categories at most), all tabulated
  if (!Number.isInteger(df) || df < 1 || df > 9)
    throw new RangeError(`no chi-square critical value tabulated for ${df} degrees of freedom`);
  return chiSquaredDistributionTable[df as keyof typeof chiSquaredDistributionTable][significance];
}

function total(d: CountDistribution): number {
  return Object.values(d).reduce((s: number, v) => s + (v ?? 0), 0);
}

function assertCounts(d: CountDistribution, name: string): void {
  for (const [k, v] of Object.entries(d)) {
    if (!COUNT_CATEGORIES.includes(k)) throw new RangeError(`${name}: unknown category ${k}`);
    if (!Number.isSafeInteger(v) || (v ?? 0) < 0) throw new RangeError(`${name}: ${k} must be a non-negative integer`);
  }
}

// ---------------------------------------------------------------- the daily job's rules

/** A workload's daily-control thresholds (policy API `PUT /workloads/{id}/controls`). */
export interface ControlThresholds {
  shift: ShiftThresholds;
  /**
   * output tokens per request (all attempts of an action, all candidates): the day's p95 above
   * this alerts. null = the workload's per-candidate output ceiling, i.e. more than one full
   * candidate's worth (multi-candidate, hedges, retries) on the p95 request.
   */
  outputP95MaxTokens: number | null;
  /** an active exception whose spend (pending + unresolved + settled) reaches this share of its budget alerts */
  exceptionBudgetShare: number;
  /** refusal rate jump: the day's rate minus the trailing baseline's, alerting at or above `minIncrease` */
  refusal: { minSample: number; minIncrease: number };
}

export const DEFAULT_CONTROL_THRESHOLDS: ControlThresholds = {
  shift: DEFAULT_SHIFT_THRESHOLDS,
  outputP95MaxTokens: null,
  exceptionBudgetShare: 0.8,
  refusal: { minSample: 50, minIncrease: 0.1 },
};

const SIGNIFICANCES: readonly ShiftSignificance[] = [0.05, 0.025, 0.01, 0.005];

/**
 * Problems of a thresholds document (empty = valid): field path and why. Every threshold only
 * decides when an alert is raised; none admits or funds anything, so lowering one is not a
 * spend raise and needs no second approver.
 */
export function controlThresholdProblems(t: ControlThresholds): { param: string; message: string }[] {
  const out: { param: string; message: string }[] = [];
  const int = (param: string, v: number, min: number, max: number) => {
    if (!Number.isSafeInteger(v) || v < min || v > max) out.push({ param, message: `must be an integer from ${min} to ${max}` });
  };
  const share = (param: string, v: number, minExclusive: number, max: number) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= minExclusive || v > max)
      out.push({ param, message: `must be a number above ${minExclusive} and at most ${max}` });
  };
  int('shift.min_sample', t.shift.minSample, 20, 10_000_000);
  share('shift.min_distance', t.shift.minDistance, 0, 1);
  if (!SIGNIFICANCES.includes(t.shift.significance))
    out.push({ param: 'shift.significance', message: `must be one of ${SIGNIFICANCES.join(', ')}` });
  if (t.outputP95MaxTokens !== null) int('output_p95_max_tokens', t.outputP95MaxTokens, 1, 10_000_000);
  share('exception_budget_share', t.exceptionBudgetShare, 0, 1);
  int('refusal.min_sample', t.refusal.minSample, 1, 10_000_000);
  share('refusal.min_increase', t.refusal.minIncrease, 0, 1);
  return out;
}

/** One workload × route's counts for a day (or a baseline, summed). */
export interface DayTally {
  requested: CountDistribution;
  /** admitted and refused decisions */
  admitted: number;
  refused: number;
  /** refusals by stable error code */
  refusals: Readonly<Record<string, number>>;
}

export const EMPTY_TALLY: DayTally = { requested: {}, admitted: 0, refused: 0, refusals: {} };

export function addTallies(a: DayTally, b: DayTally): DayTally {
  const merge = (x: Readonly<Record<string, number | undefined>>, y: Readonly<Record<string, number | undefined>>) => {
    const r: Record<string, number> = {};
    for (const [k, v] of [...Object.entries(x), ...Object.entries(y)]) r[k] = (r[k] ?? 0) + (v ?? 0);
    return r;
  };
  return {
    requested: merge(a.requested, b.requested),
    admitted: a.admitted + b.admitted,
    refused: a.refused + b.refused,
    refusals: merge(a.refusals, b.refusals),
  };
}

export interface OutputStats {
  requests: number;
  mean: number;
  p50: number;
  p95: number;
}

export interface ExceptionUsage {
  exceptionId: string;
  /** null: workload-wide */
  routeId: string | null;
  budgetMicrousd: bigint;
  spentMicrousd: bigint;
  expiresAt: Date;
}

export type ControlAlertKind = 'count_shift' | 'output_per_request' | 'exception_budget' | 'refusal_rate_jump';
export const CONTROL_ALERT_KINDS: readonly ControlAlertKind[] = [
  'count_shift',
  'output_per_request',
  'exception_budget',
  'refusal_rate_jump',
];

/** Route id of an alert about the whole workload (an exception without a route). */
export const ALL_ROUTES = '*';

export type ControlAlertFinding =
  | {
      kind: 'count_shift';
      routeId: string;
      dayTotal: number;
      baselineTotal: number;
      distance: number;
      grew: { category: CountCategory; dayShare: number; baselineShare: number }[];
    }
  | { kind: 'output_per_request'; routeId: string; requests: number; p95: number; thresholdTokens: number }
  | {
      kind: 'exception_budget';
      routeId: string;
      exceptions: { exceptionId: string; share: number; spentMicrousd: bigint; budgetMicrousd: bigint; daysToExpiry: number }[];
    }
  | {
      kind: 'refusal_rate_jump';
      routeId: string;
      dayTotal: number;
      dayRate: number;
      baselineRate: number;
      refusals: Record<string, number>;
    };

export interface WorkloadDayInput {
  thresholds: ControlThresholds;
  /** the workload's per-candidate output ceiling (the default output threshold) */
  perCandidateOutputCeiling: number;
  /** per route id */
  day: ReadonlyMap<string, DayTally>;
  baseline: ReadonlyMap<string, DayTally>;
  output: ReadonlyMap<string, OutputStats>;
  exceptions: readonly ExceptionUsage[];
}

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * The alerts of one workload for one UTC day (`dayEnd` = the next midnight): count shift per
 * route against the trailing baseline, output per request per route, exception budget per
 * exception scope, refusal-rate jump per route. Pure: the job loads, this decides.
 */
export function assessWorkloadDay(input: WorkloadDayInput, dayEnd: Date): ControlAlertFinding[] {
  const t = input.thresholds;
  const out: ControlAlertFinding[] = [];
  const routes = [...new Set([...input.day.keys(), ...input.output.keys()])].sort();
  for (const routeId of routes) {
    const day = input.day.get(routeId) ?? EMPTY_TALLY;
    const base = input.baseline.get(routeId) ?? EMPTY_TALLY;
    const shift = detectCountShift(day.requested, base.requested, t.shift);
    if (shift.alert && shift.reason === 'shift')
      out.push({
        kind: 'count_shift',
        routeId,
        dayTotal: shift.dayTotal,
        baselineTotal: shift.baselineTotal,
        distance: shift.distance,
        grew: shift.grew,
      });
    const stats = input.output.get(routeId);
    const limit = t.outputP95MaxTokens ?? input.perCandidateOutputCeiling;
    if (stats && stats.requests > 0 && stats.p95 > limit)
      out.push({ kind: 'output_per_request', routeId, requests: stats.requests, p95: stats.p95, thresholdTokens: limit });
    const dayTotal = day.admitted + day.refused;
    const baseTotal = base.admitted + base.refused;
    if (dayTotal >= t.refusal.minSample && baseTotal >= t.refusal.minSample) {
      const dayRate = day.refused / dayTotal;
      const baselineRate = base.refused / baseTotal;
      if (dayRate - baselineRate >= t.refusal.minIncrease)
        out.push({ kind: 'refusal_rate_jump', routeId, dayTotal, dayRate, baselineRate, refusals: { ...day.refusals } });
    }
  }
  const over = new Map<string, Extract<ControlAlertFinding, { kind: 'exception_budget' }>['exceptions']>();
  for (const e of input.exceptions) {
    if (e.budgetMicrousd <= 0n || e.expiresAt.getTime() <= dayEnd.getTime() - DAY_MS) continue;
    const share = Number((e.spentMicrousd * 1_000_000n) / e.budgetMicrousd) / 1_000_000;
    if (share < t.exceptionBudgetShare) continue;
    const key = e.routeId ?? ALL_ROUTES;
    const daysToExpiry = Math.max(0, Math.ceil((e.expiresAt.getTime() - dayEnd.getTime()) / DAY_MS));
    over.set(key, [
      ...(over.get(key) ?? []),
      { exceptionId: e.exceptionId, share, spentMicrousd: e.spentMicrousd, budgetMicrousd: e.budgetMicrousd, daysToExpiry },
    ]);
  }
  for (const [routeId, exceptions] of [...over].sort(([a], [b]) => a.localeCompare(b)))
    out.push({ kind: 'exception_budget', routeId, exceptions });
  return out;
}

/** A UTC day `YYYY-MM-DD` that exists in the calendar, or null. */
export function parseUtcDay(day: string): Date | null {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return null;
  const d = new Date(`${day}T00:00:00.000Z`);
  return Number.isNaN(d.getTime()) || d.toISOString().slice(0, 10) !== day ? null : d;
}

export function utcDayOf(at: Date): string {
  return at.toISOString().slice(0, 10);
}

export function addUtcDays(day: string, days: number): string {
  const d = parseUtcDay(day);
  if (!d) throw new RangeError(`not a UTC day: ${day}`);
  return utcDayOf(new Date(d.getTime() + days * DAY_MS));
}
