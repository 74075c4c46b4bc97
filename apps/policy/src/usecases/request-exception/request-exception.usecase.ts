import { Inject, Injectable } from '@nestjs/common';
import { ExceptionRepository, PolicyRepository, projectExceptionOver } from '@gateway/db';
import { DomainError, MAX_STORED_MICROUSD } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import type { ExceptionStore, RouteStore, WorkloadStore } from '../../ports';
import { currentVersionOf, exceptionJson } from '../views';
import { RequestExceptionCommand } from './request-exception.command';

export const MAX_EXCEPTION_DAYS = 90;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Files an exception request (status `requested`, requested_by = the caller). It grants nothing
 * until a different person with the approver role approves it. The request carries its evidence
 * (outcome, expected requests, typical input); the projected cost at the prices in force now is
 * computed and stored with it, and refused when nothing it may serve is priced.
 */
@Injectable()
export class RequestException {
  constructor(
    @Inject(ExceptionRepository) private readonly exceptions: ExceptionStore,
    @Inject(PolicyRepository)
    private readonly policy: Pick<WorkloadStore, 'workloadById'> & Pick<RouteStore, 'routeById' | 'routeIdByAlias'>,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(op: Operator, cmd: RequestExceptionCommand) {
    const now = this.clock.now();
    if (cmd.expires_at.getTime() <= now.getTime()) throw invalid('expires_at must be in the future', 'expires_at');
    if (cmd.expires_at.getTime() > now.getTime() + MAX_EXCEPTION_DAYS * DAY_MS) {
      throw invalid(`expires_at must be at most ${MAX_EXCEPTION_DAYS} days ahead`, 'expires_at');
    }
    if (cmd.budget_microusd <= 0n) throw invalid('budget_microusd must be greater than 0', 'budget_microusd');
    const workload = await this.policy.workloadById(cmd.workload_id);
    if (!workload) throw invalid(`no workload ${cmd.workload_id}`, 'workload_id');
    if (cmd.max_candidates <= workload.defaultMaxCandidates) {
      throw invalid(
        `max_candidates must exceed the workload's default maximum (${workload.defaultMaxCandidates}) or the exception would grant nothing`,
        'max_candidates',
      );
    }
    const routeId = cmd.route_id ?? null;
    if (routeId !== null) {
      const route = await this.policy.routeById(routeId);
      if (!route) throw invalid(`no route ${routeId}`, 'route_id');
      const contract = currentVersionOf(route);
      if (cmd.max_candidates > contract.maxCandidates) {
        throw invalid(
          `route ${routeId} supports at most ${contract.maxCandidates} candidates (contract version ${contract.version})`,
          'max_candidates',
        );
      }
    }
    const volume = {
      expectedRequests: cmd.expected_requests,
      typicalInputTokens: cmd.typical_input_tokens,
      maxCandidates: cmd.max_candidates,
      perCandidateOutputCeiling: cmd.per_candidate_output_ceiling,
    };
    const projection = await projectExceptionOver(this.policy, { routeId, allowedAliases: workload.allowedAliases }, volume, now);
    if (!projection) {
      throw routeId !== null
        ? invalid(`route ${routeId} has no price in force, so the exception's cost cannot be projected; price the route first`, 'route_id')
        : invalid(
            `none of workload ${cmd.workload_id}'s allowed routes has a price in force, so the exception's cost cannot be projected; name a priced route`,
            'route_id',
          );
    }
    if (projection.costMicrousd > MAX_STORED_MICROUSD) {
      throw invalid(
        `the projected cost (${projection.costMicrousd} micro-USD) exceeds what the gateway can store (${MAX_STORED_MICROUSD}); lower expected_requests`,
        'expected_requests',
      );
    }
    const created = await this.exceptions.create(
      {
        id: this.ids.next(),
        workloadId: cmd.workload_id,
        routeId,
        owner: cmd.owner,
        maxCandidates: cmd.max_candidates,
        perCandidateOutputCeiling: cmd.per_candidate_output_ceiling,
        budgetMicrousd: cmd.budget_microusd,
        allowsStreaming: cmd.allows_streaming,
        allowsDeterministicSampling: cmd.allows_deterministic_sampling,
        expiresAt: cmd.expires_at,
        justification: cmd.justification,
        requestedBy: op.subject,
        outcome: cmd.outcome,
        expectedRequests: cmd.expected_requests,
        typicalInputTokens: cmd.typical_input_tokens,
        requestProjection: projection,
      },
      now,
    );
    return exceptionJson(created, now, await this.exceptions.eventsOf(created.id));
  }
}

function invalid(message: string, param: string): DomainError {
  return new DomainError('invalid_request', message, param);
}
