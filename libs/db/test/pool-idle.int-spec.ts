import { Database } from '../src/database';

/**
 * The services' pool keeps its connections (idleMs 0, DATABASE_POOL_IDLE_MS's default): a
 * connection closed while idle comes back at the next burst as a new Postgres backend (a fork,
 * authentication, catalog caches, every prepared statement parsed and planned again). A pool with
 * an idle limit closes them, and tools that set nothing get `pg`'s 10 s.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

async function burstThenIdle(db: Database, idleForMs: number): Promise<{ opened: number; backends: Set<number>; after: number }> {
  const pid = () => db.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, pg_sleep(0.05)').then((r) => r.rows[0].pid);
  const first = await Promise.all([pid(), pid(), pid()]);
  const opened = db.pool.totalCount;
  await new Promise((resolve) => setTimeout(resolve, idleForMs));
  const after = db.pool.totalCount;
  const second = await Promise.all([pid(), pid(), pid()]);
  return { opened, after, backends: new Set([...first, ...second]) };
}

describe('Database pool: idle connections', () => {
  it.each([
    { idleMs: 0, what: 'keeps every connection of a burst: the next burst runs on the same backends', after: 3, backends: 3 },
    { idleMs: 100, what: 'closes them after idleMs when one is set: the next burst forks new backends', after: 0, backends: 6 },
  ])('idleMs $idleMs $what', async ({ idleMs, after, backends }) => {
    const db = new Database(url, { poolMax: 3, idleMs });
    try {
      const r = await burstThenIdle(db, 400);
      expect(r.opened).toBe(3);
      expect(r.after).toBe(after);
      expect(r.backends.size).toBe(backends);
      // pg-pool arms no idle timer at all for 0 (a falsy limit), so what held 400 ms holds for good;
      // unset would have been its 10 s default, which a 400 ms gap cannot tell from 0.
      expect(db.pool.options.idleTimeoutMillis).toBe(idleMs);
    } finally {
      await db.close();
    }
  });
});
