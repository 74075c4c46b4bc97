import { Inject, Injectable } from '@nestjs/common';
import { ChangeRequestRepository, ChangeRequestView, Tx } from '@gateway/db';
import { canApprove } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ChangeRequestStore } from '../../ports';
import { addPriceRevisionBody } from '../add-price-revision/add-price-revision.command';
import { AddPriceRevision } from '../add-price-revision/add-price-revision.usecase';
import { changeRequestJson } from '../change-requests';
import { parseBody } from '../input';
import { putWorkloadBody } from '../put-workload/put-workload.command';
import { PutWorkload } from '../put-workload/put-workload.usecase';
import { putHedgePolicyBody } from '../put-hedge-policy/put-hedge-policy.command';
import { PutHedgePolicy } from '../put-hedge-policy/put-hedge-policy.usecase';
import { putScopeLimitBody } from '../put-scope-limit/put-scope-limit.command';
import { startExperimentBody } from '../start-experiment/start-experiment.command';
import { StartExperiment } from '../start-experiment/start-experiment.usecase';
import { PutScopeLimit } from '../put-scope-limit/put-scope-limit.usecase';
import { updateRouteContractBody } from '../update-route-contract/update-route-contract.command';
import { UpdateRouteContract } from '../update-route-contract/update-route-contract.usecase';
import { DecideExceptionCommand as DecideChangeRequestCommand } from '../decide-exception/decide-exception.command';

/**
 * Four-eyes decision on a change that raises spend: the approver holds the approver role and is
 * not the requester. An approval re-validates the proposed command and applies it in the same
 * transaction that marks the request approved, so the change and its approval commit together.
 */
@Injectable()
export class DecideChangeRequest {
  constructor(
    @Inject(ChangeRequestRepository) private readonly changes: ChangeRequestStore,
    private readonly putWorkload: PutWorkload,
    private readonly addPrice: AddPriceRevision,
    private readonly updateContract: UpdateRouteContract,
    private readonly putScopeLimit: PutScopeLimit,
    private readonly putHedgePolicy: PutHedgePolicy,
    private readonly startExperiment: StartExperiment,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, id: string, cmd: DecideChangeRequestCommand) {
    const now = this.clock.now();
    const request = await this.changes.findById(id);
    if (!request) throw new PolicyError('not_found', `change request ${id} not found`);
    const allowed = canApprove({ requestedBy: request.requestedBy, approver: op.subject, approverRoles: op.roles });
    if (!allowed.ok) throw this.refusal(allowed.reason, op, id, cmd.decision);
    const status = cmd.decision === 'approve' ? 'approved' : 'rejected';
    const reason = cmd.reason ?? status;
    const result = await this.changes.decide({ id, status, decidedBy: op.subject, reason, now }, (tx, r) =>
      this.apply(tx, r, op.subject, `${r.reason} (change request ${r.id}, approved by ${op.subject})`, now),
    );
    if (!result.ok) {
      if (result.reason === 'not_pending')
        throw new PolicyError('invalid_transition', `change request ${id} is already ${result.request?.status ?? 'decided'}`);
      if (result.reason === 'self_approval') throw this.refusal('self_approval', op, id, cmd.decision);
      throw new PolicyError('not_found', `change request ${id} not found`);
    }
    return changeRequestJson(result.request);
  }

  private apply(tx: Tx, r: ChangeRequestView, approver: string, reason: string, now: Date): Promise<void> {
    switch (r.kind) {
      case 'workload_policy':
        return this.putWorkload.applyApproved(r.requestedBy, reason, r.targetId, parseBody(putWorkloadBody, r.proposed), now, tx);
      case 'price_revision':
        return this.addPrice.applyApproved(r.requestedBy, reason, r.targetId, parseBody(addPriceRevisionBody, r.proposed), now, tx);
      case 'route_contract':
        return this.updateContract.applyApproved(
          r.requestedBy,
          reason,
          r.targetId,
          parseBody(updateRouteContractBody, r.proposed),
          now,
          tx,
        );
      case 'scope_limit':
        return this.putScopeLimit.applyApproved(r.requestedBy, reason, r.targetId, parseBody(putScopeLimitBody, r.proposed), now, tx);
      case 'hedge_policy':
        return this.putHedgePolicy.applyApproved(r.requestedBy, reason, r.targetId, parseBody(putHedgePolicyBody, r.proposed), now, tx);
      case 'experiment':
        return this.startExperiment.applyApproved(
          r.requestedBy,
          approver,
          reason,
          r.targetId,
          parseBody(startExperimentBody, r.proposed),
          now,
          tx,
        );
      default: {
        const unreachable: never = r.kind;
        throw new Error(`Unhandled change request kind: ${String(unreachable)}`);
      }
    }
  }

  private refusal(reason: 'self_approval' | 'not_an_approver', op: Operator, id: string, decision: string): PolicyError {
    switch (reason) {
      case 'self_approval':
        return new PolicyError(
          'self_approval',
          `${op.subject} requested change ${id} and cannot ${decision} it; another approver must decide`,
        );
      case 'not_an_approver':
        return new PolicyError('not_an_approver', 'deciding a change request requires the approver role');
      default: {
        const unreachable: never = reason;
        throw new Error(`Unhandled approval denial: ${String(unreachable)}`);
      }
    }
  }
}
