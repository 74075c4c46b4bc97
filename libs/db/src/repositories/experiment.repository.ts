import { experimentCohort } from '@gateway/contracts';
import { Experiment, ExperimentDesign, ExperimentPause, ExperimentReportRow, startedExperiment } from '@gateway/domain';
import { z } from 'zod';
import { Database, prismaTx, Tx } from '../database';
import type { Experiment as ExperimentRow } from '../generated/prisma/client';
import { ExperimentPauseRepository } from './experiment-pause.repository';
import { OutboxRepository } from './outbox.repository';
import { recordedCandidatesOf } from './recorded-candidates';

export type StartExperimentResult =
  | { ok: true; experiment: Experiment }
  | { ok: false; reason: 'workload_not_found' | 'policy_revision_not_found' | 'already_running'; runningId?: string };

/** What admission needs of a workload's running experiment to assign a cohort. */
export interface RunningExperiment {
  id: string;
  holdoutShareBps: number;
  hedgePolicyRevisionId: string;
  readOnlyTools: string[];
}

/**
 * Hedging experiments (issue 11). The design is written once, when the approval starts the
 * experiment; afterwards only `stop` moves it. At most one experiment runs per workload: `start`
 * locks the workload row, so two approvals of the same workload are decided one after the other.
 */
export class ExperimentRepository {
  private readonly pauses: ExperimentPauseRepository;

  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {
    this.pauses = new ExperimentPauseRepository(db);
  }

  /** The experiment's stored pauses, oldest first (for its report; `ExperimentPauseRepository` owns them). */
  pausesOf(experimentId: string): Promise<ExperimentPause[]> {
    return this.pauses.pausesOf(experimentId);
  }

  /**
   * Starts an experiment of `workloadId` under the named policy revision (which must be that
   * workload's), copying the revision's approved premium as the decision threshold, with its
   * `policy.changed` event.
   */
  async start(
    input: ExperimentDesign & { id: string; workloadId: string; requestedBy: string; approvedBy: string; reason: string },
    now: Date,
    outer?: Tx,
  ): Promise<StartExperimentResult> {
    const run = async (tx: Tx): Promise<StartExperimentResult> => {
      const p = prismaTx(tx);
      const locked = await p.$queryRaw<Array<{ id: string }>>`SELECT id FROM workload WHERE id = ${input.workloadId} FOR UPDATE`;
      if (locked.length === 0) return { ok: false, reason: 'workload_not_found' };
      const revision = await p.hedgePolicyRevision.findFirst({
        where: { id: input.hedgePolicyRevisionId, workloadId: input.workloadId },
        select: { approvedPremiumMicrousd: true },
      });
      if (!revision) return { ok: false, reason: 'policy_revision_not_found' };
      const running = await p.experiment.findFirst({ where: { workloadId: input.workloadId, status: 'running' }, select: { id: true } });
      if (running) return { ok: false, reason: 'already_running', runningId: running.id };
      const experiment = startedExperiment(input, revision.approvedPremiumMicrousd, now);
      await p.experiment.create({ data: experimentToRow(experiment) });
      await this.outbox.policyChanged(tx, {
        entity: 'experiment',
        entityId: experiment.id,
        change: `started on workload ${input.workloadId} (holdout ${input.holdoutShareBps} bps): ${input.reason}`,
        actor: input.approvedBy,
        now,
      });
      return { ok: true, experiment };
    };
    return outer ? run(outer) : this.db.transaction(run);
  }

  /** Stops a running experiment; stopping a stopped one answers it unchanged (idempotent), null when unknown. */
  async stop(id: string, actor: string, reason: string, now: Date): Promise<Experiment | null> {
    return this.db.transaction(async (tx) => {
      const p = prismaTx(tx);
      const rows = await p.$queryRaw<Array<{ status: string }>>`SELECT status FROM experiment WHERE id = ${id} FOR UPDATE`;
      if (rows.length === 0) return null;
      if (rows[0].status === 'running') {
        await p.experiment.update({ where: { id }, data: { status: 'stopped', stoppedAt: now, stoppedBy: actor, stopReason: reason } });
        await this.outbox.policyChanged(tx, { entity: 'experiment', entityId: id, change: `stopped: ${reason}`, actor, now });
      }
      return experimentFromRow(await p.experiment.findUniqueOrThrow({ where: { id } }));
    });
  }

  /**
   * The workload's running experiment as admission assigns with it: the holdout share, the policy
   * revision the hedged cohort runs under and that revision's read-only tools (for
   * `hedgeIneligibility`); null when none runs. One indexed query.
   */
  async runningFor(workloadId: string): Promise<RunningExperiment | null> {
    const row = await this.db.prisma.experiment.findFirst({
      where: { workloadId, status: 'running' },
      select: { id: true, holdoutShareBps: true, hedgePolicyRevisionId: true, hedgePolicyRevision: { select: { readOnlyTools: true } } },
    });
    if (!row) return null;
    return {
      id: row.id,
      holdoutShareBps: row.holdoutShareBps,
      hedgePolicyRevisionId: row.hedgePolicyRevisionId,
      readOnlyTools: row.hedgePolicyRevision.readOnlyTools,
    };
  }

  /**
   * One row per action of the experiment for its report: cohort, admission time, when the
   * winner's answer ended, the acceptance verdict, attempts sent, the ledger's settled cost of
   * its attempts, the holds of attempts whose money is not decided (pending or unresolved), and
   * whether it was dispatched while a pause was open.
   * Reads the action, attempt and ledger tables by the experiment index.
   */
  async reportRows(experimentId: string): Promise<ExperimentReportRow[]> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{
        id: string;
        cohort: string;
        created_at: Date;
        answered_at: Date | null;
        acceptance_verdict: string | null;
        winner_candidates: unknown;
        attempts: number;
        settled: bigint;
        unresolved: bigint;
        ran_paused: boolean;
      }>
    >`
      SELECT a.id, a.cohort, a.created_at, w.ended_at AS answered_at, a.acceptance_verdict, w.candidate_outcomes AS winner_candidates,
        (SELECT count(*)::int FROM attempt t WHERE t.action_id = a.id) AS attempts,
        (SELECT coalesce(sum(l.cost_microusd), 0)::bigint FROM ledger_entry l WHERE l.action_id = a.id) AS settled,
        (SELECT coalesce(sum(t.hold_microusd), 0)::bigint FROM attempt t
          WHERE t.action_id = a.id AND t.financial_state IS DISTINCT FROM 'settled'
            AND NOT EXISTS (SELECT 1 FROM ledger_entry l WHERE l.attempt_id = t.id)) AS unresolved,
        EXISTS (SELECT 1 FROM attempt t WHERE t.action_id = a.id AND t.experiment_pause_id IS NOT NULL) AS ran_paused
      FROM action a LEFT JOIN attempt w ON w.id = a.winner_attempt_id
      WHERE a.experiment_id = ${experimentId}
      ORDER BY a.id`;
    return rows.map((r) => ({
      actionId: r.id,
      cohort: experimentCohort.parse(r.cohort),
      admittedAt: r.created_at,
      answeredAt: r.answered_at,
      acceptanceVerdict: r.acceptance_verdict,
      winnerCandidates: candidatesOf(r.winner_candidates),
      attempts: r.attempts,
      settledMicrousd: r.settled,
      unresolvedMicrousd: r.unresolved,
      ranPaused: r.ran_paused,
    }));
  }

  async findById(id: string): Promise<Experiment | null> {
    const row = await this.db.prisma.experiment.findUnique({ where: { id } });
    return row ? experimentFromRow(row) : null;
  }

  /** The workload's experiments, newest first. */
  async listByWorkload(workloadId: string): Promise<Experiment[]> {
    const rows = await this.db.prisma.experiment.findMany({ where: { workloadId }, orderBy: [{ startedAt: 'desc' }, { id: 'desc' }] });
    return rows.map(experimentFromRow);
  }
}

const status = z.enum(['running', 'stopped']);

/** The winner's recorded candidates for the experiment's acceptance; null when none were recorded. */
function candidatesOf(json: unknown): ExperimentReportRow['winnerCandidates'] {
  return recordedCandidatesOf(json)?.map((c) => ({ finishReason: c.finish_reason, outcome: c.outcome })) ?? null;
}

/** The one mapping from an `experiment` row to the domain. */
function experimentFromRow(r: ExperimentRow): Experiment {
  return {
    id: r.id,
    workloadId: r.workloadId,
    status: status.parse(r.status),
    owner: r.owner,
    hedgePolicyRevisionId: r.hedgePolicyRevisionId,
    holdoutShareBps: r.holdoutShareBps,
    usefulDeadlineMs: r.usefulDeadlineMs,
    acceptance: {
      nonEmptyContent: r.acceptNonEmptyContent,
      allowedFinishReasons: r.acceptFinishReasons,
      refusalsInvalid: r.acceptRefusalsInvalid,
    },
    samplePlan: { minActionsPerCohort: r.minActionsPerCohort, maxUnresolvedShareBps: r.maxUnresolvedShareBps },
    overheadMicrousdPerAttempt: r.overheadMicrousdPerAttempt,
    pause: {
      holdoutP95AboveMs: r.pauseHoldoutP95AboveMs,
      routeErrorPerMilleAbove: r.pauseRouteErrorPerMilleAbove,
      windowActions: r.pauseWindowActions,
    },
    seed: Number(r.seed),
    approvedPremiumMicrousd: r.approvedPremiumMicrousd,
    requestedBy: r.requestedBy,
    approvedBy: r.approvedBy,
    reason: r.reason,
    startedAt: r.startedAt,
    stoppedAt: r.stoppedAt,
    stoppedBy: r.stoppedBy,
    stopReason: r.stopReason,
  };
}

/** ... and back. */
function experimentToRow(e: Experiment): ExperimentRow {
  return {
    id: e.id,
    workloadId: e.workloadId,
    hedgePolicyRevisionId: e.hedgePolicyRevisionId,
    owner: e.owner,
    status: e.status,
    holdoutShareBps: e.holdoutShareBps,
    usefulDeadlineMs: e.usefulDeadlineMs,
    acceptNonEmptyContent: e.acceptance.nonEmptyContent,
    acceptFinishReasons: [...e.acceptance.allowedFinishReasons],
    acceptRefusalsInvalid: e.acceptance.refusalsInvalid,
    minActionsPerCohort: e.samplePlan.minActionsPerCohort,
    maxUnresolvedShareBps: e.samplePlan.maxUnresolvedShareBps,
    approvedPremiumMicrousd: e.approvedPremiumMicrousd,
    overheadMicrousdPerAttempt: e.overheadMicrousdPerAttempt,
    pauseHoldoutP95AboveMs: e.pause.holdoutP95AboveMs,
    pauseRouteErrorPerMilleAbove: e.pause.routeErrorPerMilleAbove,
    pauseWindowActions: e.pause.windowActions,
    seed: BigInt(e.seed),
    requestedBy: e.requestedBy,
    approvedBy: e.approvedBy,
    reason: e.reason,
    startedAt: e.startedAt,
    stoppedAt: e.stoppedAt,
    stoppedBy: e.stoppedBy,
    stopReason: e.stopReason,
  };
}
