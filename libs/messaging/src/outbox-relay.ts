import { allTopics } from '@gateway/contracts';
import { IdleBackoff } from './idle-backoff';
import type { BusLogger } from './kafka-bus';
import { PermanentPublishError, RawMessage } from './produce-coalescer';

/**
 * One message to publish. `id` is the outbox row it belongs to: a row may stand for several
 * messages (a settled batch's events), which then share it, and the row is done only when all of
 * them are out.
 */
export interface OutboxRow {
  id: bigint;
  topic: string;
  key: string;
  payload: unknown;
  /** `payload` as JSON text, when the writer already has it (sent as is instead of stringified again) */
  json?: string;
}

/**
 * Why a row can never be published. Only the row's own content qualifies: a broker that is down
 * or slow never quarantines anything. `source_missing`: a row standing for messages built from
 * other rows (a settled batch's ledger rows) names one that is gone.
 */
export type QuarantineReason = 'message_too_large' | 'record_rejected' | 'schema_invalid' | 'unknown_topic' | 'source_missing';

/**
 * What one sweep batch did: rows all of whose messages were sent, rows set aside for good (one
 * refused message sets its whole row aside), and the transient error that stopped it (if any).
 */
export interface BatchOutcome {
  published: bigint[];
  quarantined: Array<{ id: bigint; topic: string; reason: QuarantineReason }>;
  error?: Error;
}

/**
 * Implemented in libs/db: lock a batch of unpublished, unquarantined rows, run `publish`, delete
 * what it published and quarantine what it refused, in one transaction. A batch takes rows older
 * than the store's lease (the time the writer's relay has to publish and delete them) and, at
 * once, the rows in `retryIds` (this relay's own failed direct sends). A published row is
 * deleted, never kept: the topic is the record of what went out.
 */
export interface OutboxStore {
  drainBatch(
    limit: number,
    publish: (rows: OutboxRow[]) => Promise<BatchOutcome>,
    retryIds?: readonly bigint[],
  ): Promise<{ claimed: number; /** rows may be left (default: `claimed` reached `limit`) */ more?: boolean } & BatchOutcome>;
  deletePublished(ids: bigint[]): Promise<void>;
}

/**
 * Counts messages the sweep published (not the direct path): each is a recovery, or a duplicate if the
 * direct send had gone out. Messages, not rows: a settled batch's one row stands for all its events.
 */
export interface SweptCounter {
  inc(labels: { topic: string }, value: number): void;
}

/** Counts quarantined rows; a prom-client Counter with these labels fits. */
export interface QuarantineCounter {
  inc(labels: { topic: string; reason: QuarantineReason }): void;
}

export interface OutboxRelayOptions {
  sweepIntervalMs?: number;
  /**
   * Sweeps back off when idle (default 30 s): after 10 s without rows, each empty sweep doubles
   * the wait up to this; a commit that wrote rows, or a sweep that found some, brings it back to
   * `sweepIntervalMs`. Not above `sweepIntervalMs`: a fixed interval.
   */
  sweepIdleMaxMs?: number;
  batchSize?: number;
  /**
   * Rows published directly are deleted by one DELETE per window of this length (default 250 ms).
   * Each DELETE is a commit (a WAL flush); at 20 ms windows they were about a third of the stack's
   * transactions at 100 req/s. Far below the lease (30 s, libs/db) a row must age before any
   * relay's sweep takes it.
   */
  deleteDelayMs?: number;
  /** one send carries at most this many bytes of values (default 512 KiB), below the broker's batch limit */
  maxSendBytes?: number;
  quarantineCounter?: QuarantineCounter;
  sweptCounter?: SweptCounter;
}

const topicsByName = new Map(allTopics().map((t) => [t.name, t]));

export interface OutboxPublisher {
  publishRaw(topicName: string, messages: RawMessage[]): Promise<void>;
}

/**
 * Publishes outbox rows. `publishCommitted` sends the rows a transaction just committed, at once,
 * and deletes them in batches once the broker has them; the periodic sweep is what guarantees delivery after a
 * crash or a broker outage (rows it finds may have gone out already: consumers are idempotent).
 * Several relays may sweep at once: rows are claimed with SKIP LOCKED.
 */
export class OutboxRelay {
  private readonly toDelete: bigint[] = [];
  /** rows whose direct send failed here: the next sweep takes them without waiting for the lease */
  private readonly retryNow = new Set<bigint>();
  private deleteTimer?: NodeJS.Timeout;
  private deleting?: Promise<void>;
  private readonly inFlight = new Set<Promise<void>>();
  private timer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;
  private started = false;
  private sweepFailed = false;
  private readonly backoff: IdleBackoff;

  constructor(
    private readonly store: OutboxStore,
    private readonly publisher: OutboxPublisher,
    private readonly logger: BusLogger,
    private readonly opts: OutboxRelayOptions = {},
  ) {
    const baseMs = opts.sweepIntervalMs ?? 1000;
    // A row whose direct publish failed is swept at once (`retryNow`); the backoff only bounds how
    // late a sweep finds the rows of a relay that died before it published or deleted them.
    this.backoff = new IdleBackoff({ baseMs, maxMs: opts.sweepIdleMaxMs ?? 30_000, graceMs: 10_000 });
  }

  /** Sweeps now and then after each sweep (see `sweepIdleMaxMs`) until `stop()`. */
  start(): void {
    this.stopped = false;
    this.started = true;
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.started = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await Promise.allSettled([...this.inFlight]);
    await this.flushDeletes();
    while (this.running) await new Promise((r) => setTimeout(r, 10));
  }

  /** Publishes rows that just committed; failures are left to the sweep, which takes them at once. */
  publishCommitted(rows: OutboxRow[]): void {
    if (rows.length === 0) return;
    this.wake();
    const p = this.publishRows(rows)
      .then(() => {
        this.toDelete.push(...new Set(rows.map((r) => r.id)));
        this.scheduleDeletes();
      })
      .catch((err: Error) => {
        this.logger.warn({ error: err.message }, 'direct outbox publish failed; the sweep will retry');
        for (const r of rows) this.retryNow.add(r.id);
        if (this.started) this.kick();
      })
      .finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  private scheduleDeletes(): void {
    if (this.deleteTimer) return;
    this.deleteTimer = setTimeout(() => {
      this.deleteTimer = undefined;
      void this.flushDeletes();
    }, this.opts.deleteDelayMs ?? 250);
  }

  /**
   * One DELETE at a time: ids published while one runs are deleted by the next, in one
   * statement. Resolves once every id handed in so far is deleted (or its delete failed).
   *
   * `deleting` is cleared by a `.finally` attached after it is set. It (then `marking`, when sent
   * rows were marked rather than deleted) used to be set with `this.marking ??= (async () => { try
   * {…} finally { this.marking = undefined } })()`: when a timer fired after the running statement
   * had already taken its ids (a busy relay), the loop found nothing, its `finally` ran
   * synchronously before the assignment, and the settled promise stayed in `marking` for good — no
   * row of that relay was marked again, so the sweep published every one a second time (issue 15:
   * 1,311 duplicate settled events in a 1,500-action day).
   */
  private flushDeletes(): Promise<void> {
    if (this.deleting) return this.deleting;
    if (this.toDelete.length === 0) return Promise.resolve();
    const deleting = (async () => {
      while (this.toDelete.length > 0) {
        const ids = this.toDelete.splice(0, this.toDelete.length);
        try {
          await this.store.deletePublished(ids);
        } catch (err) {
          // Rows left behind are published again by the sweep; consumers are idempotent.
          this.logger.warn({ error: (err as Error).message, rows: ids.length }, 'could not delete published outbox rows');
        }
      }
    })();
    this.deleting = deleting.finally(() => {
      this.deleting = undefined;
    });
    return this.deleting;
  }

  /** Drain now (coalesces concurrent kicks into one more pass). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    let published = 0;
    void this.drain()
      .then((n) => void (published = n))
      .finally(() => {
        this.running = false;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          this.kick();
        } else if (this.started) {
          this.scheduleSweep(this.backoff.next(published > 0 || this.sweepFailed));
        }
      });
  }

  /** Rows were committed: sweeps go back to the base interval (a backed-off wait is cut short). */
  private wake(): void {
    if (!this.backoff.reset() || !this.started || this.running) return;
    this.scheduleSweep(this.opts.sweepIntervalMs ?? 1000);
  }

  private scheduleSweep(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.kick();
    }, ms);
    this.timer.unref();
  }

  /**
   * The sweep: publishes until nothing is left, quarantining rows that can never go out. Returns
   * how many rows went out.
   */
  async drain(): Promise<number> {
    let total = 0;
    const batchSize = this.opts.batchSize ?? 200;
    this.sweepFailed = false;
    const retry = [...this.retryNow];
    try {
      for (;;) {
        const outcome = await this.store.drainBatch(batchSize, (rows) => this.publishSweptRows(rows), retry);
        total += outcome.published.length;
        this.alertQuarantined(outcome.quarantined);
        if (outcome.error) {
          this.logger.warn({ error: outcome.error.message }, 'outbox sweep publish failed; the next sweep retries');
          this.sweepFailed = true;
          break;
        }
        if (!(outcome.more ?? outcome.claimed >= batchSize)) break;
      }
    } catch (err) {
      this.logger.warn({ error: (err as Error).message }, 'outbox drain failed; the sweep will retry');
      this.sweepFailed = true;
    }
    // Taken (published, quarantined), published meanwhile, or claimed by another sweep: done here.
    if (!this.sweepFailed) for (const id of retry) this.retryNow.delete(id);
    return total;
  }

  /** Ids only: the row's content stays in Postgres for whoever investigates. */
  private alertQuarantined(rows: BatchOutcome['quarantined']): void {
    for (const { id, topic, reason } of rows) {
      this.opts.quarantineCounter?.inc({ topic, reason });
      this.logger.error({ outbox_id: id.toString(), topic, reason }, 'outbox row quarantined: it can never be published');
    }
  }

  /**
   * Publishes a swept batch and sorts out rows that can never go out: a payload that no longer
   * matches its topic's schema (or a topic no longer declared) is not sent; a send the broker
   * refuses for its content is split until the refused row is alone, and that row is quarantined.
   * A transient failure stops the batch: what went out so far is still deleted. Each half goes
   * out on a new producer (the bus replaces it after every failed send), so the idempotent
   * sequences the refused send rolled back are never reused for different records.
   */
  private async publishSweptRows(rows: OutboxRow[]): Promise<BatchOutcome> {
    const outcome: BatchOutcome = { published: [], quarantined: [] };
    // A row is published once every message under its id went out, quarantined once any is refused.
    const unsent = new Map<bigint, number>();
    for (const row of rows) unsent.set(row.id, (unsent.get(row.id) ?? 0) + 1);
    const refused = new Map<bigint, BatchOutcome['quarantined'][number]>();
    const quarantine = (row: OutboxRow, reason: QuarantineReason) => {
      if (!refused.has(row.id)) refused.set(row.id, { id: row.id, topic: row.topic, reason });
    };
    const sendable: OutboxRow[] = [];
    for (const row of rows) {
      const spec = topicsByName.get(row.topic);
      if (!spec) quarantine(row, 'unknown_topic');
      else if (!spec.schema.safeParse(row.payload).success) quarantine(row, 'schema_invalid');
      else sendable.push(row);
    }
    const send = async (chunk: Encoded[]): Promise<void> => {
      try {
        await this.publisher.publishRaw(
          chunk[0].row.topic,
          chunk.map((c) => c.message),
        );
        for (const c of chunk) unsent.set(c.row.id, (unsent.get(c.row.id) as number) - 1);
        this.opts.sweptCounter?.inc({ topic: chunk[0].row.topic }, chunk.length);
      } catch (err) {
        if (!(err instanceof PermanentPublishError)) throw err;
        if (chunk.length === 1) return quarantine(chunk[0].row, err.refusal === 'INVALID_RECORD' ? 'record_rejected' : 'message_too_large');
        const half = Math.ceil(chunk.length / 2);
        await send(chunk.slice(0, half));
        await send(chunk.slice(half));
      }
    };
    try {
      for (const chunk of this.chunks(sendable)) await send(chunk);
    } catch (err) {
      outcome.error = err as Error;
    }
    for (const [id, left] of unsent) if (left === 0 && !refused.has(id)) outcome.published.push(id);
    outcome.quarantined.push(...refused.values());
    return outcome;
  }

  /** The direct path: any failure leaves the rows to the sweep, which sorts out permanent ones. */
  private async publishRows(rows: OutboxRow[]): Promise<void> {
    for (const chunk of this.chunks(rows))
      await this.publisher.publishRaw(
        chunk[0].row.topic,
        chunk.map((c) => c.message),
      );
  }

  /** Rows grouped by topic (in order), cut so one send stays under `maxSendBytes`. */
  private *chunks(rows: OutboxRow[]): Generator<Encoded[]> {
    const maxBytes = this.opts.maxSendBytes ?? 512 * 1024;
    const byTopic = new Map<string, Encoded[]>();
    for (const row of rows) {
      const list = byTopic.get(row.topic) ?? [];
      list.push({ row, message: { key: row.key, value: row.json ?? JSON.stringify(row.payload) } });
      byTopic.set(row.topic, list);
    }
    for (const list of byTopic.values()) {
      let chunk: Encoded[] = [];
      let bytes = 0;
      for (const encoded of list) {
        const size = Buffer.byteLength(encoded.message.value) + Buffer.byteLength(encoded.message.key);
        if (chunk.length > 0 && bytes + size > maxBytes) {
          yield chunk;
          chunk = [];
          bytes = 0;
        }
        chunk.push(encoded);
        bytes += size;
      }
      if (chunk.length > 0) yield chunk;
    }
  }
}

interface Encoded {
  row: OutboxRow;
  message: RawMessage;
}
