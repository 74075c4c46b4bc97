/**
 * The hedging experiment's pause rule (issue 11): whether the hedged cohort must run primary-only
 * because the route is degraded, judged on the holdout alone (hedges cannot inflate it).
 *
 * - **Window:** the last `windowActions` holdout actions, each its primary's latency (ms) and
 *   whether the route answered with an error.
 * - **Minimum sample:** no rule is judged on fewer than max(20, ⌈windowActions / 2⌉) actions
 *   (capped at the window): the nearest-rank p95 of fewer than 20 samples is the sample's maximum,
 *   so one slow outlier would pause the experiment.
 * - **Hysteresis:** a pause starts when a measured value is strictly above its threshold and ends
 *   only when every value is at or below 90 % of its threshold (rounded down): the window slides one
 *   action at a time, and without a gap the state would flap on every action near the threshold.
 *   With too few samples the state does not change (no evidence either way).
 */
import type { PauseRules } from './experiment';
import { quantileMs } from './hedging';

export interface PauseSample {
  primaryLatencyMs: number;
  routeError: boolean;
}

export type PauseRule = 'holdout_p95_above_ms' | 'route_error_per_mille_above';

export interface PauseMeasure {
  /** null: fewer samples than the minimum */
  holdoutP95Ms: number | null;
  routeErrorPerMille: number | null;
  samples: number;
}

export type PauseState = { paused: false } | { paused: true; rule: PauseRule; measured: number };

export type PauseTransition =
  | { kind: 'none'; state: PauseState; measure: PauseMeasure }
  | { kind: 'start'; rule: PauseRule; measured: number; measure: PauseMeasure }
  | { kind: 'end'; rule: PauseRule; measured: number; measure: PauseMeasure };

export const PAUSE_MIN_SAMPLES_FLOOR = 20;
/** resume at or below this share of a threshold, per mille */
export const PAUSE_RESUME_PER_MILLE = 900;

export function pauseMinSamples(windowActions: number): number {
  return Math.min(windowActions, Math.max(PAUSE_MIN_SAMPLES_FLOOR, Math.ceil(windowActions / 2)));
}

/** The window's figures: `samples` is trimmed to its last `windowActions` entries (oldest first). */
export function measurePauseWindow(samples: readonly PauseSample[], windowActions: number): PauseMeasure {
  if (!Number.isInteger(windowActions) || windowActions < 1) throw new RangeError('windowActions must be a positive integer');
  const window = samples.slice(Math.max(0, samples.length - windowActions));
  if (window.length < pauseMinSamples(windowActions)) return { holdoutP95Ms: null, routeErrorPerMille: null, samples: window.length };
  const errors = window.filter((s) => s.routeError).length;
  return {
    holdoutP95Ms: quantileMs(
      window.map((s) => s.primaryLatencyMs),
      950,
    ),
    // rounded down: the rule asks "above", so a rate is only above when it truly is
    routeErrorPerMille: Math.floor((errors * 1000) / window.length),
    samples: window.length,
  };
}

/** The next pause state after measuring the window, and whether a pause starts or ends. */
export function pauseTransition(current: PauseState, samples: readonly PauseSample[], rules: PauseRules): PauseTransition {
  const measure = measurePauseWindow(samples, rules.windowActions);
  if (measure.holdoutP95Ms === null || measure.routeErrorPerMille === null) return { kind: 'none', state: current, measure };
  const figures: { rule: PauseRule; value: number; threshold: number }[] = [
    { rule: 'holdout_p95_above_ms', value: measure.holdoutP95Ms, threshold: rules.holdoutP95AboveMs },
    { rule: 'route_error_per_mille_above', value: measure.routeErrorPerMille, threshold: rules.routeErrorPerMilleAbove },
  ];
  if (!current.paused) {
    const exceeded = figures.find((f) => f.value > f.threshold);
    return exceeded ? { kind: 'start', rule: exceeded.rule, measured: exceeded.value, measure } : { kind: 'none', state: current, measure };
  }
  const recovered = figures.every((f) => f.value <= Math.floor((f.threshold * PAUSE_RESUME_PER_MILLE) / 1000));
  if (!recovered) return { kind: 'none', state: current, measure };
  const own = figures.find((f) => f.rule === current.rule)!;
  return { kind: 'end', rule: current.rule, measured: own.value, measure };
}

/**
 * 429 and 5xx are the route failing; other 4xx are the request's fault, not the route's health.
 * One rule for dispatch's in-memory route facts and for the pause window's recorded attempts.
 */
export function isProviderFailureStatus(httpStatus: number): boolean {
  return httpStatus === 429 || httpStatus >= 500;
}

/** A recorded, ended primary attempt of a holdout action as the pause window reads it. */
export interface RecordedPrimary {
  startedAt: Date;
  endedAt: Date;
  /** the attempt's status: `cancelled` is the gateway's own doing, never the route's */
  status: string;
  /** null: no answer at all (timeout or connection failure) */
  httpStatus: number | null;
}

/**
 * The pause window's sample of one recorded primary: its latency from claim to end, and a route
 * error when the provider failed it (429 / 5xx) or never answered (timeout, connection error).
 */
export function pauseSampleOf(p: RecordedPrimary): PauseSample {
  const routeError = p.httpStatus === null ? p.status !== 'cancelled' : isProviderFailureStatus(p.httpStatus);
  return { primaryLatencyMs: Math.max(0, p.endedAt.getTime() - p.startedAt.getTime()), routeError };
}

/** A stored pause of an experiment's hedging, with the figures that opened (and closed) it. */
export interface ExperimentPause {
  id: string;
  experimentId: string;
  /** the rule that tripped */
  rule: PauseRule;
  startedAt: Date;
  /** null while the pause is open */
  endedAt: Date | null;
  /** the window's figures when the pause started */
  atStart: { holdoutP95Ms: number; routeErrorPerMille: number; samples: number };
  /** ... and when it ended (null while open) */
  atEnd: { holdoutP95Ms: number; routeErrorPerMille: number; samples: number } | null;
  /** the experiment's rules the pause was judged by */
  thresholds: { holdoutP95AboveMs: number; routeErrorPerMilleAbove: number };
  windowActions: number;
}

/** What one evaluation of the window decides for the stored pauses. */
export type PauseDecision =
  { kind: 'none'; measure: PauseMeasure } | { kind: 'open'; pause: ExperimentPause } | { kind: 'close'; pause: ExperimentPause };

/**
 * Applies `pauseTransition` to the experiment's stored state: `open` is its open pause (at most
 * one), `samples` the window oldest first. Opening needs the new pause's id; closing returns the
 * open pause with its end.
 */
export function decidePause(input: {
  experimentId: string;
  open: ExperimentPause | null;
  samples: readonly PauseSample[];
  rules: PauseRules;
  now: Date;
  newId: () => string;
}): PauseDecision {
  const { experimentId, open, samples, rules, now, newId } = input;
  const state: PauseState = open
    ? {
        paused: true,
        rule: open.rule,
        measured: open.rule === 'holdout_p95_above_ms' ? open.atStart.holdoutP95Ms : open.atStart.routeErrorPerMille,
      }
    : { paused: false };
  const t = pauseTransition(state, samples, rules);
  if (t.kind === 'none') return { kind: 'none', measure: t.measure };
  // a transition is only ever judged on a full enough window, so both figures are numbers
  const figures = { holdoutP95Ms: t.measure.holdoutP95Ms!, routeErrorPerMille: t.measure.routeErrorPerMille!, samples: t.measure.samples };
  if (t.kind === 'end') return { kind: 'close', pause: { ...open!, endedAt: now, atEnd: figures } };
  return {
    kind: 'open',
    pause: {
      id: newId(),
      experimentId,
      rule: t.rule,
      startedAt: now,
      endedAt: null,
      atStart: figures,
      atEnd: null,
      thresholds: { holdoutP95AboveMs: rules.holdoutP95AboveMs, routeErrorPerMilleAbove: rules.routeErrorPerMilleAbove },
      windowActions: rules.windowActions,
    },
  };
}
