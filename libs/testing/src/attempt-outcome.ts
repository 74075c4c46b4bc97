import { randomUUID } from 'node:crypto';
import { AttemptCompletedV1 } from '@gateway/contracts';
import type { AttemptOutcome, Database } from '@gateway/db';

/** An admitted action row (no reservation), ready for a dispatch claim. */
export async function insertAdmittedAction(db: Database, opts: { workloadId: string; deadline: Date }): Promise<string> {
  const id = randomUUID();
  const now = new Date();
  await db.prisma.action.create({
    data: {
      id,
      workloadId: opts.workloadId,
      environment: 'test',
      routeId: 'r',
      routeVersion: 1,
      modelAlias: 'r',
      apiKind: 'openai-chat',
      streamMode: 'none',
      requestedCandidates: null,
      effectiveCandidates: 1,
      outputCeiling: 10,
      inputTokensEstimate: 5,
      requestFingerprint: 'f',
      status: 'admitted',
      statusReason: 'test',
      deadlineAt: opts.deadline,
      dispatchDeadlineAt: opts.deadline,
      createdAt: now,
      updatedAt: now,
    },
  });
  return id;
}

/** A succeeded attempt (5 input, 7 output tokens) that answers its action, with a fresh event id. */
export function succeededOutcome(ids: { actionId: string; attemptId: string; workloadId: string; now: Date }): AttemptOutcome {
  const event: AttemptCompletedV1 = {
    event_id: randomUUID(),
    timestamp: ids.now.toISOString(),
    request_id: randomUUID(),
    action_id: ids.actionId,
    attempt_id: ids.attemptId,
    attempt_no: 1,
    attempt_role: 'primary',
    workload_id: ids.workloadId,
    environment: 'test',
    route_id: 'r',
    route_version: 1,
    model_alias: 'r',
    provider_request_id: 'req-1',
    requested_candidate_count: null,
    effective_candidate_count: 1,
    returned_candidate_count: 1,
    input_tokens: 5,
    output_tokens_total: 7,
    total_tokens: 12,
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
  };
  return {
    attemptId: ids.attemptId,
    actionId: ids.actionId,
    status: 'succeeded',
    statusReason: 'answered',
    providerRequestId: 'req-1',
    httpStatus: 200,
    returnedCandidates: 1,
    candidateOutcomes: event.candidates,
    promptBlockReason: null,
    usage: { inputTokens: 5, cachedInputTokens: 0, outputTokensTotal: 7, reasoningTokens: 0 },
    usageSource: 'provider_response',
    now: ids.now,
    event,
    delivery: { outcome: 'answered', verdict: 'valid', verdictReason: 'ok' },
    finishAction: { status: 'answered', reason: 'answered', returnedCandidates: 1, workloadId: ids.workloadId },
  };
}
