import { Inject, Injectable } from '@nestjs/common';
import { ChangeRequestRepository, PolicyRepository, Tx, WorkloadInput } from '@gateway/db';
import { DomainError, workloadSpendRaises } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import type { ChangeRequestStore, WorkloadStore } from '../../ports';
import { requestChange } from '../change-requests';
import { parseValue, resourceId } from '../input';
import { workloadJson } from '../views';
import { PutWorkloadCommand } from './put-workload.command';

/**
 * Creates or replaces a workload's policy. Aliases must name existing routes: a typo here would
 * otherwise surface only as `unknown_route` on the app team's requests. A policy that raises
 * spend (a new workload, higher limits, a removed token limit, new fallbacks) becomes a change
 * request for a second operator; lowering limits applies at once.
 */
@Injectable()
export class PutWorkload {
  constructor(
    @Inject(PolicyRepository) private readonly workloads: WorkloadStore,
    @Inject(ChangeRequestRepository) private readonly changes: ChangeRequestStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(op: Operator, workloadId: string, cmd: PutWorkloadCommand) {
    await this.validate(workloadId, cmd);
    const now = this.clock.now();
    const input = toInput(workloadId, cmd, op.subject, cmd.reason ?? 'workload policy set');
    const raises = workloadSpendRaises(await this.workloads.workloadById(workloadId), input);
    if (raises.length > 0) {
      return requestChange(
        this.changes,
        this.ids,
        op,
        { kind: 'workload_policy', targetId: workloadId, command: cmd, raises, reason: input.reason },
        now,
      );
    }
    await this.workloads.putWorkload(input, now);
    const stored = await this.workloads.workloadById(workloadId);
    if (!stored) throw new Error(`workload ${workloadId} vanished after it was written`);
    return workloadJson(stored);
  }

  /** The approved change: validated again and written inside the approving transaction. */
  async applyApproved(actor: string, reason: string, workloadId: string, cmd: PutWorkloadCommand, now: Date, tx: Tx): Promise<void> {
    await this.validate(workloadId, cmd);
    await this.workloads.putWorkload(toInput(workloadId, cmd, actor, reason), now, tx);
  }

  private async validate(workloadId: string, cmd: PutWorkloadCommand): Promise<void> {
    parseValue(resourceId, workloadId, 'id');
    for (const field of ['allowed_aliases', 'fallback_chain'] as const) {
      for (const [i, alias] of cmd[field].entries()) {
        if ((await this.workloads.routeIdByAlias(alias)) === null) {
          throw new DomainError('invalid_request', `${field}[${i}]: no route has the alias '${alias}'`, `${field}.${i}`);
        }
      }
    }
  }
}

function toInput(id: string, cmd: PutWorkloadCommand, actor: string, reason: string): WorkloadInput {
  return {
    id,
    team: cmd.team,
    environment: cmd.environment,
    defaultMaxCandidates: cmd.default_max_candidates,
    perCandidateOutputCeiling: cmd.per_candidate_output_ceiling,
    budgetMicrousd: cmd.budget_microusd,
    budgetPeriod: cmd.budget_period,
    allowedAliases: cmd.allowed_aliases,
    fallbackChain: cmd.fallback_chain,
    allowLength: cmd.allow_length,
    allowContentFilter: cmd.allow_content_filter,
    allowProviderStorage: cmd.allow_provider_storage,
    deadlineMs: cmd.deadline_ms,
    maxInFlight: cmd.max_in_flight,
    tokensPerMinute: cmd.tokens_per_minute,
    maxCallsPerWorkflow: cmd.max_calls_per_workflow,
    workflowWindowSeconds: cmd.workflow_window_seconds,
    workflowIdField: cmd.workflow_id_field,
    actor,
    reason,
  };
}
