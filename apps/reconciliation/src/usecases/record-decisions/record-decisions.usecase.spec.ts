import type { AdmissionDecisionV1 } from '@gateway/contracts';
import { admissionDecisionEvent } from '@gateway/testing';
import type { DecisionFact, Tx } from '@gateway/db';
import { decisionFact, RecordDecisions } from './record-decisions.usecase';

function decision(over: Partial<AdmissionDecisionV1> = {}): AdmissionDecisionV1 {
  return admissionDecisionEvent('wl-a', { route_id: 'route-1', requested_candidate_count: 3, effective_candidate_count: 3, ...over });
}

describe('RecordDecisions', () => {
  it('adds each event once: a redelivered batch adds nothing', async () => {
    const seen = new Set<string>();
    const added: DecisionFact[] = [];
    const processed = {
      transaction: <T>(fn: (tx: Tx) => Promise<T>) => fn({} as Tx),
      recordMany: async (_tx: Tx, _c: string, eventIds: readonly string[]) => {
        const fresh = new Set(eventIds.filter((id) => !seen.has(id)));
        for (const id of fresh) seen.add(id);
        return fresh;
      },
    };
    const record = new RecordDecisions(processed, { addDecisions: async (_tx, facts) => void added.push(...facts) });
    const batch = [decision(), decision({ requested_candidate_count: null, effective_candidate_count: 1 })];
    expect(await record.execute(batch)).toBe(2);
    expect(await record.execute(batch)).toBe(0);
    expect(added.map((f) => f.requested)).toEqual([3, null]);
  });

  it('maps refusals to their code, an odd reason to `unknown`, and skips decisions naming no workload', () => {
    expect(decisionFact(decision({ policy_result: 'deny', policy_reason: 'candidate_count_exceeds_policy' }))).toMatchObject({
      admitted: false,
      reason: 'candidate_count_exceeds_policy',
    });
    expect(decisionFact(decision({ policy_result: 'deny', policy_reason: 'Some Text' }))?.reason).toBe('unknown');
    expect(decisionFact(decision({ workload_id: null }))).toBeNull();
    expect(decisionFact(decision({ route_id: null }))?.routeId).toBe('');
  });
});
