import type { ProcessedEventStore } from '@gateway/messaging';
import { Database, Tx, prismaTx } from '../database';

export class ProcessedEventRepository implements ProcessedEventStore<Tx> {
  constructor(private readonly db: Database) {}

  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  async recordOnce(tx: Tx, consumer: string, eventId: string): Promise<boolean> {
    const inserted = await prismaTx(tx).$executeRaw`
      INSERT INTO processed_event (consumer, event_id) VALUES (${consumer}, ${eventId})
      ON CONFLICT DO NOTHING`;
    return inserted === 1;
  }
}
