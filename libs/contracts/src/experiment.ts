import { z } from 'zod';
import type { Experiment, ExperimentDesign, ExperimentPause } from '@gateway/domain';
import { EXPERIMENT_LIMITS } from '@gateway/domain';
import { decimalMicrousd } from './price-revision';

/**
 * A hedging experiment's wire shape (issue 11): snake_case, as the policy API takes and shows it,
 * money as a JSON integer or digit string in and a string out. The one translation between it and
 * the domain `ExperimentDesign`; what the numbers may be is `experimentDesignProblems`' to say.
 */
export type ExperimentDesignWire<M> = {
  owner: string;
  hedge_policy_revision_id: string;
  holdout_share_bps: number;
  useful_deadline_ms: number;
  acceptance: { non_empty_content: boolean; allowed_finish_reasons: string[]; refusals_invalid: boolean };
  sample_plan: { metric: 'incremental_cost_per_on_time_answer'; min_actions_per_cohort: number; max_unresolved_share_bps: number };
  overhead_microusd_per_attempt: M;
  pause: { holdout_p95_above_ms: number; route_error_per_mille_above: number; window_actions: number };
  seed: number;
};

/** The zod fields of the design, `money` parsing each amount; strict objects, bounded lists, defaults as documented. */
export function experimentDesignWireFields<M extends z.ZodType<bigint>>(money: M, id: z.ZodType<string>) {
  const int = z.number().int();
  return {
    owner: z.string().trim().min(1).max(128),
    hedge_policy_revision_id: id,
    holdout_share_bps: int.default(1_000),
    useful_deadline_ms: int,
    acceptance: z
      .object({
        non_empty_content: z.boolean().default(true),
        allowed_finish_reasons: z.array(z.string().max(EXPERIMENT_LIMITS.maxFinishReasonLength)).max(EXPERIMENT_LIMITS.maxFinishReasons),
        refusals_invalid: z.boolean().default(true),
      })
      .strict(),
    sample_plan: z
      .object({
        metric: z.literal('incremental_cost_per_on_time_answer').default('incremental_cost_per_on_time_answer'),
        min_actions_per_cohort: int,
        max_unresolved_share_bps: int.default(0),
      })
      .strict(),
    overhead_microusd_per_attempt: money,
    pause: z.object({ holdout_p95_above_ms: int, route_error_per_mille_above: int, window_actions: int.default(200) }).strict(),
    seed: int.default(1),
  };
}

export function experimentDesignFromWire(w: ExperimentDesignWire<bigint>): ExperimentDesign {
  return {
    owner: w.owner,
    hedgePolicyRevisionId: w.hedge_policy_revision_id,
    holdoutShareBps: w.holdout_share_bps,
    usefulDeadlineMs: w.useful_deadline_ms,
    acceptance: {
      nonEmptyContent: w.acceptance.non_empty_content,
      allowedFinishReasons: w.acceptance.allowed_finish_reasons,
      refusalsInvalid: w.acceptance.refusals_invalid,
    },
    samplePlan: {
      minActionsPerCohort: w.sample_plan.min_actions_per_cohort,
      maxUnresolvedShareBps: w.sample_plan.max_unresolved_share_bps,
    },
    overheadMicrousdPerAttempt: w.overhead_microusd_per_attempt,
    pause: {
      holdoutP95AboveMs: w.pause.holdout_p95_above_ms,
      routeErrorPerMilleAbove: w.pause.route_error_per_mille_above,
      windowActions: w.pause.window_actions,
    },
    seed: w.seed,
  };
}

function designToWire(d: ExperimentDesign): ExperimentDesignWire<string> {
  return {
    owner: d.owner,
    hedge_policy_revision_id: d.hedgePolicyRevisionId,
    holdout_share_bps: d.holdoutShareBps,
    useful_deadline_ms: d.usefulDeadlineMs,
    acceptance: {
      non_empty_content: d.acceptance.nonEmptyContent,
      allowed_finish_reasons: [...d.acceptance.allowedFinishReasons],
      refusals_invalid: d.acceptance.refusalsInvalid,
    },
    sample_plan: {
      metric: 'incremental_cost_per_on_time_answer',
      min_actions_per_cohort: d.samplePlan.minActionsPerCohort,
      max_unresolved_share_bps: d.samplePlan.maxUnresolvedShareBps,
    },
    overhead_microusd_per_attempt: d.overheadMicrousdPerAttempt.toString(),
    pause: {
      holdout_p95_above_ms: d.pause.holdoutP95AboveMs,
      route_error_per_mille_above: d.pause.routeErrorPerMilleAbove,
      window_actions: d.pause.windowActions,
    },
    seed: d.seed,
  };
}

/** What the policy API shows of an experiment. */
export function experimentToWire(e: Experiment) {
  return {
    id: e.id,
    workload_id: e.workloadId,
    status: e.status,
    ...designToWire(e),
    /** the decision threshold: the policy revision's approved premium, fixed when the experiment started */
    approved_premium_microusd: e.approvedPremiumMicrousd.toString(),
    requested_by: e.requestedBy,
    approved_by: e.approvedBy,
    reason: e.reason,
    started_at: e.startedAt.toISOString(),
    stopped_at: e.stoppedAt?.toISOString() ?? null,
    stopped_by: e.stoppedBy,
    stop_reason: e.stopReason,
  };
}

const pauseFiguresWire = z.object({
  holdout_p95_ms: z.number().int().nonnegative(),
  route_error_per_mille: z.number().int().nonnegative(),
  samples: z.number().int().nonnegative(),
});

/** A pause of hedging as `experimentPauseToWire` shows it (the report's `pauses`, the record's). */
export const experimentPauseWire = z.object({
  id: z.string(),
  started_at: z.string().datetime({ offset: true }),
  ended_at: z.string().datetime({ offset: true }).nullable(),
  reason: z.enum(['holdout_p95_above_ms', 'route_error_per_mille_above']),
  at_start: pauseFiguresWire,
  at_end: pauseFiguresWire.nullable(),
  thresholds: z.object({ holdout_p95_above_ms: z.number().int(), route_error_per_mille_above: z.number().int() }),
  window_actions: z.number().int().positive(),
});

const pauseFiguresOf = (f: z.infer<typeof pauseFiguresWire>) => ({
  holdoutP95Ms: f.holdout_p95_ms,
  routeErrorPerMille: f.route_error_per_mille,
  samples: f.samples,
});

/** ... and back into the domain (`experimentPauseToWire`'s inverse). */
export function experimentPauseFromWire(experimentId: string, w: z.infer<typeof experimentPauseWire>): ExperimentPause {
  return {
    id: w.id,
    experimentId,
    rule: w.reason,
    startedAt: new Date(w.started_at),
    endedAt: w.ended_at === null ? null : new Date(w.ended_at),
    atStart: pauseFiguresOf(w.at_start),
    atEnd: w.at_end === null ? null : pauseFiguresOf(w.at_end),
    thresholds: { holdoutP95AboveMs: w.thresholds.holdout_p95_above_ms, routeErrorPerMilleAbove: w.thresholds.route_error_per_mille_above },
    windowActions: w.window_actions,
  };
}

/**
 * The experiment record as the policy API shows it (`GET /experiments/{id}`, `experimentToWire`),
 * parsed back: what a reader outside the gateway (the finance consumer) needs to compute the
 * report itself. Not strict: fields added later are ignored.
 */
export const experimentRecordWire = z.object({
  id: z.string(),
  workload_id: z.string(),
  status: z.enum(['running', 'stopped']),
  ...experimentDesignWireFields(decimalMicrousd, z.string()),
  approved_premium_microusd: decimalMicrousd,
  requested_by: z.string(),
  approved_by: z.string(),
  reason: z.string(),
  started_at: z.string().datetime({ offset: true }),
  stopped_at: z.string().datetime({ offset: true }).nullable(),
  stopped_by: z.string().nullable(),
  stop_reason: z.string().nullable(),
  /** the pauses of hedging dispatch recorded, oldest first (absent from records before pauses existed) */
  pauses: z.array(experimentPauseWire).max(10_000).optional(),
});

/** ... and into the domain (`experimentToWire`'s inverse). */
export function experimentFromRecordWire(w: z.infer<typeof experimentRecordWire>): Experiment {
  return {
    ...experimentDesignFromWire(w),
    id: w.id,
    workloadId: w.workload_id,
    status: w.status,
    approvedPremiumMicrousd: w.approved_premium_microusd,
    requestedBy: w.requested_by,
    approvedBy: w.approved_by,
    reason: w.reason,
    startedAt: new Date(w.started_at),
    stoppedAt: w.stopped_at === null ? null : new Date(w.stopped_at),
    stoppedBy: w.stopped_by,
    stopReason: w.stop_reason,
  };
}
