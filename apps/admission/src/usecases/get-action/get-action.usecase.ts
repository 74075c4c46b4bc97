import { Inject, Injectable } from '@nestjs/common';
import { CatalogRepository, OutcomesView, ViewsRepository } from '@gateway/db';
import { DomainError, pendingOf } from '@gateway/domain';
import { workloadForKey } from '../workload-key';

/** A workload sees only its own actions; money is reported as integer strings, labelled. */
@Injectable()
export class GetAction {
  constructor(
    @Inject(CatalogRepository) private readonly catalog: Pick<CatalogRepository, 'workloadByKeyHash'>,
    @Inject(ViewsRepository) private readonly views: Pick<ViewsRepository, 'action'>,
  ) {}

  async execute(credential: string | null, actionId: string) {
    const workload = await workloadForKey(this.catalog, credential);
    const view = /^[0-9a-f-]{36}$/i.test(actionId) ? await this.views.action(actionId) : null;
    if (!view || view.workloadId !== workload.id) throw new DomainError('not_found', `no action ${actionId} for this workload`);
    const r = view.reservation;
    return {
      action_id: view.actionId,
      workload_id: view.workloadId,
      status: view.status,
      status_reason: view.statusReason,
      model_alias: view.modelAlias,
      route_id: view.routeId,
      route_version: view.routeVersion,
      stream_mode: view.streamMode,
      requested_candidate_count: view.requestedCandidates,
      effective_candidate_count: view.effectiveCandidates,
      returned_candidate_count: view.returnedCandidates,
      output_ceiling_per_candidate: view.outputCeiling,
      created_at: view.createdAt.toISOString(),
      request_id: view.requestId,
      ...outcomes(view.outcomes),
      money_microusd: {
        reserved: r ? r.reservedMicrousd.toString() : '0',
        settled: r ? r.settledMicrousd.toString() : '0',
        unresolved: r ? r.unresolvedMicrousd.toString() : '0',
        released: r ? r.releasedMicrousd.toString() : '0',
        pending: r ? pendingOf(r).toString() : '0',
      },
      reservation_status: r?.status ?? null,
      price_revision: r?.priceRevisionId ?? null,
      winner_attempt_id: view.winnerAttemptId,
      attempts: view.attempts.map((a) => ({
        attempt_id: a.attemptId,
        attempt_no: a.attemptNo,
        role: a.role,
        route_id: a.routeId,
        route_version: a.routeVersion,
        winner: a.winner,
        deadline_outcome: a.deadlineOutcome,
        hold_microusd: a.holdMicrousd?.toString() ?? null,
        policy_revision_id: a.policyRevisionId,
        status: a.status,
        status_reason: a.statusReason,
        provider_request_id: a.providerRequestId,
        effective_candidate_count: a.effectiveCandidates,
        returned_candidate_count: a.returnedCandidates,
        candidates: a.candidateOutcomes,
        prompt_block_reason: a.promptBlockReason,
        input_tokens: a.inputTokens,
        output_tokens_total: a.outputTokensTotal,
        usage_source: a.usageSource,
        cost_microusd: a.costMicrousd?.toString() ?? null,
        ...outcomes(a.outcomes),
      })),
      open_reconciliation_cases: view.openCases.map((c) => ({
        case_id: c.caseId,
        reason: c.reason,
        exposure_microusd: c.exposureMicrousd.toString(),
      })),
    };
  }
}

/**
 * Three separate outcomes, never folded into one: what the user got (delivery), whether it was a
 * valid answer under the workload's acceptance policy, and where the money stands.
 */
function outcomes(o: OutcomesView) {
  return {
    delivery_outcome: o.deliveryOutcome,
    acceptance: o.acceptanceVerdict === null ? null : { verdict: o.acceptanceVerdict, reason: o.acceptanceReason },
    financial_state: o.financialState,
  };
}
