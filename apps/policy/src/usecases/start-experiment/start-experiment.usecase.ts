import { Inject, Injectable } from '@nestjs/common';
import { ChangeRequestRepository, ExperimentRepository, HedgePolicyRepository, PolicyRepository, Tx } from '@gateway/db';
import { experimentDesignFromWire, experimentToWire } from '@gateway/contracts';
import { experimentPauseToWire, experimentReport, experimentReportToWire } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ChangeRequestStore, ExperimentStore, HedgePolicyStore, WorkloadStore } from '../../ports';
import { PendingChange, requestChange } from '../change-requests';
import { parseValue, resourceId } from '../input';
import { StartExperimentCommand } from './start-experiment.command';

/** What starting an experiment lets spend: the hedged cohort's extra attempts, within the policy revision. */
const RAISES = ['starts a hedging experiment: the hedged cohort runs extra attempts under the named policy revision'];

/**
 * Hedging experiments (issue 11), four-eyes like exceptions: an operator files the design (always
 * a change request: an experiment exists to spend on extra attempts), a second approver starts it.
 * The design is checked when filed and again when approved: the policy revision must be the
 * workload's, and no other experiment may be running on the workload.
 */
@Injectable()
export class StartExperiment {
  constructor(
    @Inject(ExperimentRepository) private readonly experiments: ExperimentStore,
    @Inject(HedgePolicyRepository) private readonly hedging: Pick<HedgePolicyStore, 'history'>,
    @Inject(PolicyRepository) private readonly policy: Pick<WorkloadStore, 'workloadById'>,
    @Inject(ChangeRequestRepository) private readonly changes: ChangeRequestStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(op: Operator, workloadId: string, cmd: StartExperimentCommand): Promise<PendingChange> {
    parseValue(resourceId, workloadId, 'id');
    if (!(await this.policy.workloadById(workloadId))) throw new PolicyError('not_found', `workload ${workloadId} not found`);
    const revisions = await this.hedging.history(workloadId);
    if (!revisions.some((r) => r.revisionId === cmd.hedge_policy_revision_id)) {
      throw new PolicyError(
        'not_found',
        `hedge policy revision ${cmd.hedge_policy_revision_id} is not one of workload ${workloadId}'s`,
        'hedge_policy_revision_id',
      );
    }
    const running = (await this.experiments.listByWorkload(workloadId)).find((e) => e.status === 'running');
    if (running) throw this.alreadyRunning(workloadId, running.id);
    const reason = cmd.reason ?? 'hedging experiment';
    return requestChange(
      this.changes,
      this.ids,
      op,
      { kind: 'experiment', targetId: workloadId, command: cmd, raises: RAISES, reason },
      this.clock.now(),
    );
  }

  /** Starts the approved experiment inside the approving transaction. */
  async applyApproved(
    requestedBy: string,
    approvedBy: string,
    reason: string,
    workloadId: string,
    cmd: StartExperimentCommand,
    now: Date,
    tx: Tx,
  ): Promise<void> {
    const result = await this.experiments.start(
      { ...experimentDesignFromWire(cmd), id: this.ids.next(), workloadId, requestedBy, approvedBy, reason },
      now,
      tx,
    );
    if (result.ok) return;
    if (result.reason === 'already_running') throw this.alreadyRunning(workloadId, result.runningId ?? 'another');
    if (result.reason === 'policy_revision_not_found') {
      throw new PolicyError('not_found', `hedge policy revision ${cmd.hedge_policy_revision_id} not found`, 'hedge_policy_revision_id');
    }
    throw new PolicyError('not_found', `workload ${workloadId} not found`);
  }

  /** The workload's experiments, newest first. */
  async list(workloadId: string) {
    parseValue(resourceId, workloadId, 'id');
    if (!(await this.policy.workloadById(workloadId))) throw new PolicyError('not_found', `workload ${workloadId} not found`);
    return { workload_id: workloadId, experiments: (await this.experiments.listByWorkload(workloadId)).map(experimentToWire) };
  }

  async get(id: string) {
    parseValue(resourceId, id, 'id');
    const e = await this.experiments.findById(id);
    if (!e) throw new PolicyError('not_found', `experiment ${id} not found`);
    // the record carries its pauses, so a reader computing the report elsewhere (finance) has them
    return { ...experimentToWire(e), pauses: (await this.experiments.pausesOf(id)).map(experimentPauseToWire) };
  }

  /**
   * The experiment's report (issue 11): per cohort and between cohorts, the seeded bootstrap and
   * the verdict, computed from the action, attempt and ledger rows (the policy service owns the
   * experiment record; the rows are in the same database); the pauses dispatch recorded.
   */
  async report(id: string) {
    parseValue(resourceId, id, 'id');
    const e = await this.experiments.findById(id);
    if (!e) throw new PolicyError('not_found', `experiment ${id} not found`);
    const [rows, pauses] = await Promise.all([this.experiments.reportRows(id), this.experiments.pausesOf(id)]);
    return experimentReportToWire(experimentReport(e, rows, pauses));
  }

  private alreadyRunning(workloadId: string, runningId: string): PolicyError {
    return new PolicyError(
      'experiment_running',
      `workload ${workloadId} already runs experiment ${runningId}; stop it first (POST /experiments/${runningId}/stop)`,
    );
  }
}
