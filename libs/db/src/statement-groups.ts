import { isTransientDatabaseError } from './database';

/**
 * Group commit for the hot write paths: items that share a key and arrive while a statement for
 * that key runs, or in the same event-loop turn, wait and go together in the next statement (at
 * most `maxGroup` per statement): one round trip and one commit for the group. At most `lanes`
 * statements of one key run at once (default one: one after the other). With more, a further
 * statement starts only when a whole group is waiting: it is then already on its way, waiting on
 * the running statement's row locks, while that one commits. Different keys run side by side. `run` decides what a group is (one statement deciding each item in order,
 * as if alone in sequence) and answers per item, in order; when it throws, every item of that
 * group is rejected with the error — unless the group had several items and the error is not a
 * transient one (`splitWhen`, by default not `isTransientDatabaseError`: a connection lost, a
 * statement unanswered or cancelled, a server out of service, after which the statement may have
 * committed or would fail again alike): then each item runs again alone, in order, so an item the
 * server refuses for its data (a value out of range, a NUL in jsonb) fails alone instead of
 * failing everything that happened to share its statement. Every statement is one autocommit
 * call, so a refused one wrote nothing.
 */
export class StatementGroups<I, R> {
  private readonly keys = new Map<string, KeyState<I, R>>();

  constructor(
    private readonly run: (items: I[]) => Promise<R[]>,
    private readonly maxGroup: number,
    private readonly lanes = 1,
    private readonly splitWhen: (err: unknown) => boolean = (err) => !isTransientDatabaseError(err),
  ) {
    if (!Number.isInteger(maxGroup) || maxGroup < 1) throw new RangeError(`maxGroup must be a positive integer, not ${maxGroup}`);
    if (!Number.isInteger(lanes) || lanes < 1) throw new RangeError(`lanes must be a positive integer, not ${lanes}`);
  }

  /**
   * `signal`: the item is wanted no longer once it aborts (its client left). While it still waits
   * for a statement it is taken out and rejected with the signal's reason: it never reaches the
   * server. Once its statement has started, the signal changes nothing (the statement may commit).
   */
  submit(key: string, item: I, signal?: AbortSignal): Promise<R> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      let state = this.keys.get(key);
      if (!state) {
        state = { queue: [], running: 0, scheduled: false };
        this.keys.set(key, state);
      }
      const waiting: Waiting<I, R> = { item, resolve, reject };
      if (signal) {
        const s = state;
        const onAbort = () => {
          const at = s.queue.indexOf(waiting);
          if (at < 0) return;
          s.queue.splice(at, 1);
          reject(signal.reason);
          this.forgetIfIdle(key, s);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        waiting.taken = () => signal.removeEventListener('abort', onAbort);
      }
      state.queue.push(waiting);
      if (state.running > 0) {
        // a whole group waiting while a statement runs: a free lane takes it at once
        this.start(key, state);
      } else if (!state.scheduled) {
        // Items arriving in this event-loop turn join the first statement.
        state.scheduled = true;
        const s = state;
        setImmediate(() => {
          s.scheduled = false;
          this.start(key, s);
          this.forgetIfIdle(key, s);
        });
      }
    });
  }

  /**
   * Starts a group of the key's waiting items when none of its statements runs, and further ones
   * while a lane is free and a whole group (`maxGroup` items) is waiting: below that, waiting for
   * the running statement gathers a larger group, which costs less than another statement.
   */
  private start(key: string, state: KeyState<I, R>): void {
    while (state.queue.length > 0 && state.running < this.lanes && (state.running === 0 || state.queue.length >= this.maxGroup)) {
      const group = state.queue.splice(0, this.maxGroup);
      for (const w of group) w.taken?.();
      state.running += 1;
      void this.runGroup(group).finally(() => {
        state.running -= 1;
        this.start(key, state);
        this.forgetIfIdle(key, state);
      });
    }
  }

  private forgetIfIdle(key: string, state: KeyState<I, R>): void {
    if (state.queue.length === 0 && state.running === 0 && !state.scheduled && this.keys.get(key) === state) this.keys.delete(key);
  }

  private async runGroup(group: Array<Waiting<I, R>>): Promise<void> {
    let results: R[];
    try {
      results = await this.run(group.map((w) => w.item));
    } catch (err) {
      if (group.length > 1 && this.splitWhen(err)) return this.runAlone(group);
      for (const w of group) w.reject(err);
      return;
    }
    // A statement that ran (and may have committed) is never run again: a wrong count fails its group.
    if (results.length !== group.length) {
      const err = new Error(`a group of ${group.length} was answered with ${results.length} results`);
      for (const w of group) w.reject(err);
      return;
    }
    group.forEach((w, i) => w.resolve(results[i]));
  }

  /** Each item in a statement of its own, in order (the key's lane stays taken meanwhile). */
  private async runAlone(group: Array<Waiting<I, R>>): Promise<void> {
    for (const w of group) {
      try {
        const results = await this.run([w.item]);
        if (results.length !== 1) throw new Error(`an item run alone was answered with ${results.length} results`);
        w.resolve(results[0]);
      } catch (err) {
        w.reject(err);
      }
    }
  }
}

interface KeyState<I, R> {
  queue: Array<Waiting<I, R>>;
  /** statements of this key running now */
  running: number;
  /** a start is due at the next setImmediate (the items of this turn are still gathering) */
  scheduled: boolean;
}

interface Waiting<I, R> {
  item: I;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
  /** called when a statement takes the item: its abort listener goes */
  taken?: () => void;
}
