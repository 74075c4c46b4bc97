import { BusLogger, Delivery, MessageMeta, PoisonGuard } from './poison-guard';
import { errorClass } from './poison-policy';

/** One schema-valid message of a batch, with its place in the log. */
export interface BatchItem<P> {
  payload: P;
  meta: MessageMeta;
}

export type BatchHandler<P> = (items: Array<BatchItem<P>>) => Promise<void>;

/**
 * A batch of messages through the poison policy: the schema-valid ones go to the handler
 * together (one transaction for the lot); when that fails, each half is tried on its own, down
 * to single messages that go through the `PoisonGuard` — the handler with a batch of one — so a
 * poison message is parked and the others are handled, never blocked or lost. Schema-invalid messages are parked by the guard.
 * Returns normally when every offset of the batch may be committed; throws when one must not.
 */
export class BatchGuard<P> {
  constructor(
    private readonly guard: PoisonGuard<P>,
    /** the topic schema's parse: throws on a message that does not match */
    private readonly parse: (raw: unknown) => P,
    private readonly handler: BatchHandler<P>,
    private readonly logger: BusLogger,
  ) {}

  async deliver(deliveries: Delivery[]): Promise<void> {
    const valid: Array<BatchItem<P> & { delivery: Delivery }> = [];
    const invalid: Delivery[] = [];
    for (const d of deliveries) {
      try {
        valid.push({ payload: this.parse(JSON.parse(d.value ?? 'null')), meta: d.meta, delivery: d });
      } catch {
        invalid.push(d);
      }
    }
    await this.deliverValid(valid, deliveries);
    for (const d of invalid) await this.guard.deliver(d);
  }

  /**
   * Runs the handler on the batch; when it fails, on each half, down to single messages, which
   * go through the guard (retries, then parking). A poison message costs about 2·log2(n) failed
   * transactions, not n, and a batch too big for a busy database settles in smaller ones.
   */
  private async deliverValid(valid: Array<BatchItem<P> & { delivery: Delivery }>, all: Delivery[]): Promise<void> {
    if (valid.length === 0) return;
    if (valid.length === 1) return this.guard.deliver(valid[0].delivery);
    try {
      await this.handler(valid.map(({ payload, meta }) => ({ payload, meta })));
      return;
    } catch (err) {
      if (all.some((d) => d.stopping())) throw err;
      const first = valid[0].meta;
      this.logger.warn(
        { topic: first.topic, partition: first.partition, offset: first.offset, size: valid.length, error: errorClass(err) },
        'batch failed; handling each half on its own',
      );
    }
    const half = Math.ceil(valid.length / 2);
    await this.deliverValid(valid.slice(0, half), all);
    await this.deliverValid(valid.slice(half), all);
  }
}
