import { randomUUID } from 'node:crypto';
import {
  AdmissionRepository,
  budgetAccountId,
  Database,
  DispatchRepository,
  FlushDropReason,
  isDatabaseUnavailable,
  migrate,
  OutboxRepository,
} from '@gateway/db';
import type { OutboxRow } from '@gateway/messaging';
import { admitInput, primaryClaim, PrivatePostgres, startPrivatePostgres } from '@gateway/testing';

/**
 * The admission commits without waiting for the disk (docs/decisions.md, "The admission's commit
 * does not wait for the disk"). What that may cost when Postgres crashes, on a server of the test's
 * own that it crashes (`pg_ctl stop -m immediate`): an admission the crash undoes leaves nothing
 * (no hold, no action, no decision event on the topic) and its dispatch command sends nothing; an
 * admission a claim has read is on disk with the claim.
 *
 * The WAL writer is slowed to 10 s and nothing else writes in the background, so the admission's
 * commit is still in Postgres' memory at the crash; each case checks that it was before crashing.
 */
describe('an admission committed without waiting for the disk, when Postgres crashes', () => {
  let server: PrivatePostgres;
  let db: Database;
  let outbox: OutboxRepository;
  let admission: AdmissionRepository;
  let dispatch: DispatchRepository;
  const released: OutboxRow[] = [];
  const dropped: Array<{ keys: string[]; reason: FlushDropReason }> = [];
  const periodStart = new Date('2026-11-01T00:00:00Z');

  beforeAll(async () => {
    server = await startPrivatePostgres({
      wal_writer_delay: '10s',
      wal_writer_flush_after: '1GB',
      autovacuum: 'off',
      bgwriter_lru_maxpages: '0',
      checkpoint_timeout: '1d',
      max_wal_size: '10GB',
    });
    await migrate(server.url);
    db = new Database(server.url, { poolMax: 4 });
    outbox = new OutboxRepository(db);
    outbox.onCommittedAppend((rows) => released.push(...rows));
    outbox.onFlushDropped((rows, reason) => dropped.push({ keys: rows.map((r) => r.key), reason }));
    admission = new AdmissionRepository(db, outbox, { groupCommit: false });
    dispatch = new DispatchRepository(db, new OutboxRepository(db));
  }, 120_000);

  afterAll(async () => {
    await outbox?.stop();
    await db?.close();
    await server?.dispose();
  });

  /** The server's WAL: what is written out of its memory, and the insert position (past every returned commit). */
  async function wal() {
    const { rows } = await db.pool.query<{ written: string; inserted: string }>(
      `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS written, (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::text AS inserted`,
    );
    return { written: BigInt(rows[0].written), inserted: BigInt(rows[0].inserted) };
  }

  /** Admits one action of a fresh workload; its commit is visible but, checked, not yet out of the server's memory. */
  async function admitUnflushed() {
    const wl = `crash-${randomUUID()}`;
    const input = admitInput(wl, { workloadBudget: { budgetMicrousd: 10_000n, periodStart } });
    expect(await admission.admit(input)).toEqual({ ok: true });
    expect(await db.prisma.action.count({ where: { id: input.action.id } })).toBe(1); // committed: visible to others
    const { written, inserted } = await wal();
    expect(written).toBeLessThan(inserted); // its commit record is not written yet: a crash loses it
    return { wl, input };
  }

  async function crashAndRestart() {
    await server.crash();
    await server.restart();
  }

  async function left(wl: string, actionId: string) {
    const account = await db.prisma.budgetAccount.findUnique({ where: { id: budgetAccountId('workload', wl, periodStart) } });
    return {
      actions: await db.prisma.action.count({ where: { id: actionId } }),
      reservations: await db.prisma.reservation.count({ where: { actionId } }),
      pendingMicrousd: account?.pendingMicrousd ?? 0n,
      inFlight: (await db.prisma.quotaCounter.findFirst({ where: { scope: 'workload', scopeId: wl } }))?.inFlight ?? 0,
      outboxRows: await db.prisma.outboxMessage.count({ where: { key: wl } }),
      attempts: await db.prisma.attempt.count({ where: { actionId } }),
    };
  }

  /** What one admission of a fresh workload holds: its action, reservation, 1 000 micro-USD pending, a slot, its decision event's row. */
  const held = { actions: 1, reservations: 1, pendingMicrousd: 1000n, inFlight: 1, outboxRows: 1 };

  const claim = (actionId: string) => dispatch.claim(primaryClaim(actionId, randomUUID()));

  /** Waits until the gate has given up on `wl`'s rows (its next look after the crash fails or sees the new run). */
  async function droppedFor(wl: string): Promise<FlushDropReason> {
    for (let i = 0; i < 100; i++) {
      const d = dropped.find((x) => x.keys.includes(wl));
      if (d) return d.reason;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the flush gate never gave up on ${wl}`);
  }

  it('a crash before the flush undoes the whole admission; its decision event never leaves and its command sends nothing', async () => {
    const { wl, input } = await admitUnflushed();
    expect(await left(wl, input.action.id)).toEqual({ ...held, attempts: 0 });

    await crashAndRestart();

    expect(released.filter((r) => r.key === wl)).toEqual([]); // nothing went out on the lost commit's word
    expect(['unreadable', 'restarted']).toContain(await droppedFor(wl));
    // nothing left: no hold, no slot, and no outbox row for the sweep to publish either
    expect(await left(wl, input.action.id)).toEqual({
      actions: 0,
      reservations: 0,
      pendingMicrousd: 0n,
      inFlight: 0,
      outboxRows: 0,
      attempts: 0,
    });
    // the dispatch command may already be on its topic: it finds no action and sends nothing
    expect(await claim(input.action.id)).toEqual({ ok: false, reason: 'not_dispatchable' });
    expect(await left(wl, input.action.id)).toMatchObject({ attempts: 0 });
    expect(released.filter((r) => r.key === wl)).toEqual([]);
  });

  it('a claim flushes the admission it read: a crash right after it keeps both, and the sweep publishes the decision event', async () => {
    const { wl, input } = await admitUnflushed();
    expect(await claim(input.action.id)).toEqual({ ok: true }); // a synchronous commit, after the admission in the WAL
    const { written, inserted } = await wal();
    expect(written).toBe(inserted);

    await crashAndRestart();

    expect(['unreadable', 'restarted']).toContain(await droppedFor(wl));
    // all of it, the decision event's row included (for the sweep after the lease)
    expect(await left(wl, input.action.id)).toEqual({ ...held, attempts: 1 });
    expect((await db.prisma.action.findUniqueOrThrow({ where: { id: input.action.id } })).status).toBe('dispatched');
    expect(released.filter((r) => r.key === wl)).toEqual([]);
    const waiting = await outbox.waitingMessages('admissionDecisions');
    expect(waiting.filter((m) => m.key === wl).map((m) => (m.payload as { action_id: string }).action_id)).toEqual([input.action.id]);
  });

  // found by `npm run chaos` crashing Postgres under load: admission exited with pg's "Unhandled
  // 'error' event" (a connection checked out of the pool had no 'error' listener)
  it('a statement running on a checked-out connection when Postgres crashes fails as unavailable, and the process lives on', async () => {
    // the admission's path: a connection checked out within a wait limit (`maxWaitMs`), then the
    // statement on it (without a listener on the connection, jest fails the run: "Unhandled error")
    const running = db.query({ name: 'crash_sleep', text: 'SELECT pg_sleep(30)' }, [], { maxWaitMs: 1000 }).then(
      () => null,
      (err: unknown) => err,
    );
    await new Promise((r) => setTimeout(r, 200));
    await crashAndRestart();
    const failure = await running;
    expect(failure).toBeInstanceOf(Error);
    expect(isDatabaseUnavailable(failure)).toBe(true);
    // the pool replaced the dead connection
    expect(await db.query({ name: 'crash_one', text: 'SELECT 1 AS one' }, [], { maxWaitMs: 1000 })).toEqual([{ one: 1 }]);
  });
});
