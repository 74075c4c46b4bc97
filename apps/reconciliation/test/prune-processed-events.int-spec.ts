/**
 * The consumers' processed event ids are forgotten past the redelivery horizon, on the real
 * Postgres: ids handled before it go (in chunks), ids handled after it stay, and a redelivered
 * event inside the horizon is still a duplicate.
 */
import { randomUUID } from 'node:crypto';
import { REDELIVERY_HORIZON_MS } from '@gateway/contracts';
import { Database, ProcessedEventRepository } from '@gateway/db';
import { PruneProcessedEvents } from '../src/usecases/prune-processed-events/prune-processed-events.usecase';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const HOUR = 3_600_000;

describe('pruning processed event ids', () => {
  const db = new Database(url);
  const processed = new ProcessedEventRepository(db);
  const logged: object[] = [];
  const prune = new PruneProcessedEvents(processed, { info: (o: object) => void logged.push(o) } as never);
  afterAll(() => db.close());

  it('forgets ids handled before the horizon, in chunks, and keeps the rest: a redelivery inside it is still a duplicate', async () => {
    const consumer = `int-prune-${randomUUID()}`;
    const now = new Date();
    const ids = { old: [randomUUID(), randomUUID(), randomUUID()], recent: randomUUID() };
    const handled = (id: string, at: Date) =>
      db.prisma.$executeRaw`INSERT INTO processed_event (consumer, event_id, processed_at) VALUES (${consumer}, ${id}, ${at})`;
    for (const id of ids.old) await handled(id, new Date(now.getTime() - REDELIVERY_HORIZON_MS - HOUR));
    await handled(ids.recent, new Date(now.getTime() - REDELIVERY_HORIZON_MS + HOUR));

    // chunks of one row: three chunks take the old ids, a fourth finds none left
    expect(await prune.execute(now, { chunk: 1 })).toBeGreaterThanOrEqual(3);

    const left = await db.prisma.processedEvent.findMany({ where: { consumer }, select: { eventId: true } });
    expect(left.map((r) => r.eventId)).toEqual([ids.recent]);
    expect(logged).toContainEqual(
      expect.objectContaining({ handled_before: new Date(now.getTime() - REDELIVERY_HORIZON_MS).toISOString() }),
    );
    // the recent event comes again: still recorded, so a duplicate (nothing new inserted)
    expect(await db.transaction((tx) => processed.recordMany(tx, consumer, [ids.recent]))).toEqual(new Set());
    // nothing left to prune
    expect(await prune.execute(now)).toBe(0);
  });

  it('stops after maxChunks a run and takes the rest on the next', async () => {
    const consumer = `int-prune-${randomUUID()}`;
    const now = new Date();
    const old = new Date(now.getTime() - REDELIVERY_HORIZON_MS - HOUR);
    for (let i = 0; i < 5; i++) {
      await db.prisma
        .$executeRaw`INSERT INTO processed_event (consumer, event_id, processed_at) VALUES (${consumer}, ${randomUUID()}, ${old})`;
    }
    expect(await prune.execute(now, { chunk: 2, maxChunks: 2 })).toBe(4);
    expect(await db.prisma.processedEvent.count({ where: { consumer } })).toBe(1);
    expect(await prune.execute(now, { chunk: 2, maxChunks: 2 })).toBe(1);
    expect(await db.prisma.processedEvent.count({ where: { consumer } })).toBe(0);
  });
});
