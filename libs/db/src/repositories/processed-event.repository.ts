import type { ProcessedEventStore } from '@gateway/messaging';
import { Database, Tx, prismaTx, txQuery } from '../database';

/**
 * A batch's first statement: records its event ids and, for the rest of the transaction, plans
 * with index lookups only (`enable_seqscan` off, `set_config(…, true)` = transaction-local). Every
 * statement of a consumer's batch finds its rows by key, up to a few hundred ids in `= ANY($n)`;
 * Postgres costs such a filter as if the array were short, and on tables of ~10^5 rows it chose a
 * sequential scan that compared every row with every id (bench:settlement, auto_explain: 15–20 ms
 * per scan of action or attempt, five such statements per batch; docs/decisions.md).
 */
const RECORD_BATCH = `
  WITH plan AS (SELECT set_config('enable_seqscan', 'off', true))
  INSERT INTO processed_event (consumer, event_id) SELECT $1, unnest($2::text[]) FROM plan
  ON CONFLICT DO NOTHING RETURNING event_id`;

export class ProcessedEventRepository implements ProcessedEventStore<Tx> {
  constructor(private readonly db: Database) {}

  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** One statement for the batch; returns the ids that were not recorded before. */
  async recordMany(tx: Tx, consumer: string, eventIds: readonly string[]): Promise<Set<string>> {
    if (eventIds.length === 0) return new Set();
    const inserted =
      eventIds.length > 1
        ? await txQuery<{ event_id: string }>(tx, RECORD_BATCH, [consumer, [...eventIds]])
        : await prismaTx(tx).$queryRaw<Array<{ event_id: string }>>`
            INSERT INTO processed_event (consumer, event_id) VALUES (${consumer}, ${eventIds[0]})
            ON CONFLICT DO NOTHING RETURNING event_id`;
    return new Set(inserted.map((r) => r.event_id));
  }

  /**
   * Deletes up to `limit` recorded ids handled before `cutoff` (oldest pages first, through the
   * BRIN index on `processed_at`: ids are appended in time order, so the index stays a few pages);
   * returns how many went. Past the redelivery horizon (`REDELIVERY_HORIZON_MS`) no topic can
   * bring the event again, so nothing relies on its id any more.
   */
  async pruneBefore(cutoff: Date, limit: number): Promise<number> {
    return this.db.prisma.$executeRaw`
      DELETE FROM processed_event WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM processed_event WHERE processed_at < ${cutoff} LIMIT ${limit}))`;
  }
}
