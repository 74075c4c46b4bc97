import { randomUUID } from 'node:crypto';
import { Database, prismaTx, Tx, txQuery } from '../src/database';

/**
 * `txQuery` sends a statement with `pg` itself on the connection the transaction runs on (found by
 * its backend pid): it must run inside that transaction (same backend, same transaction id, its
 * writes undone by a rollback), also when many transactions are open at once, and never after it ended.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('txQuery inside a transaction', () => {
  const db = new Database(url, { poolMax: 4 });

  afterAll(() => db.close());

  async function sameTransaction(tx: Tx): Promise<{ viaPg: string; viaPrisma: string }> {
    const [pg] = await txQuery<{ id: string }>(tx, "SELECT pg_backend_pid()::text || ':' || txid_current()::text AS id", []);
    const [prisma] = await prismaTx(tx).$queryRaw<
      Array<{ id: string }>
    >`SELECT pg_backend_pid()::text || ':' || txid_current()::text AS id`;
    return { viaPg: pg.id, viaPrisma: prisma.id };
  }

  async function recorded(eventId: string): Promise<boolean> {
    const rows = await db.prisma.$queryRaw<
      unknown[]
    >`SELECT 1 FROM processed_event WHERE consumer = 'tx-query-spec' AND event_id = ${eventId}`;
    return rows.length === 1;
  }

  it('runs on the transaction Prisma opened: same backend, same transaction id', async () => {
    const ids = await db.transaction((tx) => sameTransaction(tx));
    expect(ids.viaPg).toMatch(/^\d+:\d+$/);
    expect(ids.viaPg).toBe(ids.viaPrisma);
  });

  it('is sent by pg itself, not through the Prisma fallback (pg leaves a bigint a string, Prisma makes it a BigInt)', async () => {
    const [row] = await db.transaction((tx) => txQuery<{ n: unknown }>(tx, 'SELECT 9007199254740993::bigint AS n', []));
    expect(row.n).toBe('9007199254740993');
  });

  it('commits and rolls back with the transaction', async () => {
    const kept = randomUUID();
    const undone = randomUUID();
    const insert = (tx: Tx, id: string) =>
      txQuery(tx, "INSERT INTO processed_event (consumer, event_id) VALUES ('tx-query-spec', $1) RETURNING event_id", [id]);
    await db.transaction((tx) => insert(tx, kept));
    await expect(
      db.transaction(async (tx) => {
        await insert(tx, undone);
        // the transaction sees its own write through Prisma too
        const seen = await prismaTx(tx).$queryRaw<unknown[]>`SELECT 1 FROM processed_event WHERE event_id = ${undone}`;
        expect(seen).toHaveLength(1);
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect(await recorded(kept)).toBe(true);
    expect(await recorded(undone)).toBe(false);
  });

  it('refuses a statement after the transaction ended (its connection is back in the pool)', async () => {
    let ended: Tx | undefined;
    await db.transaction(async (tx) => {
      ended = tx;
      await txQuery(tx, 'SELECT 1', []);
    });
    await expect(txQuery(ended!, 'SELECT 1', [])).rejects.toThrow();
  });

  // Regression (chaos, a Postgres stall): Prisma's interactive transaction timed out while a txQuery
  // statement ran, queued its ROLLBACK behind it on the connection, and the use case's next txQuery
  // went out after the ROLLBACK: in autocommit, so half a settlement batch committed (ledger rows
  // without their attempts' transitions).
  it('never runs a statement after the transaction timed out, not even one sent while Prisma rolls back', async () => {
    const before = randomUUID();
    const after = randomUUID();
    const insert = (tx: Tx, id: string) =>
      txQuery(tx, "INSERT INTO processed_event (consumer, event_id) VALUES ('tx-query-spec', $1) RETURNING event_id", [id]);
    await expect(
      db.transaction(
        async (tx) => {
          await insert(tx, before);
          await txQuery(tx, 'SELECT pg_sleep(2.5)', []); // outlasts the transaction's time
          await insert(tx, after);
        },
        { timeoutMs: 1_000 },
      ),
    ).rejects.toThrow(/expired transaction|ran out/);
    await new Promise((r) => setTimeout(r, 300)); // whatever was still queued on the connection has run
    expect(await recorded(before)).toBe(false);
    expect(await recorded(after)).toBe(false);
  });

  it('keeps each of many concurrent transactions on its own connection', async () => {
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        db.transaction(async (tx) => {
          const first = await sameTransaction(tx);
          await new Promise((r) => setTimeout(r, 5));
          const second = await sameTransaction(tx);
          return [first, second];
        }),
      ),
    );
    const transactions = new Set<string>();
    for (const [first, second] of results) {
      expect(first.viaPg).toBe(first.viaPrisma);
      expect(second.viaPg).toBe(first.viaPg);
      expect(second.viaPrisma).toBe(first.viaPg);
      transactions.add(first.viaPg);
    }
    expect(transactions.size).toBe(12);
  });
});
