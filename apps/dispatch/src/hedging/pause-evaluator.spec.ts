import pino from 'pino';
import type { PauseEvaluation } from '@gateway/db';
import { PauseEvaluator, PauseStore } from './pause-evaluator';

describe('PauseEvaluator: one evaluation at a time per experiment, the last request always judged', () => {
  function setup(fail = false) {
    const calls: string[] = [];
    const releases: Array<() => void> = [];
    const states: Array<[string, string | null]> = [];
    const store: PauseStore = {
      evaluate: (experimentId) => {
        const n = calls.push(experimentId);
        return new Promise<PauseEvaluation>((resolve, reject) => {
          releases.push(() => (fail ? reject(new Error('db down')) : resolve({ decision: null, openPauseId: `open-${n}` })));
        });
      },
    };
    const evaluator = new PauseEvaluator(store, {
      now: () => new Date(0),
      newId: () => 'id',
      log: pino({ level: 'silent' }),
      onState: (id, pauseId) => states.push([id, pauseId]),
    });
    const tick = () => new Promise((r) => setImmediate(r));
    return { evaluator, calls, releases, states, tick };
  }

  it('a burst during one run asks for exactly one more run; other experiments run on their own', async () => {
    const { evaluator, calls, releases, states, tick } = setup();
    const first = evaluator.afterHoldout('e1');
    const burst = [evaluator.afterHoldout('e1'), evaluator.afterHoldout('e1'), evaluator.afterHoldout('e1')];
    const other = evaluator.afterHoldout('e2');
    expect(calls).toEqual(['e1', 'e2']);
    releases.shift()!();
    await tick();
    expect(calls).toEqual(['e1', 'e2', 'e1']);
    releases.shift()!();
    releases.shift()!();
    await Promise.all([first, ...burst, other]);
    expect(calls).toEqual(['e1', 'e2', 'e1']);
    expect(states).toEqual([
      ['e1', 'open-1'],
      ['e2', 'open-2'],
      ['e1', 'open-3'],
    ]);
    // idle again: the next request runs at once
    const next = evaluator.afterHoldout('e1');
    expect(calls).toHaveLength(4);
    releases.shift()!();
    await next;
  });

  it('a failed evaluation is logged, never thrown, and leaves the state alone', async () => {
    const { evaluator, releases, states } = setup(true);
    const p = evaluator.afterHoldout('e1');
    releases.shift()!();
    await expect(p).resolves.toBeUndefined();
    expect(states).toEqual([]);
  });
});
