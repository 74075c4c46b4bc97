import { Injectable } from '@nestjs/common';
import { LedgerQueryRepository } from '@gateway/db';
import { DomainError } from '@gateway/domain';

@Injectable()
export class QueryLedger {
  constructor(private readonly ledger: LedgerQueryRepository) {}

  async execute(q: { workloadId: string | null; actionId: string | null; limit: number }) {
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > 1000)
      throw new DomainError('invalid_request', 'limit must be an integer from 1 to 1000', 'limit');
    const rows = await this.ledger.list(q);
    return {
      entries: rows.map((r) => ({
        ledger_entry_id: r.id,
        attempt_id: r.attemptId,
        action_id: r.actionId,
        attempt_role: r.attemptRole,
        workload_id: r.workloadId,
        route_id: r.routeId,
        route_version: r.routeVersion,
        model_alias: r.modelAlias,
        provider_request_id: r.providerRequestId,
        requested_candidate_count: r.requestedCandidates,
        effective_candidate_count: r.effectiveCandidates,
        returned_candidate_count: r.returnedCandidates,
        input_tokens: r.inputTokens,
        cached_input_tokens: r.cachedInputTokens,
        output_tokens_total: r.outputTokensTotal,
        reasoning_tokens: r.reasoningTokens,
        total_tokens: r.totalTokens,
        usage_source: r.usageSource,
        price_revision: r.priceRevisionId,
        cost_microusd: r.costMicrousd.toString(),
        cost_microusd_by_category: {
          input: r.inputMicrousd.toString(),
          cached_input: r.cachedInputMicrousd.toString(),
          output: r.outputMicrousd.toString(),
          reasoning: r.reasoningMicrousd.toString(),
        },
        settled_at: r.settledAt.toISOString(),
      })),
    };
  }
}
