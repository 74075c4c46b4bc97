import { Inject, Injectable } from '@nestjs/common';
import { ExceptionRepository, ExceptionTransition, ExceptionView, PolicyRepository, projectExceptionOver } from '@gateway/db';
import { canApprove, checkApprovalProjection, MAX_STORED_MICROUSD } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ExceptionStore, RouteStore, WorkloadStore } from '../../ports';
import { applyExceptionEvent, checkExceptionEvent } from '../exception-transition';
import { exceptionJson } from '../views';
import { DecideExceptionCommand } from './decide-exception.command';

/**
 * Four-eyes decision on a requested exception: the approver must hold the approver role and must
 * not be the requester (for rejections too, so nobody decides their own request). An approval
 * recomputes the projected cost at the prices in force now and stores it; when that exceeds the
 * budget (or nothing can be projected) it needs an `override_reason`, kept on the exception and
 * on the approve event of the audit trail.
 */
@Injectable()
export class DecideException {
  constructor(
    @Inject(ExceptionRepository) private readonly exceptions: ExceptionStore,
    @Inject(PolicyRepository)
    private readonly policy: Pick<WorkloadStore, 'workloadById'> & Pick<RouteStore, 'routeById' | 'routeIdByAlias'>,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, exceptionId: string, cmd: DecideExceptionCommand) {
    const now = this.clock.now();
    const ex = await this.exceptions.findById(exceptionId);
    if (!ex) throw new PolicyError('not_found', `exception ${exceptionId} not found`);
    const allowed = canApprove({ requestedBy: ex.requestedBy, approver: op.subject, approverRoles: op.roles });
    if (!allowed.ok) {
      switch (allowed.reason) {
        case 'self_approval':
          throw new PolicyError(
            'self_approval',
            `${op.subject} requested exception ${exceptionId} and cannot ${cmd.decision} it; another approver must decide`,
          );
        case 'not_an_approver':
          throw new PolicyError('not_an_approver', `deciding an exception requires the approver role`);
        default: {
          const unreachable: never = allowed.reason;
          throw new Error(`Unhandled approval denial: ${String(unreachable)}`);
        }
      }
    }
    const reason = cmd.reason ?? (cmd.decision === 'approve' ? 'approved' : 'rejected');
    const approval = cmd.decision === 'approve' ? await this.approval(ex, cmd.override_reason ?? null, now) : undefined;
    await applyExceptionEvent(this.exceptions, ex, cmd.decision, op.subject, reason, now, approval);
    return this.view(exceptionId, now);
  }

  /** The projection at approval and the override it needs, or the 409 refusing the approval. */
  private async approval(ex: ExceptionView, overrideReason: string | null, now: Date): Promise<ExceptionTransition['approval']> {
    checkExceptionEvent(ex, 'approve', now);
    const projection =
      ex.expectedRequests === null || ex.typicalInputTokens === null
        ? null
        : await projectExceptionOver(
            this.policy,
            { routeId: ex.routeId, allowedAliases: (await this.policy.workloadById(ex.workloadId))?.allowedAliases ?? [] },
            {
              expectedRequests: ex.expectedRequests,
              typicalInputTokens: ex.typicalInputTokens,
              maxCandidates: ex.maxCandidates,
              perCandidateOutputCeiling: ex.perCandidateOutputCeiling,
            },
            now,
          );
    const budget = `its budget (${ex.budgetMicrousd} micro-USD)`;
    if (projection && projection.costMicrousd > MAX_STORED_MICROUSD) {
      throw new PolicyError(
        'projection_exceeds_budget',
        `the cost of exception ${ex.id} projected at today's prices (${projection.costMicrousd} micro-USD) exceeds ${budget} beyond what the gateway can store; request a new exception with fewer expected_requests`,
      );
    }
    const check = checkApprovalProjection({
      budgetMicrousd: ex.budgetMicrousd,
      projectionMicrousd: projection?.costMicrousd ?? null,
      overrideReason,
    });
    if (!check.ok) {
      throw new PolicyError(
        check.reason,
        projection
          ? `the cost of exception ${ex.id} projected at the prices in force (${projection.costMicrousd} micro-USD on route ${projection.routeId}, ` +
              `price revision ${projection.priceRevisionId}) exceeds ${budget}; approve with an override_reason to accept it`
          : `the cost of exception ${ex.id} cannot be projected (${ex.expectedRequests === null ? 'it carries no expected volume' : 'none of its routes has a price in force'}); ` +
              `approve with an override_reason to accept unprojected spend`,
        'override_reason',
      );
    }
    return { projection, overrideReason };
  }

  private async view(id: string, now: Date) {
    const ex = await this.exceptions.findById(id);
    if (!ex) throw new Error(`exception ${id} vanished`);
    return exceptionJson(ex, now, await this.exceptions.eventsOf(id));
  }
}
