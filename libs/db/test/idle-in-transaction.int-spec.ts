import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Database } from '../src/database';

/**
 * A process that stops inside a transaction (SIGSTOP, a frozen VM, a debugger, a flow dropped
 * between it and the server) leaves its session idle in transaction, holding its row locks. The
 * server never learns that its client is gone: the socket stays open until a kernel gives up on
 * it (hours with default keepalives). Every other writer of those rows waits behind it: where the
 * row is a workload's budget row, every admission of that workload, each holding a pool connection
 * while it waits. `Database` sends each connection's start-up with the server's own bound
 * (`idle_in_transaction_session_timeout`), above the longest a live transaction here can last.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const BOUND_MS = 1_500;
const CONSUMER = 'idle-in-transaction-spec';

describe("a session idle in a transaction: the server's bound", () => {
  const db = new Database(url, { poolMax: 2, idleMs: 0, idleInTransactionMs: BOUND_MS });
  const other = new pg.Client({ connectionString: url, statement_timeout: 8_000 });
  beforeAll(() => other.connect());
  afterAll(async () => {
    await other.end();
    await db.close();
  });

  it('every connection of the pool starts with it', async () => {
    const { rows } = await db.pool.query<{ ms: string }>(
      "SELECT setting AS ms FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'",
    );
    expect(rows[0].ms).toBe(String(BOUND_MS));
  });

  it("keeps the URL's own start-up options beside it", async () => {
    const withOptions = `${url}${url.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c application_name=idle-spec')}`;
    const db2 = new Database(withOptions, { poolMax: 1, idleInTransactionMs: BOUND_MS });
    try {
      const { rows } = await db2.pool.query<{ app: string; ms: string }>(
        "SELECT current_setting('application_name') AS app, current_setting('idle_in_transaction_session_timeout') AS ms",
      );
      expect(rows[0]).toEqual({ app: 'idle-spec', ms: '1500ms' });
    } finally {
      await db2.close();
    }
  });

  it('0 sends no bound (for PgBouncer, which refuses start-up options)', async () => {
    const db2 = new Database(url, { poolMax: 1, idleInTransactionMs: 0 });
    try {
      const { rows } = await db2.pool.query<{ ms: string }>("SELECT current_setting('idle_in_transaction_session_timeout') AS ms");
      expect(rows[0].ms).toBe('0');
    } finally {
      await db2.close();
    }
  });

  it('a transaction that went silent holding a row lock: the server ends it, and the next writer of the row gets it', async () => {
    const eventId = randomUUID();
    await other.query('INSERT INTO processed_event (consumer, event_id) VALUES ($1, $2)', [CONSUMER, eventId]);
    // a pool connection in a transaction that locked the row and then sends nothing more, as a
    // process stopped between two statements
    const silent = await db.pool.connect();
    await silent.query('BEGIN');
    await silent.query('SELECT 1 FROM processed_event WHERE consumer = $1 AND event_id = $2 FOR UPDATE', [CONSUMER, eventId]);
    const pid = (silent as pg.PoolClient & { processID: number }).processID;

    try {
      const started = Date.now();
      // another session's write of the row waits for the lock (up to its statement timeout, 8 s)
      const updated = await other.query('UPDATE processed_event SET processed_at = now() WHERE consumer = $1 AND event_id = $2', [
        CONSUMER,
        eventId,
      ]);
      const waited = Date.now() - started;
      expect(updated.rowCount).toBe(1);
      expect(waited).toBeGreaterThanOrEqual(BOUND_MS - 100);
      expect(waited).toBeLessThan(BOUND_MS + 3_000);
      const { rows } = await other.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]);
      expect(rows).toHaveLength(0); // the silent session is gone, its transaction rolled back
    } finally {
      silent.release(new Error('ended by the server, or by this test'));
    }
    // the pool serves on a new connection
    expect((await db.pool.query<{ one: number }>('SELECT 1 AS one')).rows[0].one).toBe(1);
  });

  it('refuses a transaction whose time could outlive the bound', async () => {
    await expect(db.transaction(async () => 1, { timeoutMs: BOUND_MS })).rejects.toThrow(/idle-in-transaction bound/);
    await expect(db.transaction(async () => 1, { timeoutMs: BOUND_MS - 1_100 })).resolves.toBe(1);
  });
});
