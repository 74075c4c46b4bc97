import { Experiment, startedExperiment } from '@gateway/domain';
import { experimentFromRecordWire, experimentRecordWire, experimentToWire } from './experiment';

const running: Experiment = startedExperiment(
  {
    id: 'exp-1',
    workloadId: 'wl-1',
    owner: 'team-a',
    hedgePolicyRevisionId: 'hp-1',
    holdoutShareBps: 5_000,
    usefulDeadlineMs: 2_500,
    acceptance: { nonEmptyContent: true, allowedFinishReasons: ['stop', 'STOP'], refusalsInvalid: true },
    samplePlan: { minActionsPerCohort: 100, maxUnresolvedShareBps: 0 },
    overheadMicrousdPerAttempt: 9_007_199_254_740_993n,
    pause: { holdoutP95AboveMs: 5_000, routeErrorPerMilleAbove: 200, windowActions: 100 },
    seed: 11,
    requestedBy: 'ana',
    approvedBy: 'ben',
    reason: 'does the hedge buy on-time answers?',
  },
  1_000_000n,
  new Date('2026-12-03T08:00:00.000Z'),
);

/** What a reader of the policy API gets: the record as JSON text. */
const overTheWire = (e: Experiment) => JSON.parse(JSON.stringify(experimentToWire(e))) as unknown;

describe('the experiment record read back from the policy API (finance consumer)', () => {
  it.each([
    ['running', running],
    [
      'stopped',
      { ...running, status: 'stopped' as const, stoppedAt: new Date('2026-12-03T09:00:00.000Z'), stoppedBy: 'ops', stopReason: 'done' },
    ],
  ])('a %s experiment round-trips exactly, money beyond 2^53 included', (_name, e) => {
    expect(experimentFromRecordWire(experimentRecordWire.parse(overTheWire(e)))).toEqual(e);
  });

  it('fields added later are ignored; a missing or mistyped one is refused', () => {
    const wire = overTheWire(running) as Record<string, unknown>;
    expect(experimentRecordWire.safeParse({ ...wire, pauses: [] }).success).toBe(true);
    const { workload_id: _w, ...noWorkload } = wire;
    expect(experimentRecordWire.safeParse(noWorkload).success).toBe(false);
    expect(experimentRecordWire.safeParse({ ...wire, approved_premium_microusd: 1.5 }).success).toBe(false);
    expect(experimentRecordWire.safeParse({ ...wire, status: 'paused' }).success).toBe(false);
  });
});
