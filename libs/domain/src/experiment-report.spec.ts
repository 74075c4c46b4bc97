import { Experiment, startedExperiment } from './experiment';
import {
  experimentActionOf,
  experimentReport,
  experimentReportCsv,
  experimentReportToWire,
  ExperimentReportRow,
} from './experiment-report';
import type { ExperimentPause } from './experiment-pause';

const T0 = new Date('2026-12-02T12:00:00.000Z');

function experiment(over: Partial<Experiment> = {}): Experiment {
  return {
    ...startedExperiment(
      {
        id: 'exp-1',
        workloadId: 'wl-1',
        owner: 'team-a',
        hedgePolicyRevisionId: 'hp-1',
        holdoutShareBps: 5_000,
        usefulDeadlineMs: 2_000,
        acceptance: { nonEmptyContent: true, allowedFinishReasons: ['stop'], refusalsInvalid: true },
        samplePlan: { minActionsPerCohort: 100, maxUnresolvedShareBps: 0 },
        overheadMicrousdPerAttempt: 10n,
        pause: { holdoutP95AboveMs: 5_000, routeErrorPerMilleAbove: 200, windowActions: 100 },
        seed: 7,
        requestedBy: 'ana',
        approvedBy: 'ben',
        reason: 'test',
      },
      100_000n,
      T0,
    ),
    ...over,
  };
}

let n = 0;
function row(over: Partial<ExperimentReportRow>): ExperimentReportRow {
  return {
    actionId: `a-${++n}`,
    cohort: 'hedged',
    admittedAt: T0,
    answeredAt: new Date(T0.getTime() + 500),
    acceptanceVerdict: 'valid',
    attempts: 1,
    settledMicrousd: 1_000n,
    unresolvedMicrousd: 0n,
    ...over,
  };
}

const times = (k: number, r: Partial<ExperimentReportRow>) => Array.from({ length: k }, () => row(r));
const late = { answeredAt: new Date(T0.getTime() + 2_001) };

describe('experimentActionOf: what one action counts for', () => {
  const e = experiment();
  it('on time at exactly the useful deadline, valid: one on-time answer; cost + overhead × attempts', () => {
    expect(experimentActionOf(row({ answeredAt: new Date(T0.getTime() + 2_000), attempts: 3 }), e)).toEqual({
      cohort: 'hedged',
      onTimeValid: true,
      settledMicrousd: 1_030n,
      unresolvedMicrousd: 0n,
    });
  });
  it('late, invalid or unanswered: no on-time answer, the cost still counts; unresolved stays apart', () => {
    expect(experimentActionOf(row(late), e).onTimeValid).toBe(false);
    expect(experimentActionOf(row({ acceptanceVerdict: 'invalid' }), e).onTimeValid).toBe(false);
    const none = experimentActionOf(row({ answeredAt: null, acceptanceVerdict: null, settledMicrousd: 0n, unresolvedMicrousd: 400n }), e);
    expect(none).toEqual({ cohort: 'hedged', onTimeValid: false, settledMicrousd: 10n, unresolvedMicrousd: 400n });
  });
  it.each([
    ['a listed finish reason', [{ finishReason: 'stop', outcome: 'ok' }], true],
    [
      'one good candidate among others',
      [
        { finishReason: 'length', outcome: 'truncated' },
        { finishReason: 'stop', outcome: 'ok' },
      ],
      true,
    ],
    ['a finish reason the experiment does not list', [{ finishReason: 'length', outcome: 'truncated' }], false],
    ['empty content', [{ finishReason: 'stop', outcome: 'empty' }], false],
    ['a refusal (filtered)', [{ finishReason: 'stop', outcome: 'filtered' }], false],
    ['a blocked prompt', [{ finishReason: null, outcome: 'blocked' }], false],
    ['no candidates recorded: the workload verdict alone', null, true],
  ])("the experiment's own acceptance: %s", (_what, winnerCandidates, valid) => {
    expect(experimentActionOf(row({ winnerCandidates }), e).onTimeValid).toBe(valid);
  });

  it('the workload verdict invalid: never counted, whatever the candidates', () => {
    expect(
      experimentActionOf(row({ acceptanceVerdict: 'invalid', winnerCandidates: [{ finishReason: 'stop', outcome: 'ok' }] }), e).onTimeValid,
    ).toBe(false);
  });

  it('an ineligible action is refused (it belongs to neither cohort)', () => {
    expect(() => experimentActionOf(row({ cohort: 'ineligible' }), e)).toThrow(RangeError);
  });
});

describe('experimentReport: figures computed by hand', () => {
  // holdout: 100 actions, 60 on time, 1,000 + 10 overhead each → C0 = 101,000
  // hedged: 100 actions, 80 on time (10 of the rest late, 10 invalid), 2 attempts × (750) + 2 × 10 → 1,520 each → Ch = 152,000
  // ICER = (152,000·100 − 101,000·100) / (80·100 − 60·100) = 5,100,000 / 2,000 = 2,550 micro-USD
  const rows = [
    ...times(60, { cohort: 'holdout' }),
    ...times(40, { cohort: 'holdout', ...late }),
    ...times(80, { attempts: 2, settledMicrousd: 1_500n }),
    ...times(10, { attempts: 2, settledMicrousd: 1_500n, ...late }),
    ...times(10, { attempts: 2, settledMicrousd: 1_500n, acceptanceVerdict: 'invalid' }),
    ...times(7, { cohort: 'ineligible', settledMicrousd: 99_999n }),
  ];

  it('per cohort, between cohorts, and the verdict', () => {
    const r = experimentReport(experiment(), rows);
    expect(r.ineligibleActions).toBe(7);
    const c = r.comparison;
    expect(c.holdout).toMatchObject({ actions: 100, onTimeValid: 60, settledMicrousd: 101_000n, costPerOnTimeMicrousd: 1_684n });
    expect(c.hedged).toMatchObject({ actions: 100, onTimeValid: 80, settledMicrousd: 152_000n, costPerActionMicrousd: 1_520n });
    expect(c.rateDifference?.estimate).toBeCloseTo(0.2, 12);
    expect(c.incrementalCost?.estimate).toEqual({ kind: 'finite', microusd: 2_550n });
    expect(c.rateDifference!.interval.low).toBeGreaterThan(0);
    expect(c.result).toEqual({ verdict: 'established' });
    expect(c.resamples).toBe(2_000);
    expect(c.seed).toBe(7);
  });

  it('the same rows give the same report (seeded); the wire form carries money as strings', () => {
    const a = experimentReportToWire(experimentReport(experiment(), rows));
    const b = experimentReportToWire(experimentReport(experiment(), [...rows].reverse()));
    expect(a.on_time_rate_difference).toEqual(experimentReportToWire(experimentReport(experiment(), rows)).on_time_rate_difference);
    expect(a.cohorts).toEqual(b.cohorts);
    expect(a.cohorts.hedged).toEqual({
      eligible_actions: 100,
      on_time_valid_answers: 80,
      on_time_rate: 0.8,
      settled_microusd: '152000',
      unresolved_exposure_microusd: '0',
      cost_per_action_microusd: '1520',
      cost_per_on_time_answer_microusd: '1900',
    });
    expect(a.incremental_cost_per_on_time_answer_microusd?.estimate).toBe('2550');
    expect(a.verdict).toBe('established');
    expect(a.verdict_reason).toBeNull();
  });

  it('CSV: one row per cohort, the metrics with their interval, the verdict', () => {
    const w = experimentReportToWire(experimentReport(experiment(), rows));
    const lines = experimentReportCsv(w).trimEnd().split('\n');
    expect(lines[0]).toBe(
      'cohort,eligible_actions,on_time_valid_answers,on_time_rate,settled_microusd,unresolved_exposure_microusd,cost_per_action_microusd,cost_per_on_time_answer_microusd',
    );
    expect(lines[1]).toBe('hedged,100,80,0.8,152000,0,1520,1900');
    expect(lines[2]).toBe('holdout,100,60,0.6,101000,0,1010,1684');
    const icer = w.incremental_cost_per_on_time_answer_microusd!;
    expect(lines).toContain(`incremental_cost_per_on_time_answer_microusd,2550,${icer.interval_95[0]},${icer.interval_95[1]}`);
    expect(lines[lines.indexOf('verdict,reason') + 1]).toBe('established,');
  });

  it('pauses: listed with their figures; actions run paused counted per cohort, still in their cohort', () => {
    const pause: ExperimentPause = {
      id: 'p-1',
      experimentId: 'exp-1',
      rule: 'holdout_p95_above_ms',
      startedAt: new Date(T0.getTime() + 60_000),
      endedAt: new Date(T0.getTime() + 120_000),
      atStart: { holdoutP95Ms: 6_100, routeErrorPerMille: 0, samples: 100 },
      atEnd: { holdoutP95Ms: 4_400, routeErrorPerMille: 10, samples: 100 },
      thresholds: { holdoutP95AboveMs: 5_000, routeErrorPerMilleAbove: 200 },
      windowActions: 100,
    };
    const open: ExperimentPause = { ...pause, id: 'p-2', rule: 'route_error_per_mille_above', endedAt: null, atEnd: null };
    const paused = rows.map((r, i) => (i % 10 === 0 ? { ...r, ranPaused: true } : r));
    const r = experimentReport(experiment(), paused, [pause, open]);
    // every tenth row runs paused: rows 0–99 are holdout, 100–199 hedged, 200 is ineligible (not counted)
    expect(r.pausedActions).toEqual({ holdout: 10, hedged: 10 });
    // intention to treat: a paused action counts in its assigned cohort, so the figures are unchanged
    expect(r.comparison.hedged).toEqual(experimentReport(experiment(), rows).comparison.hedged);
    const w = experimentReportToWire(r);
    expect(w.paused_actions).toEqual({ hedged: 10, holdout: 10 });
    expect(w.pauses[0]).toEqual({
      id: 'p-1',
      started_at: '2026-12-02T12:01:00.000Z',
      ended_at: '2026-12-02T12:02:00.000Z',
      reason: 'holdout_p95_above_ms',
      at_start: { holdout_p95_ms: 6_100, route_error_per_mille: 0, samples: 100 },
      at_end: { holdout_p95_ms: 4_400, route_error_per_mille: 10, samples: 100 },
      thresholds: { holdout_p95_above_ms: 5_000, route_error_per_mille_above: 200 },
      window_actions: 100,
    });
    expect(w.pauses[1]).toMatchObject({ id: 'p-2', ended_at: null, at_end: null, reason: 'route_error_per_mille_above' });
    const lines = experimentReportCsv(w).trimEnd().split('\n');
    const at = lines.indexOf('cohort,actions_run_paused');
    expect(lines.slice(at + 1, at + 3)).toEqual(['hedged,10', 'holdout,10']);
    expect(lines).toContain(
      'p-1,2026-12-02T12:01:00.000Z,2026-12-02T12:02:00.000Z,holdout_p95_above_ms,6100,0,100,4400,10,100,5000,200,100',
    );
    expect(lines[lines.length - 1]).toBe('p-2,2026-12-02T12:01:00.000Z,,route_error_per_mille_above,6100,0,100,,,,5000,200,100');
  });

  it('no pauses: an empty list and no actions run paused', () => {
    const w = experimentReportToWire(experimentReport(experiment(), rows));
    expect(w.pauses).toEqual([]);
    expect(w.paused_actions).toEqual({ hedged: 0, holdout: 0 });
  });

  it('no improvement: not established; unresolved exposure keeps it pending and is never cost', () => {
    const same = [...times(100, { cohort: 'holdout' }), ...times(100, { attempts: 2, settledMicrousd: 1_500n })];
    const r = experimentReport(experiment(), same);
    expect(r.comparison.incrementalCost?.estimate).toEqual({ kind: 'unbounded' });
    expect(r.comparison.result).toEqual({ verdict: 'not_established', reason: 'no_improvement' });
    const open = experimentReport(experiment(), [...same, row({ unresolvedMicrousd: 500n, settledMicrousd: 0n })]);
    expect(open.comparison.hedged.settledMicrousd).toBe(100n * 1_520n + 10n);
    expect(open.comparison.hedged.unresolvedMicrousd).toBe(500n);
    expect(open.comparison.result).toEqual({ verdict: 'pending', reason: 'exposure_unresolved' });
  });

  it('below the sample plan: pending', () => {
    const r = experimentReport(experiment(), [...times(99, { cohort: 'holdout' }), ...times(150, {})]);
    expect(r.comparison.result).toEqual({ verdict: 'pending', reason: 'sample_plan_not_met' });
  });
});
