import { randomUUID } from 'node:crypto';
import type { AttemptOutcome, ClaimInput, Database } from '@gateway/db';
import { answeredAttemptEvent } from './events';

/** The primary's claim on route `r` (one candidate; its hold: the reservation's, no hedge policy). */
export function primaryClaim(actionId: string, attemptId: string, now = new Date()): ClaimInput {
  return {
    actionId,
    attemptId,
    attemptNo: 1,
    role: 'primary',
    routeId: 'r',
    routeVersion: 1,
    effectiveCandidates: 1,
    holdMicrousd: null,
    policyRevisionId: null,
    claimedBy: 'd',
    now,
  };
}

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
  const event = answeredAttemptEvent(
    { ...ids, routeId: 'r' },
    {
      timestamp: ids.now.toISOString(),
      model_alias: 'r',
      provider_request_id: 'req-1',
      input_tokens: 5,
      output_tokens_total: 7,
      total_tokens: 12,
    },
  );
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
