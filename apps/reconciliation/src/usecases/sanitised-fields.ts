import type { SanitisedFields } from '@gateway/contracts';
import type { AttemptFacts, ReconciliationActionView, ReconciliationAttemptView } from '@gateway/db';

/**
 * The DESIGN §8 field set for one attempt that has no usage yet, from the action and attempt rows
 * (which hold no content): the token fields are null, unknown, never zero. The request id is the
 * one admission stored on the action (the action id stands in for actions admitted before it was).
 */
export function sanitisedFields(action: ReconciliationActionView, attempt: ReconciliationAttemptView, now: Date): SanitisedFields {
  return {
    timestamp: now.toISOString(),
    request_id: action.requestId ?? action.id,
    action_id: action.id,
    attempt_id: attempt.id,
    attempt_role: attempt.role,
    workload_id: action.workloadId,
    environment: action.environment,
    route_id: attempt.routeId,
    route_version: attempt.routeVersion,
    model_alias: action.modelAlias,
    provider_request_id: attempt.providerRequestId,
    requested_candidate_count: action.requestedCandidates,
    effective_candidate_count: action.effectiveCandidates,
    returned_candidate_count: attempt.returnedCandidates,
    input_tokens: null,
    output_tokens_total: null,
    total_tokens: null,
    stream_mode: action.streamMode,
    usage_source: null,
    quota_scope: action.quotaScope ?? 'workload',
    policy_result: null,
    policy_reason: null,
  };
}

/** What the ledger row says about the attempt when reconciliation settles it. */
export function attemptFacts(
  action: ReconciliationActionView,
  attempt: ReconciliationAttemptView,
  providerRequestId: string | null,
): AttemptFacts {
  return {
    attemptId: attempt.id,
    actionId: action.id,
    attemptRole: attempt.role,
    requestId: action.requestId,
    workloadId: action.workloadId,
    environment: action.environment,
    routeId: attempt.routeId,
    routeVersion: attempt.routeVersion,
    modelAlias: action.modelAlias,
    providerRequestId,
    requestedCandidates: action.requestedCandidates,
    effectiveCandidates: action.effectiveCandidates,
    // The ledger's returned count is what the gateway saw in a response; an orphan saw none.
    returnedCandidates: attempt.returnedCandidates ?? 0,
    streamMode: action.streamMode,
    attemptNo: attempt.attemptNo,
    winner: attempt.winner,
    policyRevisionId: attempt.policyRevisionId,
  };
}
