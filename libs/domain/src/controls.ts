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
