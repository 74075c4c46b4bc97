import type { ReconciliationActionView, ReconciliationAttemptView } from '@gateway/db';
import { sanitisedFields } from './sanitised-fields';

describe('sanitisedFields', () => {
  const action: ReconciliationActionView = {
    id: 'a1',
    requestId: 'r1',
    workloadId: 'wl',
    environment: 'prod',
    routeId: 'rt',
    routeVersion: 1,
    modelAlias: 'std',
    streamMode: 'none',
    requestedCandidates: null,
    effectiveCandidates: 1,
    status: 'dispatched',
    deadlineAt: new Date(0),
    dispatchDeadlineAt: new Date(0),
  };
  const attempt: ReconciliationAttemptView = {
    id: 't1',
    actionId: 'a1',
    attemptNo: 1,
    role: 'primary',
    routeId: 'rt',
    routeVersion: 1,
    status: 'in_flight',
    providerRequestId: null,
    returnedCandidates: null,
    startedAt: new Date(0),
    holdMicrousd: null,
    winner: false,
    policyRevisionId: null,
    priceRevisionId: null,
  };

  it.each([
    [undefined, 'workload'],
    [null, 'workload'],
    ['workload,team:pay', 'workload,team:pay'],
  ])('quota scope recorded at admission %p → %p; usage unknown, never zero', (quotaScope, expected) => {
    const f = sanitisedFields({ ...action, quotaScope }, attempt, new Date(0));
    expect(f.quota_scope).toBe(expected);
    expect([f.input_tokens, f.output_tokens_total, f.total_tokens]).toEqual([null, null, null]);
  });
});
