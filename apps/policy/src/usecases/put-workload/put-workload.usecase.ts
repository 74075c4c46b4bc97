import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import type { WorkloadStore } from '../../ports';
import { parseValue, resourceId } from '../input';
import { workloadJson } from '../views';
import { PutWorkloadCommand } from './put-workload.command';

/**
 * Creates or replaces a workload's policy. Aliases must name existing routes: a typo here would
 * otherwise surface only as `unknown_route` on the app team's requests.
 */
@Injectable()
export class PutWorkload {
  constructor(
    @Inject(PolicyRepository) private readonly workloads: WorkloadStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, workloadId: string, cmd: PutWorkloadCommand) {
    parseValue(resourceId, workloadId, 'id');
    for (const field of ['allowed_aliases', 'fallback_chain'] as const) {
      for (const [i, alias] of cmd[field].entries()) {
        if ((await this.workloads.routeIdByAlias(alias)) === null) {
          throw new DomainError('invalid_request', `${field}[${i}]: no route has the alias '${alias}'`, `${field}.${i}`);
        }
      }
    }
    const now = this.clock.now();
    await this.workloads.putWorkload(
      {
        id: workloadId,
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
        deadlineMs: cmd.deadline_ms,
        maxInFlight: cmd.max_in_flight,
        tokensPerMinute: cmd.tokens_per_minute,
        actor: op.subject,
        reason: cmd.reason ?? 'workload policy set',
      },
      now,
    );
    const stored = await this.workloads.workloadById(workloadId);
    if (!stored) throw new Error(`workload ${workloadId} vanished after it was written`);
    return workloadJson(stored);
  }
}
