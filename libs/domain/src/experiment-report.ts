/**
 * The hedging experiment's report (issue 11): from one row per action of the experiment (as the
 * database or a finance consumer of `gateway.usage.settled.v1` rebuilds it) to the per-cohort
 * figures, the comparison, the verdict, and the report's wire shapes (JSON with money as decimal
 * strings, CSV). Pure: the statistics are `compareCohorts`; this file only decides what each row
 * counts for.
 */
import {
  compareCohorts,
  ExperimentAcceptance,
  ExperimentAction,
  ExperimentComparison,
  Experiment,
  IcerValue,
  CohortSummary,
} from './experiment';
import type { ExperimentPause } from './experiment-pause';

/** Resamples the report's bootstrap draws (the issue asks for at least 2,000). */
export const REPORT_RESAMPLES = 2_000;

/** One action of the experiment with its attempts' money and timing. */
export interface ExperimentReportRow {
  actionId: string;
  cohort: 'hedged' | 'holdout' | 'ineligible';
  admittedAt: Date;
  /** when the answer the client got (the winner) ended; null without one */
  answeredAt: Date | null;
  /** the action's acceptance verdict under the workload's policy: only `valid` answers count */
  acceptanceVerdict: string | null;
  /**
   * the winner's candidates (finish reason as the provider spelled it, outcome ok | filtered |
   * truncated | empty | missing | blocked), to which the experiment's own acceptance applies;
   * null when the attempt recorded none (then the workload's verdict alone decides)
   */
  winnerCandidates?: ReadonlyArray<{ finishReason: string | null; outcome: string }> | null;
  /** attempts sent upstream for the action (each pays the experiment's per-attempt overhead) */
  attempts: number;
  /** sum of the ledger rows of the action's attempts, micro-USD */
  settledMicrousd: bigint;
  /** holds of the attempts whose money is not decided yet (pending or unresolved), micro-USD */
  unresolvedMicrousd: bigint;
  /**
   * dispatched while a pause was open (the hedged cohort then ran primary-only). The action still
   * counts in its assigned cohort (intention to treat); the report says how many did.
   */
  ranPaused?: boolean;
}

export interface ExperimentReport {
  experiment: Pick<Experiment, 'id' | 'workloadId' | 'status' | 'usefulDeadlineMs' | 'holdoutShareBps' | 'approvedPremiumMicrousd'> & {
    overheadMicrousdPerAttempt: bigint;
  };
  ineligibleActions: number;
  comparison: ExperimentComparison;
  /** the stored pauses, oldest first */
  pauses: ExperimentPause[];
  /** eligible actions dispatched while a pause was open, per assigned cohort (counted in it too) */
  pausedActions: { hedged: number; holdout: number };
}

/**
 * An action counts one on-time valid answer at most: a valid answer whose winner ended within
 * the useful deadline from admission. Its cost is its attempts' settled cost plus the overhead per
 * attempt; exposure still undecided stays apart.
 */
export function experimentActionOf(
  row: ExperimentReportRow,
  e: { usefulDeadlineMs: number; overheadMicrousdPerAttempt: bigint; acceptance: ExperimentAcceptance },
): ExperimentAction {
  if (row.cohort === 'ineligible') throw new RangeError('ineligible actions are excluded from both cohorts');
  const onTime = row.answeredAt !== null && row.answeredAt.getTime() - row.admittedAt.getTime() <= e.usefulDeadlineMs;
  const candidates = row.winnerCandidates ?? null;
  const valid = row.acceptanceVerdict === 'valid' && (candidates === null || candidates.some((c) => acceptedBy(e.acceptance, c)));
  return {
    cohort: row.cohort,
    onTimeValid: onTime && valid,
    settledMicrousd: row.settledMicrousd + e.overheadMicrousdPerAttempt * BigInt(row.attempts),
    unresolvedMicrousd: row.unresolvedMicrousd,
  };
}

/**
 * One candidate under the experiment's acceptance: present, its finish reason listed, non-empty
 * when the experiment asks for content, and not a refusal (filtered or prompt blocked) when
 * refusals are invalid.
 */
function acceptedBy(a: ExperimentAcceptance, c: { finishReason: string | null; outcome: string }): boolean {
  if (c.outcome === 'missing') return false;
  if (a.refusalsInvalid && (c.outcome === 'filtered' || c.outcome === 'blocked')) return false;
  if (a.nonEmptyContent && c.outcome === 'empty') return false;
  return c.finishReason !== null && a.allowedFinishReasons.includes(c.finishReason);
}

/** The report of `experiment` over its rows (seeded with the experiment's own seed). */
export function experimentReport(
  experiment: Experiment,
  rows: readonly ExperimentReportRow[],
  pauses: ExperimentPause[] = [],
): ExperimentReport {
  const eligibleRows = rows.filter((r) => r.cohort !== 'ineligible');
  const eligible = eligibleRows.map((r) => experimentActionOf(r, experiment));
  const pausedIn = (cohort: 'hedged' | 'holdout') => eligibleRows.filter((r) => r.cohort === cohort && r.ranPaused === true).length;
  const comparison = compareCohorts(
    eligible,
    {
      minActionsPerCohort: experiment.samplePlan.minActionsPerCohort,
      maxUnresolvedShareBps: experiment.samplePlan.maxUnresolvedShareBps,
      approvedPremiumMicrousd: experiment.approvedPremiumMicrousd,
    },
    { seed: experiment.seed, resamples: REPORT_RESAMPLES },
  );
  return {
    experiment: {
      id: experiment.id,
      workloadId: experiment.workloadId,
      status: experiment.status,
      usefulDeadlineMs: experiment.usefulDeadlineMs,
      holdoutShareBps: experiment.holdoutShareBps,
      approvedPremiumMicrousd: experiment.approvedPremiumMicrousd,
      overheadMicrousdPerAttempt: experiment.overheadMicrousdPerAttempt,
    },
    ineligibleActions: rows.length - eligible.length,
    comparison,
    pauses,
    pausedActions: { hedged: pausedIn('hedged'), holdout: pausedIn('holdout') },
  };
}

const money = (v: bigint | null): string | null => (v === null ? null : v.toString());
const icer = (v: IcerValue): string => (v.kind === 'unbounded' ? 'unbounded' : v.microusd.toString());

function cohortToWire(c: CohortSummary) {
  return {
    eligible_actions: c.actions,
    on_time_valid_answers: c.onTimeValid,
    on_time_rate: c.onTimeRate,
    settled_microusd: c.settledMicrousd.toString(),
    unresolved_exposure_microusd: c.unresolvedMicrousd.toString(),
    cost_per_action_microusd: money(c.costPerActionMicrousd),
    cost_per_on_time_answer_microusd: money(c.costPerOnTimeMicrousd),
  };
}

const figuresToWire = (f: ExperimentPause['atStart']) => ({
  holdout_p95_ms: f.holdoutP95Ms,
  route_error_per_mille: f.routeErrorPerMille,
  samples: f.samples,
});

/** A stored pause as the report and the experiment record show it (`experimentPauseFromWire` reads it back). */
export function experimentPauseToWire(p: ExperimentPause) {
  return {
    id: p.id,
    started_at: p.startedAt.toISOString(),
    ended_at: p.endedAt?.toISOString() ?? null,
    reason: p.rule,
    at_start: figuresToWire(p.atStart),
    at_end: p.atEnd ? figuresToWire(p.atEnd) : null,
    thresholds: { holdout_p95_above_ms: p.thresholds.holdoutP95AboveMs, route_error_per_mille_above: p.thresholds.routeErrorPerMilleAbove },
    window_actions: p.windowActions,
  };
}

/** The report as the API and the CLI answer it (money as decimal micro-USD strings). */
export function experimentReportToWire(r: ExperimentReport) {
  const c = r.comparison;
  return {
    experiment_id: r.experiment.id,
    workload_id: r.experiment.workloadId,
    status: r.experiment.status,
    useful_deadline_ms: r.experiment.usefulDeadlineMs,
    holdout_share_bps: r.experiment.holdoutShareBps,
    approved_premium_microusd: r.experiment.approvedPremiumMicrousd.toString(),
    overhead_microusd_per_attempt: r.experiment.overheadMicrousdPerAttempt.toString(),
    ineligible_actions: r.ineligibleActions,
    cohorts: { hedged: cohortToWire(c.hedged), holdout: cohortToWire(c.holdout) },
    on_time_rate_difference: c.rateDifference
      ? { estimate: c.rateDifference.estimate, interval_95: [c.rateDifference.interval.low, c.rateDifference.interval.high] }
      : null,
    incremental_cost_per_on_time_answer_microusd: c.incrementalCost
      ? {
          estimate: icer(c.incrementalCost.estimate),
          interval_95: [icer(c.incrementalCost.interval.low), icer(c.incrementalCost.interval.high)],
        }
      : null,
    unresolved_share_bps: c.unresolvedShareBps,
    bootstrap: { method: 'percentile bootstrap over actions within each cohort', resamples: c.resamples, seed: c.seed },
    verdict: c.result.verdict,
    verdict_reason: 'reason' in c.result ? c.result.reason : null,
    pauses: r.pauses.map(experimentPauseToWire),
    paused_actions: { ...r.pausedActions },
  };
}

export type ExperimentReportWire = ReturnType<typeof experimentReportToWire>;

const CSV_HEADER = [
  'cohort',
  'eligible_actions',
  'on_time_valid_answers',
  'on_time_rate',
  'settled_microusd',
  'unresolved_exposure_microusd',
  'cost_per_action_microusd',
  'cost_per_on_time_answer_microusd',
] as const;

/**
 * The report as CSV: one row per cohort, then the between-cohort figures as metric rows
 * (`metric,estimate,low,high`), then the verdict, then the actions run paused per cohort and one
 * row per pause. Values contain no commas or quotes.
 */
export function experimentReportCsv(w: ExperimentReportWire): string {
  const lines: string[] = [CSV_HEADER.join(',')];
  for (const name of ['hedged', 'holdout'] as const) {
    const c = w.cohorts[name];
    const cells = CSV_HEADER.slice(1).map((k) => c[k as Exclude<(typeof CSV_HEADER)[number], 'cohort'>]);
    lines.push([name, ...cells.map((v) => (v === null ? '' : String(v)))].join(','));
  }
  lines.push('', 'metric,estimate,low,high');
  const d = w.on_time_rate_difference;
  lines.push(d ? `on_time_rate_difference,${d.estimate},${d.interval_95[0]},${d.interval_95[1]}` : 'on_time_rate_difference,,,');
  const i = w.incremental_cost_per_on_time_answer_microusd;
  lines.push(
    i
      ? `incremental_cost_per_on_time_answer_microusd,${i.estimate},${i.interval_95[0]},${i.interval_95[1]}`
      : 'incremental_cost_per_on_time_answer_microusd,,,',
  );
  lines.push('', 'verdict,reason', `${w.verdict},${w.verdict_reason ?? ''}`);
  lines.push('', 'cohort,actions_run_paused', `hedged,${w.paused_actions.hedged}`, `holdout,${w.paused_actions.holdout}`);
  lines.push(
    '',
    'pause_id,started_at,ended_at,reason,start_holdout_p95_ms,start_route_error_per_mille,start_samples,end_holdout_p95_ms,end_route_error_per_mille,end_samples,threshold_holdout_p95_above_ms,threshold_route_error_per_mille_above,window_actions',
  );
  for (const p of w.pauses) {
    const e = p.at_end;
    lines.push(
      [
        p.id,
        p.started_at,
        p.ended_at ?? '',
        p.reason,
        p.at_start.holdout_p95_ms,
        p.at_start.route_error_per_mille,
        p.at_start.samples,
        e?.holdout_p95_ms ?? '',
        e?.route_error_per_mille ?? '',
        e?.samples ?? '',
        p.thresholds.holdout_p95_above_ms,
        p.thresholds.route_error_per_mille_above,
        p.window_actions,
      ].join(','),
    );
  }
  return lines.join('\n') + '\n';
}
