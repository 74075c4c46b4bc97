import { randomUUID } from 'node:crypto';
import { Database, prismaTx, Tx } from '../src/database';
import { ProcessedEventRepository } from '../src/repositories/processed-event.repository';

/**
 * A batch's event ids are recorded once (a repeated or already recorded id comes back as not new),
 * and the rest of that batch's transaction, only that transaction, is planned with index lookups
 * (its statements find a few hundred rows by key; see the repository).
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('ProcessedEventRepository.recordMany', () => {
  const db = new Database(url, { poolMax: 2 });
  const repo = new ProcessedEventRepository(db);
  const consumer = `processed-event-spec-${randomUUID()}`;

  afterAll(() => db.close());

  const seqscan = async (tx: Tx) =>
    (await prismaTx(tx).$queryRaw<Array<{ v: string }>>`SELECT current_setting('enable_seqscan') AS v`)[0].v;

  it('returns the ids recorded for the first time, one statement for the batch or a single event', async () => {
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    expect(await repo.transaction((tx) => repo.recordMany(tx, consumer, [a]))).toEqual(new Set([a]));
    expect(await repo.transaction((tx) => repo.recordMany(tx, consumer, [a, b, c]))).toEqual(new Set([b, c]));
    expect(await repo.transaction((tx) => repo.recordMany(tx, consumer, [c]))).toEqual(new Set());
  });

  it('plans the rest of a batch transaction with index lookups, and leaves the next transaction on the connection as it was', async () => {
    const during = await repo.transaction(async (tx) => {
      const before = await seqscan(tx);
      await repo.recordMany(tx, consumer, [randomUUID(), randomUUID()]);
      return { before, after: await seqscan(tx) };
    });
    expect(during).toEqual({ before: 'on', after: 'off' });
    // both pool connections: whichever the batch ran on is back to the default
    const next = await Promise.all([0, 1].map(() => db.transaction(async (tx) => seqscan(tx))));
    expect(next).toEqual(['on', 'on']);
  });

  it('leaves a single event’s transaction planned as usual', async () => {
    const after = await repo.transaction(async (tx) => {
      await repo.recordMany(tx, consumer, [randomUUID()]);
      return seqscan(tx);
    });
    expect(after).toBe('on');
  });
});
