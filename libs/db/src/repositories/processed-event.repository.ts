import type { ProcessedEventStore } from '@gateway/messaging';
import { Database, Tx, prismaTx } from '../database';

export class ProcessedEventRepository implements ProcessedEventStore<Tx> {
  constructor(private readonly db: Database) {}

  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** One statement for the batch; returns the ids that were not recorded before. */
  async recordMany(tx: Tx, consumer: string, eventIds: readonly string[]): Promise<Set<string>> {
    if (eventIds.length === 0) return new Set();
    const inserted = await prismaTx(tx).$queryRaw<Array<{ event_id: string }>>`
      INSERT INTO processed_event (consumer, event_id) SELECT ${consumer}, unnest(${[...eventIds]}::text[])
      ON CONFLICT DO NOTHING RETURNING event_id`;
    return new Set(inserted.map((r) => r.event_id));
  }
}
