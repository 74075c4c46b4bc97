import { Topics, UsageSettledV1 } from '@gateway/contracts';
import { ExperimentReportRow } from '@gateway/domain';
import { experimentAttemptOf, experimentRowsOf } from './experiment-rows';
import { settledEvent } from './settled-event.fixture';

const T0 = '2026-12-03T08:00:00.000Z';
const at = (ms: number) => new Date(Date.parse(T0) + ms).toISOString();
let seq = 0;

/** A settled event of an experiment attempt, as settlement publishes it. */
const settled = (over: Partial<UsageSettledV1>): UsageSettledV1 =>
  settledEvent({
    event_id: `6f1c1a4e-2d7b-4c55-9a51-${String((seq += 1)).padStart(12, '0')}`,
    action_id: 'act',
    attempt_id: 'att',
    cost_microusd: '100',
    cost_microusd_by_category: { input: '10', cached_input: '0', output: '90', reasoning: '0' },
    attempt_no: 1,
    winner: false,
    attempts_total: 1,
    cohort: 'hedged',
    experiment_id: 'exp-1',
    action_admitted_at: T0,
    attempt_ended_at: at(1_000),
    action_acceptance_verdict: 'valid',
    attempt_candidates: [{ finish_reason: 'stop', outcome: 'ok' }],
    ...over,
  });

describe('experimentAttemptOf', () => {
  it('keeps the experiment facts of an experiment attempt, money exact', () => {
    expect(experimentAttemptOf(settled({ cost_microusd: '9007199254740993', winner: true }))).toEqual({
      attemptId: 'att',
      eventId: expect.any(String),
      experimentId: 'exp-1',
      actionId: 'act',
      cohort: 'hedged',
      winner: true,
      attemptsTotal: 1,
      admittedAt: new Date(T0),
      endedAt: new Date(at(1_000)),
      acceptanceVerdict: 'valid',
      candidates: [{ finish_reason: 'stop', outcome: 'ok' }],
      costMicrousd: 9007199254740993n,
      pauseId: null,
    });
    expect(experimentAttemptOf(settled({ experiment_pause_id: 'pause-1' }))?.pauseId).toBe('pause-1');
  });

  it('is null outside an experiment, and for events before the fields existed', () => {
    const { experiment_id: _e, action_admitted_at: _a, ...before } = settled({});
    expect(experimentAttemptOf(Topics.usageSettled.schema.parse(before))).toBeNull();
    expect(experimentAttemptOf(settled({ experiment_id: undefined, action_admitted_at: undefined, cohort: null }))).toBeNull();
  });
});

describe('experimentRowsOf', () => {
  it('one row per action: the winner decides the answer, every settled attempt adds cost and counts', () => {
    const events = [
      // a1 hedged: the primary lost (its end is later), the hedge won on time
      settled({ action_id: 'a1', attempt_id: 'a1-1', attempts_total: 2, attempt_ended_at: at(4_000), attempt_candidates: [] }),
      settled({
        action_id: 'a1',
        attempt_id: 'a1-2',
        attempt_no: 2,
        attempt_role: 'hedge',
        winner: true,
        attempts_total: 2,
        cost_microusd: '120',
        attempt_ended_at: at(900),
      }),
      // a2 holdout: one attempt, answered after 3 s, truncated
      settled({
        action_id: 'a2',
        attempt_id: 'a2-1',
        cohort: 'holdout',
        winner: true,
        attempt_ended_at: at(3_000),
        attempt_candidates: [{ finish_reason: 'length', outcome: 'truncated' }],
      }),
      // a3 hedged: the primary failed without an answer; its retry is not settled yet
      settled({
        action_id: 'a3',
        attempt_id: 'a3-1',
        attempts_total: 2,
        action_acceptance_verdict: 'invalid',
        attempt_candidates: null,
        cost_microusd: '0',
      }),
    ];
    const facts = events.map((e) => experimentAttemptOf(e)!);
    const expected: ExperimentReportRow[] = [
      {
        actionId: 'a1',
        cohort: 'hedged',
        admittedAt: new Date(T0),
        answeredAt: new Date(at(900)),
        acceptanceVerdict: 'valid',
        winnerCandidates: [{ finishReason: 'stop', outcome: 'ok' }],
        attempts: 2,
        settledMicrousd: 220n,
        unresolvedMicrousd: 0n,
        ranPaused: false,
      },
      {
        actionId: 'a2',
        cohort: 'holdout',
        admittedAt: new Date(T0),
        answeredAt: new Date(at(3_000)),
        acceptanceVerdict: 'valid',
        winnerCandidates: [{ finishReason: 'length', outcome: 'truncated' }],
        attempts: 1,
        settledMicrousd: 100n,
        unresolvedMicrousd: 0n,
        ranPaused: false,
      },
      {
        actionId: 'a3',
        cohort: 'hedged',
        admittedAt: new Date(T0),
        answeredAt: null,
        acceptanceVerdict: null,
        winnerCandidates: null,
        attempts: 1,
        settledMicrousd: 0n,
        unresolvedMicrousd: 0n,
        ranPaused: false,
      },
    ];
    // arrival order does not matter: actions sorted by id, as the gateway's query orders them
    const result = experimentRowsOf([...facts].reverse());
    expect(result.rows).toEqual(expected);
    expect(result.coverage).toEqual({ actions: 3, settled_attempts: 4, attempts_not_yet_settled: 1 });
  });

  it('an action ran paused when one of its settled attempts was dispatched under a pause (as the gateway counts it)', () => {
    const facts = [
      settled({ action_id: 'p1', attempt_id: 'p1-1', winner: true, experiment_pause_id: 'pause-1' }),
      settled({ action_id: 'n1', attempt_id: 'n1-1', winner: true, experiment_pause_id: null }),
      settled({ action_id: 'o1', attempt_id: 'o1-1', winner: true }),
    ].map((e) => experimentAttemptOf(e)!);
    expect(experimentRowsOf(facts).rows.map((r) => [r.actionId, r.ranPaused])).toEqual([
      ['n1', false],
      ['o1', false],
      ['p1', true],
    ]);
  });

  it('no facts, no rows', () => {
    expect(experimentRowsOf([])).toEqual({ rows: [], coverage: { actions: 0, settled_attempts: 0, attempts_not_yet_settled: 0 } });
  });
});
