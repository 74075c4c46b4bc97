import { randomUUID } from 'node:crypto';
import { TopicKey, TopicPayload, Topics } from '@gateway/contracts';
import type { OutboxRow, OutboxStore } from '@gateway/messaging';
import { Database, Tx } from '../database';

/** Transactional outbox: events are written with the state change they announce. */
export class OutboxRepository implements OutboxStore {
  private readonly listeners: Array<() => void> = [];
  private readonly notify = () => {
    for (const l of this.listeners) l();
  };

  constructor(private readonly db: Database) {}

  /** Called after every commit that appended outbox rows (the relay kicks itself with it). */
  onCommittedAppend(listener: () => void): void {
    this.listeners.push(listener);
  }

  async append<K extends TopicKey>(tx: Tx, topicKey: K, key: string, payload: TopicPayload<K>): Promise<void> {
    const spec = Topics[topicKey];
    const value = spec.schema.parse(payload) as { event_id?: string };
    await tx.outboxMessage.create({
      data: { eventId: value.event_id ?? randomUUID(), topic: spec.name, key, payload: value as object },
    });
    this.db.afterCommit(tx, this.notify);
  }

  async drainBatch(limit: number, publish: (rows: OutboxRow[]) => Promise<void>): Promise<number> {
    return this.db.transaction(async (tx) => {
      const rows = await tx.$queryRaw<Array<{ id: bigint; topic: string; key: string; payload: unknown }>>`
        SELECT id, topic, key, payload FROM outbox_message
        WHERE published_at IS NULL ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
      if (rows.length === 0) return 0;
      await publish(rows);
      await tx.$executeRaw`UPDATE outbox_message SET published_at = now() WHERE id = ANY(${rows.map((r) => r.id)}::bigint[])`;
      return rows.length;
    });
  }

  async unpublishedCount(): Promise<number> {
    return this.db.prisma.outboxMessage.count({ where: { publishedAt: null } });
  }
}
