import { randomUUID } from 'node:crypto';
import type { AdmissionDecisionV1 } from '@gateway/contracts';
import type { AdmitInput } from '@gateway/db';

/**
 * One admission as AdmissionRepository.admit takes it: an action on route `r` reserving 1 000
 * micro-USD (100 output tokens), its decision event, no exception, no token quota. Tests that race
 * admissions override what they race on.
 */
export function admitInput(workloadId: string, over: Partial<AdmitInput> = {}): AdmitInput {
  const actionId = randomUUID();
  const now = new Date();
  const event: AdmissionDecisionV1 = {
    event_id: randomUUID(),
    timestamp: now.toISOString(),
    request_id: randomUUID(),
    action_id: actionId,
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
  };
  return {
    now,
    action: {
      id: actionId,
      workloadId,
      environment: 'test',
      routeId: 'r',
      routeVersion: 1,
      modelAlias: 'r',
      apiKind: 'openai-chat',
      streamMode: 'none',
      requestedCandidates: null,
      effectiveCandidates: 1,
      outputCeiling: 100,
      inputTokensEstimate: 10,
      exceptionId: null,
      idempotencyKey: null,
      requestFingerprint: 'f',
      deadlineAt: new Date(now.getTime() + 10000),
      dispatchDeadlineAt: new Date(now.getTime() + 12000),
    },
    reservation: { id: randomUUID(), reservedOutputTokens: 100, reservedMicrousd: 1000n, priceRevisionId: 'p' },
    workloadBudget: { budgetMicrousd: 10_500n, periodStart: new Date('2026-11-01T00:00:00Z') },
    exceptionBudget: null,
    concurrency: { scope: 'workload', scopeId: workloadId, maxInFlight: 1000 },
    tokenRate: null,
    decisionEvent: event,
    ...over,
  };
}
