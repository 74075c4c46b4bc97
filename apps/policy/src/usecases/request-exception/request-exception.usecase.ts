import { Inject, Injectable } from '@nestjs/common';
import { ExceptionRepository, PolicyRepository } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import type { ExceptionStore, RouteStore, WorkloadStore } from '../../ports';
import { currentVersionOf, exceptionJson } from '../views';
import { RequestExceptionCommand } from './request-exception.command';

export const MAX_EXCEPTION_DAYS = 90;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Files an exception request (status `requested`, requested_by = the caller). It grants nothing
 * until a different person with the approver role approves it.
 */
@Injectable()
export class RequestException {
  constructor(
    @Inject(ExceptionRepository) private readonly exceptions: ExceptionStore,
    @Inject(PolicyRepository) private readonly policy: Pick<WorkloadStore, 'workloadById'> & Pick<RouteStore, 'routeById'>,
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
      },
      now,
    );
    return exceptionJson(created, now, await this.exceptions.eventsOf(created.id));
  }
}

function invalid(message: string, param: string): DomainError {
  return new DomainError('invalid_request', message, param);
}
