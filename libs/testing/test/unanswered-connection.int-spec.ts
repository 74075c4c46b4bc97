import { randomUUID } from 'node:crypto';
import { Database, isDatabaseOutOfService, isDatabaseUnavailable, ProcessedEventRepository } from '@gateway/db';
import { startTcpRelay, TcpRelay } from '../src/tcp-relay';

/**
 * A connection that will never be answered: the flow between the service and the server silently
 * dropped (a firewall or NAT that forgot it, a server host gone without a reset). Nothing fails on
 * such a connection; a statement on it waits until the kernel gives up on the socket (~15 minutes
 * of retransmissions). Here a TCP relay in front of the real server (`startTcpRelay`) stops moving
 * the bytes of the connections it already carries and keeps them open, while new connections
 * pass: the shape of that fault on loopback. The pool must close such a connection once a statement has waited
 * `answerWithinMs`, fail that statement as the database out of service (a 503 for a client, a wait
 * in place for a consumer), and serve the next statements on new connections.
 */
const target = new URL(process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test');
const ANSWER_WITHIN_MS = 400;

describe('a connection that is never answered', () => {
  let relay: TcpRelay;
  let db: Database;

  beforeAll(async () => {
    relay = await startTcpRelay({ host: target.hostname, port: Number(target.port || 5432) });
    db = new Database(relay.via(target.href), { poolMax: 2, idleMs: 0, answerWithinMs: ANSWER_WITHIN_MS });
  });
  afterAll(async () => {
    await relay.close(); // first: a frozen connection still idle in the pool would wait for its goodbye
    await db.close().catch(() => undefined);
  });

  /** Opens both pool connections (two statements at once), then freezes them. */
  async function freezeThePool(): Promise<void> {
    await Promise.all([db.pool.query('SELECT pg_sleep(0.05)'), db.pool.query('SELECT pg_sleep(0.05)')]);
    expect(db.pool.totalCount).toBe(2);
    expect(relay.freezeLive()).toBe(2);
  }

  /** Runs `work` until it succeeds: every failure must come within the bound and say the database is out of service. */
  async function untilAnswered<T>(work: () => Promise<T>): Promise<{ result: T; failures: number }> {
    for (let failures = 0; failures <= 4; failures++) {
      const started = Date.now();
      try {
        return { result: await work(), failures };
      } catch (err) {
        expect(Date.now() - started).toBeLessThan(ANSWER_WITHIN_MS + 2_000);
        expect((err as Error).message).toMatch(/no answer from the database within 400 ms/);
        expect(isDatabaseOutOfService(err)).toBe(true);
        expect(isDatabaseUnavailable(err)).toBe(true);
      }
    }
    throw new Error('still failing after the pool should have replaced every frozen connection');
  }

  it('a statement in autocommit: fails within the bound, and the pool serves the next on a new connection', async () => {
    await freezeThePool();
    const { result, failures } = await untilAnswered(() => db.pool.query<{ one: number }>('SELECT 1 AS one'));
    expect(result.rows[0].one).toBe(1);
    expect(failures).toBeGreaterThanOrEqual(1);
    expect(failures).toBeLessThanOrEqual(2);
  });

  it('one connection found dead closes its idle siblings: the next statement does not wait the bound again', async () => {
    await freezeThePool();
    const first = await db.pool.query('SELECT 1').then(
      () => new Error('answered through a frozen connection'),
      (e: unknown) => e as Error,
    );
    expect(first.message).toMatch(/no answer from the database within 400 ms/);
    const started = Date.now();
    expect((await db.pool.query<{ one: number }>('SELECT 1 AS one')).rows[0].one).toBe(1);
    expect(Date.now() - started).toBeLessThan(ANSWER_WITHIN_MS);
  });

  it('a transaction (Prisma and txQuery on its connection): fails within the bound, the frozen connection is never handed out again', async () => {
    await freezeThePool();
    const ids = [randomUUID(), randomUUID()];
    // two ids: the repository sends its statement with `txQuery` on the transaction's connection
    const { result, failures } = await untilAnswered(() =>
      new ProcessedEventRepository(db).transaction(async (tx) => new ProcessedEventRepository(db).recordMany(tx, 'unanswered-spec', ids)),
    );
    expect([...result].sort()).toEqual([...ids].sort());
    expect(failures).toBeGreaterThanOrEqual(1);
    // Prisma ends a failed transaction by releasing its connection as if it were sound; a closed
    // one is dropped by the pool instead of going back to it: ten more statements all pass at once.
    for (let i = 0; i < 10; i++) expect((await db.pool.query<{ one: number }>('SELECT 1 AS one')).rows[0].one).toBe(1);
  });

  it('a Prisma query: fails within the bound, then passes on a new connection', async () => {
    await freezeThePool();
    const { result } = await untilAnswered(() => db.prisma.$queryRaw<Array<{ one: number }>>`SELECT 1 AS one`);
    expect(result[0].one).toBe(1);
  });

  it('opening a connection that is never answered: fails within the bound, then opens anew', async () => {
    // a server that accepts connections and never answers their start-up (as a stopped postmaster)
    await db.close();
    db = new Database(relay.via(target.href), { poolMax: 2, idleMs: 0, answerWithinMs: ANSWER_WITHIN_MS });
    relay.freezeNew(true);
    const started = Date.now();
    const err = await db.pool.query('SELECT 1').then(
      () => new Error('answered through a frozen connection'),
      (e: unknown) => e as Error,
    );
    expect(Date.now() - started).toBeLessThan(ANSWER_WITHIN_MS + 2_000);
    expect(err.message).toMatch(/Connection terminated due to connection timeout/);
    expect(isDatabaseUnavailable(err)).toBe(true);
    relay.freezeNew(false);
    expect((await db.pool.query<{ one: number }>('SELECT 1 AS one')).rows[0].one).toBe(1);
  });

  it('a wait for a pool connection during which the database answered nothing: out of service, not busy', async () => {
    // A consumer's transaction waits 5 s for a connection, the bound is 30 s: in a blackhole every
    // slot is held by a statement or a connect that waits for the bound, so the wait times out
    // first, again and again. As "busy" (transient) that parked the message after six retries.
    await freezeThePool();
    relay.freezeNew(true);
    const held = [db.pool.query('SELECT 1').catch((e: unknown) => e), db.pool.query('SELECT 1').catch((e: unknown) => e)];
    const tx = await db
      .transaction(async () => 1, { maxWaitMs: 100 })
      .then(
        () => new Error('a transaction started with every slot held'),
        (e: unknown) => e as Error,
      );
    expect(tx.message).toMatch(/database out of service: no connection within 100 ms/);
    expect(isDatabaseOutOfService(tx)).toBe(true);
    const statement = { name: 'unanswered-spec-one', text: 'SELECT 1 AS one' };
    const query = await db.query(statement, [], { maxWaitMs: 100 }).then(
      () => new Error('a statement ran with every slot held'),
      (e: unknown) => e as Error,
    );
    expect(isDatabaseOutOfService(query)).toBe(true);
    await Promise.all(held);
    relay.freezeNew(false);
    expect((await db.query<{ one: number }>(statement, [])).map((r) => r.one)).toEqual([1]);
  });

  it('a wait for a pool connection while the database answers other statements: busy, not out of service', async () => {
    // one slot in a statement shorter than the bound, the other in a transaction that keeps getting answers
    const slow = db.pool.query('SELECT 1 FROM pg_sleep(0.3)');
    const repo = new ProcessedEventRepository(db);
    const chatty = repo.transaction(async (tx) => {
      for (const until = Date.now() + 300; Date.now() < until;) await repo.recordMany(tx, 'unanswered-spec', [randomUUID()]);
    });
    await new Promise((r) => setTimeout(r, 50));
    const tx = await db
      .transaction(async () => 1, { maxWaitMs: 100 })
      .then(
        () => new Error('a transaction started with every slot held'),
        (e: unknown) => e as Error,
      );
    await Promise.all([slow, chatty]);
    expect(tx.message).toMatch(/Unable to start a transaction in the given time/);
    expect(isDatabaseUnavailable(tx)).toBe(true);
    expect(isDatabaseOutOfService(tx)).toBe(false);
  });

  it('a slow statement shorter than the bound is waited for', async () => {
    const started = Date.now();
    const rows = await db.pool.query<{ one: number }>(`SELECT 1 AS one FROM pg_sleep(${ANSWER_WITHIN_MS / 2 / 1000})`);
    expect(rows.rows[0].one).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(ANSWER_WITHIN_MS / 2 - 5);
  });
});
