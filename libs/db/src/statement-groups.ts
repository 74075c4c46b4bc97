/**
 * Group commit for the hot write paths: items that share a key and arrive while a statement for
 * that key runs, or in the same event-loop turn, wait and go together in the next statement (at
 * most `maxGroup` per statement): one round trip and one commit for the group. Statements of one
 * key run one after the other; different keys run side by side. `run` decides what a group is
 * (one statement deciding each item in order, as if alone in sequence) and answers per item, in
 * order; when it throws, every item of that group is rejected with the error.
 */
export class StatementGroups<I, R> {
  private readonly queues = new Map<string, Array<Waiting<I, R>>>();

  constructor(
    private readonly run: (items: I[]) => Promise<R[]>,
    private readonly maxGroup: number,
  ) {
    if (!Number.isInteger(maxGroup) || maxGroup < 1) throw new RangeError(`maxGroup must be a positive integer, not ${maxGroup}`);
  }

  submit(key: string, item: I): Promise<R> {
    return new Promise((resolve, reject) => {
      const waiting = this.queues.get(key);
      if (waiting) {
        waiting.push({ item, resolve, reject });
        return;
      }
      const queue: Array<Waiting<I, R>> = [{ item, resolve, reject }];
      this.queues.set(key, queue);
      // Items arriving in this event-loop turn join the first statement.
      setImmediate(() => void this.drain(key, queue));
    });
  }

  /** Runs the key's waiting items, a group per statement, until none are left. */
  private async drain(key: string, queue: Array<Waiting<I, R>>): Promise<void> {
    while (queue.length > 0) {
      const group = queue.splice(0, this.maxGroup);
      try {
        const results = await this.run(group.map((w) => w.item));
        if (results.length !== group.length) throw new Error(`a group of ${group.length} was answered with ${results.length} results`);
        group.forEach((w, i) => w.resolve(results[i]));
      } catch (err) {
        for (const w of group) w.reject(err);
      }
    }
    this.queues.delete(key);
  }
}

interface Waiting<I, R> {
  item: I;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}
