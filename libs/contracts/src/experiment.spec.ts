import { Experiment, ExperimentPause, experimentPauseToWire, startedExperiment } from '@gateway/domain';
import {
  experimentFromRecordWire,
  experimentPauseFromWire,
  experimentPauseWire,
  experimentRecordWire,
  experimentToWire,
} from './experiment';

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

describe('the pauses on the experiment record (finance computes paused actions from the topic, the pauses from the record)', () => {
  const closed: ExperimentPause = {
    id: 'pause-1',
    experimentId: 'exp-1',
    rule: 'holdout_p95_above_ms',
    startedAt: new Date('2026-12-03T08:10:00.000Z'),
    endedAt: new Date('2026-12-03T08:10:13.250Z'),
    atStart: { holdoutP95Ms: 643, routeErrorPerMille: 0, samples: 20 },
    atEnd: { holdoutP95Ms: 221, routeErrorPerMille: 0, samples: 20 },
    thresholds: { holdoutP95AboveMs: 450, routeErrorPerMilleAbove: 1_000 },
    windowActions: 20,
  };
  const open: ExperimentPause = { ...closed, id: 'pause-2', rule: 'route_error_per_mille_above', endedAt: null, atEnd: null };

  it.each([
    ['closed', closed],
    ['open', open],
  ])('a %s pause round-trips exactly', (_name, p) => {
    const wire = JSON.parse(JSON.stringify(experimentPauseToWire(p))) as unknown;
    expect(experimentPauseFromWire('exp-1', experimentPauseWire.parse(wire))).toEqual(p);
  });

  it('a record with pauses parses; an unknown rule is refused', () => {
    const wire = { ...(overTheWire(running) as Record<string, unknown>), pauses: [experimentPauseToWire(closed)] };
    expect(experimentRecordWire.parse(JSON.parse(JSON.stringify(wire))).pauses).toHaveLength(1);
    const bad = { ...wire, pauses: [{ ...experimentPauseToWire(closed), reason: 'gut_feeling' }] };
    expect(experimentRecordWire.safeParse(bad).success).toBe(false);
  });
});
