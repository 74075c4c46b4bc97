import { Topics } from '@gateway/contracts';
import { buildLedgerRow, experimentFieldsOf, usageSettledEvent } from './ledger.repository';

const copied = {
  cohort: 'hedged' as const,
  winner: true,
  experiment_id: 'exp-1',
  action_admitted_at: new Date('2026-12-03T08:00:00.000Z'),
  attempt_ended_at: new Date('2026-12-03T08:00:00.900Z'),
  acceptance_verdict: 'valid',
  candidate_outcomes: [{ index: 0, finish_reason: 'stop', outcome: 'ok' }],
  experiment_pause_id: 'pause-1' as string | null,
};

describe('the settled event’s experiment fields (issue 11)', () => {
  it('an experiment attempt: the experiment, admission, the attempt’s end, verdict, candidates (no index) and the pause it ran under', () => {
    expect(experimentFieldsOf(copied)).toEqual({
      experiment_id: 'exp-1',
      action_admitted_at: '2026-12-03T08:00:00.000Z',
      attempt_ended_at: '2026-12-03T08:00:00.900Z',
      action_acceptance_verdict: 'valid',
      attempt_candidates: [{ finish_reason: 'stop', outcome: 'ok' }],
      experiment_pause_id: 'pause-1',
    });
    expect(experimentFieldsOf({ ...copied, experiment_pause_id: null })).toMatchObject({ experiment_pause_id: null });
  });

  it('outside an experiment nothing is added', () => {
    expect(experimentFieldsOf({ ...copied, cohort: null, experiment_id: null, action_admitted_at: null })).toEqual({});
  });

  it('an attempt that never ended, had no verdict or recorded no candidates says null, never a guess', () => {
    expect(experimentFieldsOf({ ...copied, attempt_ended_at: null, acceptance_verdict: null, candidate_outcomes: null })).toMatchObject({
      attempt_ended_at: null,
      action_acceptance_verdict: null,
      attempt_candidates: null,
    });
    expect(experimentFieldsOf({ ...copied, acceptance_verdict: 'maybe', candidate_outcomes: { not: 'a list' } })).toMatchObject({
      action_acceptance_verdict: null,
      attempt_candidates: null,
    });
  });

  it('the event with them parses under the published schema, cohort included', () => {
    const row = buildLedgerRow({
      id: 'le-1',
      facts: {
        attemptId: 'att-1',
        actionId: 'act-1',
        attemptRole: 'hedge',
        requestId: 'req-1',
        workloadId: 'wl',
        environment: 'prod',
        routeId: 'r',
        routeVersion: 1,
        modelAlias: 'm',
        providerRequestId: 'p-1',
        requestedCandidates: null,
        effectiveCandidates: 1,
        returnedCandidates: 1,
        streamMode: 'none',
        attemptNo: 2,
        winner: true,
        attemptsTotal: 2,
        policyRevisionId: 'hp-1',
        deadlineOutcome: 'on_time',
      },
      evidence: { kind: 'attested', amountMicrousd: 7n, caseId: 'c-1', attestedBy: 'op', reason: 'export had no line' },
      priceRevisionId: 'p',
      settledAt: new Date('2026-12-03T08:00:05.000Z'),
    });
    const event = usageSettledEvent(row, '6f1c1a4e-2d7b-4c55-9a51-1f0d3c2b9e10', 'workload', copied);
    expect(Topics.usageSettled.schema.parse(event)).toMatchObject({
      cohort: 'hedged',
      winner: true,
      attempts_total: 2,
      experiment_id: 'exp-1',
      attempt_candidates: [{ finish_reason: 'stop', outcome: 'ok' }],
    });
  });
});
