import { randomUUID } from 'node:crypto';
import { AdmissionDecisionV1, AttemptCompletedV1, DispatchReplyV1, PolicyChangedV1, Topics } from '@gateway/contracts';

/** A valid `gateway.policy.changed.v1` event: the small message bus tests send around. */
export function policyChangedEvent(entityId: string, actor = 'int-spec', change = 'test'): PolicyChangedV1 {
  return { event_id: randomUUID(), timestamp: new Date().toISOString(), entity: 'workload', entity_id: entityId, change, actor };
}

/** A dispatch reply carrying one whole provider response of one candidate (what admission decrypts). */
export function responseReply(body: unknown = { ok: true }): DispatchReplyV1 {
  return {
    kind: 'response',
    http_status: 200,
    body,
    attempt_id: null,
    provider_request_id: null,
    requested_candidates: null,
    effective_candidates: 1,
    returned_candidates: 1,
    candidates: [],
  };
}

/**
 * A validated attempt.completed event of a succeeded single-candidate primary attempt that ends its
 * action (100 input, 50 output tokens unless overridden), with a fresh event id.
 */
export function answeredAttemptEvent(
  ids: { workloadId: string; actionId: string; attemptId: string; routeId: string },
  over: Partial<AttemptCompletedV1> = {},
): AttemptCompletedV1 {
  return Topics.attemptCompleted.schema.parse({
    event_id: randomUUID(),
    timestamp: new Date().toISOString(),
    request_id: `req-${ids.actionId}`,
    action_id: ids.actionId,
    attempt_id: ids.attemptId,
    attempt_no: 1,
    attempt_role: 'primary',
    workload_id: ids.workloadId,
    environment: 'test',
    route_id: ids.routeId,
    route_version: 1,
    model_alias: `alias-${ids.routeId}`,
    provider_request_id: `chatcmpl-${ids.attemptId}`,
    requested_candidate_count: null,
    effective_candidate_count: 1,
    returned_candidate_count: 1,
    input_tokens: 100,
    output_tokens_total: 50,
    total_tokens: 150,
    cached_input_tokens: 0,
    reasoning_tokens: 0,
    output_includes_reasoning: true,
    stream_mode: 'none',
    usage_source: 'provider_response',
    quota_scope: 'workload',
    policy_result: null,
    policy_reason: null,
    outcome: 'succeeded',
    http_status: 200,
    candidates: [{ index: 0, finish_reason: 'stop', outcome: 'ok' }],
    prompt_block_reason: null,
    attempts_total: 1,
    action_final: true,
    ...over,
  });
}

/**
 * A validated admission decision: admitted on route `r` within policy, count omitted, 1 000
 * micro-USD reserved, fresh event, action and request ids unless overridden.
 */
export function admissionDecisionEvent(workloadId: string, over: Partial<AdmissionDecisionV1> = {}): AdmissionDecisionV1 {
  return Topics.admissionDecisions.schema.parse({
    event_id: randomUUID(),
    timestamp: new Date().toISOString(),
    request_id: randomUUID(),
    action_id: randomUUID(),
    attempt_id: null,
    attempt_role: null,
    workload_id: workloadId,
    environment: 'test',
    route_id: 'r',
    route_version: 1,
    model_alias: 'r',
    provider_request_id: null,
    requested_candidate_count: null,
    effective_candidate_count: 1,
    returned_candidate_count: null,
    input_tokens: null,
    output_tokens_total: null,
    total_tokens: null,
    stream_mode: 'none',
    usage_source: null,
    quota_scope: 'workload',
    policy_result: 'allow',
    policy_reason: 'within_policy',
    reserved_microusd: '1000',
    exception_id: null,
    ...over,
  });
}
