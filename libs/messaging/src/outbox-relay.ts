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
}

export interface OutboxPublisher {
  publishRaw(topicName: string, messages: RawMessage[]): Promise<void>;
}

/**
 * Publishes outbox rows. `kick()` right after a commit gives low latency; the periodic sweep is
 * what guarantees delivery after a crash or a broker outage. Several relays may run at once:
 * rows are claimed with SKIP LOCKED, and consumers are idempotent anyway.
 */
export class OutboxRelay {
  private timer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly store: OutboxStore,
    private readonly publisher: OutboxPublisher,
    private readonly logger: BusLogger,
    private readonly opts: { sweepIntervalMs?: number; batchSize?: number } = {},
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
    while (this.running) await new Promise((r) => setTimeout(r, 10));
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
