import fc from 'fast-check';
import type { PauseRules } from './experiment';
import {
  decidePause,
  measurePauseWindow,
  pauseMinSamples,
  pauseSampleOf,
  pauseTransition,
  type PauseSample,
  type PauseState,
} from './experiment-pause';

const rules: PauseRules = { holdoutP95AboveMs: 1000, routeErrorPerMilleAbove: 100, windowActions: 40 };
const fill = (n: number, latency: number, errors = 0): PauseSample[] =>
  Array.from({ length: n }, (_, i) => ({ primaryLatencyMs: latency, routeError: i < errors }));
const running: PauseState = { paused: false };
const pausedOnLatency: PauseState = { paused: true, rule: 'holdout_p95_above_ms', measured: 2000 };
const pausedOnErrors: PauseState = { paused: true, rule: 'route_error_per_mille_above', measured: 500 };

describe('experiment pause rule', () => {
  it('needs max(20, half the window) samples, capped at the window', () => {
    expect([1, 10, 20, 40, 41, 200].map(pauseMinSamples)).toEqual([1, 10, 20, 20, 21, 100]);
  });

  it.each<[string, PauseState, PauseSample[], string, string | null, number | null]>([
    ['too few samples: no start however slow', running, fill(19, 9000, 19), 'none', null, null],
    ['too few samples: a pause does not end', pausedOnLatency, fill(19, 10), 'none', null, null],
    ['at the latency threshold: no start', running, fill(40, 1000), 'none', null, null],
    ['above the latency threshold: start', running, fill(40, 1001), 'start', 'holdout_p95_above_ms', 1001],
    ['error rate above: start', running, fill(40, 10, 5), 'start', 'route_error_per_mille_above', 125],
    ['error rate at the threshold: no start', running, fill(40, 10, 4), 'none', null, null],
    ['both above: latency is named', running, fill(40, 5000, 40), 'start', 'holdout_p95_above_ms', 5000],
    ['paused, under the threshold but above 90 %: stays paused', pausedOnLatency, fill(40, 950), 'none', null, null],
    ['paused, at 90 %: ends', pausedOnLatency, fill(40, 900), 'end', 'holdout_p95_above_ms', 900],
    ['paused on latency, latency back but errors high: stays paused', pausedOnLatency, fill(40, 100, 10), 'none', null, null],
    ['paused on errors, both back: ends with the error rate', pausedOnErrors, fill(40, 100, 3), 'end', 'route_error_per_mille_above', 75],
  ])('%s', (_name, state, samples, kind, rule, measured) => {
    const t = pauseTransition(state, samples, rules);
    expect(t.kind).toBe(kind);
    if (t.kind !== 'none') {
      expect(t.rule).toBe(rule);
      expect(t.measured).toBe(measured);
    } else {
      expect(t.state).toBe(state);
    }
  });

  it('judges only the last windowActions samples', () => {
    const samples = [...fill(40, 9000, 40), ...fill(40, 10)];
    expect(measurePauseWindow(samples, 40)).toEqual({ holdoutP95Ms: 10, routeErrorPerMille: 0, samples: 40 });
    expect(pauseTransition(running, samples, rules).kind).toBe('none');
  });

  it('p95 is nearest rank: 2 slow of 40 do not pause, 3 do', () => {
    const two = [...fill(38, 100), ...fill(2, 5000)];
    const three = [...fill(37, 100), ...fill(3, 5000)];
    expect(pauseTransition(running, two, rules).kind).toBe('none');
    expect(pauseTransition(running, three, rules).kind).toBe('start');
  });

  it('refuses a window that is not a positive integer', () => {
    expect(() => measurePauseWindow([], 0)).toThrow(RangeError);
    expect(() => measurePauseWindow([], 1.5)).toThrow(RangeError);
  });

  it('the error rate is floor(errors·1000/n) and never above 1000', () => {
    fc.assert(
      fc.property(fc.integer({ min: 20, max: 200 }), fc.nat(), (n, e) => {
        const errors = e % (n + 1);
        const m = measurePauseWindow(fill(n, 1, errors), n);
        expect(m.routeErrorPerMille).toBe(Math.floor((errors * 1000) / n));
        expect(m.routeErrorPerMille! * n).toBeLessThanOrEqual(errors * 1000);
      }),
    );
  });

  it('a pause never starts and ends on the same window (hysteresis)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ primaryLatencyMs: fc.integer({ min: 0, max: 3000 }), routeError: fc.boolean() }), {
          minLength: 20,
          maxLength: 60,
        }),
        (samples) => {
          const start = pauseTransition(running, samples, rules);
          if (start.kind !== 'start') return;
          expect(pauseTransition({ paused: true, rule: start.rule, measured: start.measured }, samples, rules).kind).toBe('none');
        },
      ),
    );
  });
});

describe('pauseSampleOf: a recorded holdout primary', () => {
  const at = (ms: number) => new Date(Date.UTC(2026, 11, 3, 8) + ms);
  it.each<[string, string, number | null, boolean]>([
    ['an answer', 'succeeded', 200, false],
    ['a 4xx is the request, not the route', 'failed', 400, false],
    ['429', 'failed', 429, true],
    ['503', 'failed', 503, true],
    ['no answer (timeout, connection)', 'usage_missing', null, true],
    ['cancelled by the gateway', 'cancelled', null, false],
  ])('%s', (_name, status, httpStatus, routeError) => {
    expect(pauseSampleOf({ startedAt: at(0), endedAt: at(1234), status, httpStatus })).toEqual({ primaryLatencyMs: 1234, routeError });
  });
});

describe('decidePause: the stored state and the rule', () => {
  const now = new Date('2026-12-03T08:00:00.000Z');
  const later = new Date('2026-12-03T08:01:00.000Z');
  const ids = () => 'pause-1';
  const base = { experimentId: 'exp-1', rules, newId: ids };

  it('opens a pause with the figures, thresholds and window; closes it with the end figures', () => {
    const opened = decidePause({ ...base, open: null, samples: fill(40, 1500, 2), now });
    expect(opened).toEqual({
      kind: 'open',
      pause: {
        id: 'pause-1',
        experimentId: 'exp-1',
        rule: 'holdout_p95_above_ms',
        startedAt: now,
        endedAt: null,
        atStart: { holdoutP95Ms: 1500, routeErrorPerMille: 50, samples: 40 },
        atEnd: null,
        thresholds: { holdoutP95AboveMs: 1000, routeErrorPerMilleAbove: 100 },
        windowActions: 40,
      },
    });
    if (opened.kind !== 'open') throw new Error('unreachable');
    // still slow: stays open; at 90 % of both: closes
    expect(decidePause({ ...base, open: opened.pause, samples: fill(40, 950), now: later }).kind).toBe('none');
    expect(decidePause({ ...base, open: opened.pause, samples: fill(40, 900), now: later })).toEqual({
      kind: 'close',
      pause: { ...opened.pause, endedAt: later, atEnd: { holdoutP95Ms: 900, routeErrorPerMille: 0, samples: 40 } },
    });
  });

  it('an open pause is never opened twice, and nothing happens on too few samples', () => {
    const open = decidePause({ ...base, open: null, samples: fill(40, 1500), now });
    if (open.kind !== 'open') throw new Error('unreachable');
    expect(decidePause({ ...base, open: open.pause, samples: fill(40, 5000, 40), now }).kind).toBe('none');
    expect(decidePause({ ...base, open: null, samples: fill(19, 5000, 19), now }).kind).toBe('none');
  });
});
