import { randomUUID } from 'node:crypto';
import type { AdmitInput } from '@gateway/db';
import { admissionDecisionEvent } from './events';

/**
 * One admission as AdmissionRepository.admit takes it: an action on route `r` reserving 1 000
 * micro-USD (100 output tokens), its decision event, no exception, no token quota. Tests that race
 * admissions override what they race on.
 */
export function admitInput(workloadId: string, over: Partial<AdmitInput> = {}): AdmitInput {
  const actionId = randomUUID();
  const now = new Date();
  const event = admissionDecisionEvent(workloadId, { timestamp: now.toISOString(), action_id: actionId });
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
