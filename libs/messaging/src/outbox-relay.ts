import { BusLogger, RawMessage } from './kafka-bus';

export interface OutboxRow {
  id: bigint;
  topic: string;
  key: string;
  payload: unknown;
}

/** Implemented in libs/db: lock a batch of unpublished rows, run `publish`, mark them sent. */
export interface OutboxStore {
  drainBatch(limit: number, publish: (rows: OutboxRow[]) => Promise<void>): Promise<number>;
  markPublished(ids: bigint[]): Promise<void>;
}

export interface OutboxPublisher {
  publishRaw(topicName: string, messages: RawMessage[]): Promise<void>;
}

/**
 * Publishes outbox rows. `publishCommitted` sends the rows a transaction just committed, at once,
 * and marks them published in batches; the periodic sweep is what guarantees delivery after a
 * crash or a broker outage (rows it finds may have gone out already: consumers are idempotent).
 * Several relays may sweep at once: rows are claimed with SKIP LOCKED.
 */
export class OutboxRelay {
  private readonly toMark: bigint[] = [];
  private markTimer?: NodeJS.Timeout;
  private readonly inFlight = new Set<Promise<void>>();
  private timer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly store: OutboxStore,
    private readonly publisher: OutboxPublisher,
    private readonly logger: BusLogger,
    private readonly opts: { sweepIntervalMs?: number; batchSize?: number; markDelayMs?: number } = {},
  ) {}

  start(): void {
    this.stopped = false;
    const interval = this.opts.sweepIntervalMs ?? 1000;
    this.timer = setInterval(() => this.kick(), interval);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await Promise.allSettled([...this.inFlight]);
    await this.flushMarks();
    while (this.running) await new Promise((r) => setTimeout(r, 10));
  }

  /** Publishes rows that just committed; failures are left to the sweep. */
  publishCommitted(rows: OutboxRow[]): void {
    if (rows.length === 0) return;
    const p = this.publishRows(rows)
      .then(() => {
        for (const r of rows) this.toMark.push(r.id);
        this.scheduleMarks();
      })
      .catch((err: Error) => this.logger.warn({ error: err.message }, 'direct outbox publish failed; the sweep will retry'))
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  private scheduleMarks(): void {
    if (this.markTimer) return;
    this.markTimer = setTimeout(() => {
      this.markTimer = undefined;
      void this.flushMarks();
    }, this.opts.markDelayMs ?? 20);
  }

  private async flushMarks(): Promise<void> {
    const ids = this.toMark.splice(0, this.toMark.length);
    if (ids.length === 0) return;
    try {
      await this.store.markPublished(ids);
    } catch (err) {
      // Unmarked rows are published again by the sweep; consumers are idempotent.
      this.logger.warn({ error: (err as Error).message, rows: ids.length }, 'could not mark outbox rows published');
    }
  }

  /** Drain now (coalesces concurrent kicks into one more pass). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.drain().finally(() => {
      this.running = false;
      if (this.again && !this.stopped) {
        this.again = false;
        this.kick();
      }
    });
  }

  /** Publishes until nothing is left; returns how many rows went out. */
  async drain(): Promise<number> {
    let total = 0;
    const batchSize = this.opts.batchSize ?? 200;
    try {
      for (;;) {
        const n = await this.store.drainBatch(batchSize, (rows) => this.publishRows(rows));
        total += n;
        if (n < batchSize) break;
      }
    } catch (err) {
      this.logger.warn({ error: (err as Error).message }, 'outbox drain failed; the sweep will retry');
    }
    return total;
  }

  private async publishRows(rows: OutboxRow[]): Promise<void> {
    const byTopic = new Map<string, RawMessage[]>();
    for (const row of rows) {
      const list = byTopic.get(row.topic) ?? [];
      list.push({ key: row.key, value: JSON.stringify(row.payload) });
      byTopic.set(row.topic, list);
    }
    for (const [topic, messages] of byTopic) await this.publisher.publishRaw(topic, messages);
  }
}
