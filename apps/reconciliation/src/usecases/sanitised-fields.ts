import type { SanitisedFields } from '@gateway/contracts';
import type { ReconciliationActionView, ReconciliationAttemptView } from '@gateway/db';

export interface UsageEvidence {
  inputTokens: number;
  outputTokensTotal: number;
  usageSource: 'provider_export' | 'operator';
}

/**
 * The DESIGN §8 field set for one attempt, from the action and attempt rows (which hold no
 * content). The admission request id is not persisted, so the action id stands in for it.
 * Without evidence the token fields are null: unknown, never zero.
 */
export function sanitisedFields(
  action: ReconciliationActionView,
  attempt: ReconciliationAttemptView,
  now: Date,
  evidence: (UsageEvidence & { providerRequestId: string | null; returnedCandidates: number | null }) | null,
): SanitisedFields {
  return {
    timestamp: now.toISOString(),
    request_id: action.id,
    action_id: action.id,
    attempt_id: attempt.id,
    attempt_role: attempt.role,
    workload_id: action.workloadId,
    environment: action.environment,
    route_id: attempt.routeId,
    route_version: attempt.routeVersion,
    model_alias: action.modelAlias,
    provider_request_id: evidence?.providerRequestId ?? attempt.providerRequestId,
    requested_candidate_count: action.requestedCandidates,
    effective_candidate_count: action.effectiveCandidates,
    returned_candidate_count: evidence ? evidence.returnedCandidates : attempt.returnedCandidates,
    input_tokens: evidence ? evidence.inputTokens : null,
    output_tokens_total: evidence ? evidence.outputTokensTotal : null,
    total_tokens: evidence ? evidence.inputTokens + evidence.outputTokensTotal : null,
    stream_mode: action.streamMode,
    usage_source: evidence ? evidence.usageSource : null,
    quota_scope: 'workload',
    policy_result: null,
    policy_reason: null,
  };
}
