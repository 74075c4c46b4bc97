import type { ExperimentPauseRepository } from '@gateway/db';
import type { Logger } from 'pino';

export type PauseStore = Pick<ExperimentPauseRepository, 'evaluate'>;

/**
 * Applies an experiment's pause rule after each holdout action's primary has been recorded
 * (issue 11): one window query and the transition, in the database, under the experiment row's
 * lock (`ExperimentPauseRepository.evaluate`), so every dispatch instance judges the same window
 * and two of them never open two pauses. Per instance, evaluations of one experiment are
 * coalesced: while one runs, further requests only ask for one more run after it, so a burst of
 * holdout answers costs a few queries, not one each, and the last answer is always judged.
 */
export class PauseEvaluator {
  private readonly pending = new Map<string, { again: boolean; done: Promise<void> }>();

  constructor(
    private readonly store: PauseStore,
    private readonly deps: {
      now: () => Date;
      newId: () => string;
      log: Logger;
      /** the experiment's open pause after an evaluation (null: none) */
      onState: (experimentId: string, pauseId: string | null, nowMs: number) => void;
    },
  ) {}

  /** Resolves when this request has been judged (by this run or the one after it); never rejects. */
  afterHoldout(experimentId: string): Promise<void> {
    const running = this.pending.get(experimentId);
    if (running) {
      running.again = true;
      return running.done;
    }
    const entry = { again: false, done: Promise.resolve() };
    this.pending.set(experimentId, entry);
    entry.done = this.loop(experimentId, entry);
    return entry.done;
  }

  private async loop(experimentId: string, entry: { again: boolean }): Promise<void> {
    try {
      do {
        entry.again = false;
        await this.evaluateOnce(experimentId);
      } while (entry.again);
    } finally {
      this.pending.delete(experimentId);
    }
  }

  private async evaluateOnce(experimentId: string): Promise<void> {
    const now = this.deps.now();
    try {
      const r = await this.store.evaluate(experimentId, now, this.deps.newId);
      this.deps.onState(experimentId, r.openPauseId, now.getTime());
      const d = r.decision;
      if (d && d.kind !== 'none') {
        const figures = d.kind === 'open' ? d.pause.atStart : d.pause.atEnd;
        this.deps.log.warn(
          { experiment_id: experimentId, pause_id: d.pause.id, rule: d.pause.rule, ...figures, thresholds: d.pause.thresholds },
          d.kind === 'open' ? 'experiment paused: the hedged cohort runs primary-only' : 'experiment pause ended: hedging resumes',
        );
      }
    } catch (err) {
      // the next holdout answer asks again; meanwhile the state read by actions is unchanged
      this.deps.log.error({ experiment_id: experimentId, error: (err as Error).message }, 'experiment pause not evaluated');
    }
  }
}
