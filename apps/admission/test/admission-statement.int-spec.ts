import { randomUUID } from 'node:crypto';
import { AdmissionRepository, AdmitInput, budgetAccountId, Database, OutboxRepository, PreparedStatement } from '@gateway/db';
import type { OutboxRow } from '@gateway/messaging';
import { admitInput } from '@gateway/testing';

/**
 * Admission is one autocommit statement (`admission_admit`, issue 12): a refusal must undo what the
 * admission's earlier steps wrote, and a group of admissions in one statement must be decided in
 * order, each as if alone, a refusal undoing that one only. Real Postgres.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('admission as one autocommit statement', () => {
  const db = new Database(url, { poolMax: 10 });
  const outbox = new OutboxRepository(db);
  const alone = new AdmissionRepository(db, outbox, { groupCommit: false });
  const grouped = new AdmissionRepository(db, outbox);
  const periodStart = new Date('2026-11-01T00:00:00Z');
  const windowStart = new Date(Math.floor(Date.now() / 60000) * 60000);

  afterAll(async () => {
    await outbox.stop();
    await db.close();
  });

  /** Statements that admitted (the outbox's look at the WAL position goes through `query` too). */
  const admissionStatements = (spy: jest.SpyInstance) =>
    spy.mock.calls.filter(([statement]) => (statement as PreparedStatement).text.includes('admission_admit(')).length;

  const input = (workloadId: string, over: Partial<AdmitInput> = {}) =>
    admitInput(workloadId, { workloadBudget: { budgetMicrousd: 10_000n, periodStart }, ...over });

  /** What an admission of `wl` leaves behind: in-flight slots, tokens, workload and exception pending, actions, outbox rows. */
  async function state(wl: string, exceptionId?: string) {
    const slot = await db.prisma.quotaCounter.findFirst({ where: { scope: 'workload', scopeId: wl } });
    const tokens = await db.prisma.quotaCounter.findFirst({ where: { scope: 'workload_tokens_per_minute', scopeId: wl } });
    const workload = await db.prisma.budgetAccount.findUnique({ where: { id: budgetAccountId('workload', wl, periodStart) } });
    const exception = exceptionId
      ? await db.prisma.budgetAccount.findUnique({ where: { id: budgetAccountId('exception', exceptionId, new Date(0)) } })
      : null;
    return {
      inFlight: slot?.inFlight ?? 0,
      tokens: tokens?.tokens ?? 0,
      workloadPending: workload?.pendingMicrousd ?? 0n,
      exceptionPending: exception?.pendingMicrousd ?? 0n,
      actions: await db.prisma.action.count({ where: { workloadId: wl } }),
      reservations: await db.prisma.reservation.count({ where: { workloadAccountId: budgetAccountId('workload', wl, periodStart) } }),
      outbox: await db.prisma.outboxMessage.count({ where: { key: wl } }),
    };
  }

  it('a refusal at the last budget step undoes the slot, tokens and workload hold the statement had already written', async () => {
    const wl = `undo-${randomUUID()}`;
    const exceptionId = randomUUID();
    const over = {
      tokenRate: { scopeId: wl, windowStart, tokens: 110, limit: 10_000 },
      exceptionBudget: { exceptionId, budgetMicrousd: 1_500n },
    };
    expect(await alone.admit(input(wl, over))).toEqual({ ok: true });
    const before = await state(wl, exceptionId);
    expect(before).toEqual({
      inFlight: 1,
      tokens: 110,
      workloadPending: 1000n,
      exceptionPending: 1000n,
      actions: 1,
      reservations: 1,
      outbox: 1,
    });

    // the exception budget refuses: slot, token counter and workload account were updated first, in the same statement
    const refused = await alone.admit(input(wl, over));
    expect(refused).toEqual({ ok: false, code: 'budget_exhausted', scope: 'exception', quotaScope: 'exception', remainingMicrousd: 500n });
    expect(await state(wl, exceptionId)).toEqual(before);
  });

  it('a unique violation on the action (reused idempotency key) undoes every counter and hold before it', async () => {
    const wl = `undo-idem-${randomUUID()}`;
    const over = { tokenRate: { scopeId: wl, windowStart, tokens: 50, limit: 10_000 } };
    const first = input(wl, over);
    first.action.idempotencyKey = 'k';
    expect(await alone.admit(first)).toEqual({ ok: true });
    const before = await state(wl);
    const second = input(wl, over);
    second.action.idempotencyKey = 'k';
    expect(await alone.admit(second)).toEqual({ ok: false, code: 'idempotency_conflict' });
    expect(await state(wl)).toEqual(before);
    expect(before).toMatchObject({ inFlight: 1, tokens: 50, workloadPending: 1000n, actions: 1 });
  });

  // A fresh workload has no counter or budget rows yet: the group is decided one admission at a time
  // (admission_admit_one, which creates them); with the rows in place, in memory (admission_admit_group).
  it.each([
    ['a fresh workload', 0],
    ['existing rows', 1],
  ])('one statement decides a group in arrival order (%s): a too-large request among small ones is refused alone', async (_, before) => {
    const wl = `group-${randomUUID()}`;
    const tokenRate = { scopeId: wl, windowStart, tokens: 100, limit: 100 * (6 + before) };
    for (let i = 0; i < before; i++) expect(await grouped.admit(input(wl, { tokenRate }))).toEqual({ ok: true });
    const statements = jest.spyOn(db, 'query');
    const amounts = [1000n, 1000n, 1000n, 9000n, 1000n, 1000n, 1000n];
    const inputs = amounts.map((reservedMicrousd) => {
      const i = input(wl, { tokenRate });
      i.reservation.reservedMicrousd = reservedMicrousd;
      return i;
    });
    // same event-loop turn: one group, one statement
    const results = await Promise.all(inputs.map((i) => grouped.admit(i)));
    expect(admissionStatements(statements)).toBe(1);
    statements.mockRestore();

    // in sequence: 1000, 2000, 3000 (plus what was there), then 9000 would overspend 10 000 (refused),
    // then 1000 each until the token quota (6 per window) is used up
    expect(results.map((r) => r.ok)).toEqual([true, true, true, false, true, true, true]);
    expect(results[3]).toMatchObject({ ok: false, code: 'budget_exhausted', scope: 'workload' });
    const after = await state(wl);
    expect(after).toEqual({
      inFlight: 6 + before,
      tokens: 600 + 100 * before,
      workloadPending: BigInt(6000 + 1000 * before),
      exceptionPending: 0n,
      actions: 6 + before,
      reservations: 6 + before,
      outbox: 6 + before,
    });
    expect(await db.prisma.action.findUnique({ where: { id: inputs[3].action.id } })).toBeNull();
    // the next one in the window is refused by the token quota, before the budget
    expect(await grouped.admit(input(wl, { tokenRate }))).toEqual({
      ok: false,
      code: 'token_quota_exceeded',
      limit: 100 * (6 + before),
      quotaScope: 'workload',
    });
  });

  it('a group with unique violations and an in-flight refusal in it: the others commit, each refusal leaves nothing', async () => {
    const wl = `group-mixed-${randomUUID()}`;
    const taken = input(wl);
    taken.action.idempotencyKey = 'taken';
    expect(await grouped.admit(taken)).toEqual({ ok: true });

    const concurrency = { scope: 'workload' as const, scopeId: wl, maxInFlight: 5 };
    const inputs = Array.from({ length: 7 }, () => input(wl, { concurrency }));
    inputs[1].action.idempotencyKey = 'taken';
    inputs[2].action.idempotencyKey = 'dup';
    inputs[3].action.idempotencyKey = 'dup';
    const statements = jest.spyOn(db, 'query');
    const results = await Promise.all(inputs.map((i) => grouped.admit(i)));
    expect(admissionStatements(statements)).toBe(1);
    statements.mockRestore();
    // one slot was taken before; a conflict frees nothing and takes nothing; slots 2–5 go to 0, 2, 4, 5; 6 is refused
    expect(results).toEqual([
      { ok: true },
      { ok: false, code: 'idempotency_conflict' },
      { ok: true },
      { ok: false, code: 'idempotency_conflict' },
      { ok: true },
      { ok: true },
      { ok: false, code: 'concurrency_limit_exceeded', inFlight: 5 },
    ]);
    expect(await state(wl)).toEqual({
      inFlight: 5,
      tokens: 0,
      workloadPending: 5000n,
      exceptionPending: 0n,
      actions: 5,
      reservations: 5,
      outbox: 5,
    });
  });

  it('a group with an item the server refuses for its data: that one fails alone, the others are admitted', async () => {
    // The statement is one autocommit call, so the refusal (an int4 column out of range) undid the
    // whole group; StatementGroups then sends each item alone. Before, every admission of the
    // workload that shared the statement got the error (a 500 each).
    const wl = `group-poison-${randomUUID()}`;
    const inputs = Array.from({ length: 4 }, () => input(wl));
    inputs[2].reservation.reservedOutputTokens = 2 ** 40;
    const statements = jest.spyOn(db, 'query');
    const results = await Promise.allSettled(inputs.map((i) => grouped.admit(i)));
    const calls = admissionStatements(statements);
    statements.mockRestore();
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as { code?: string }).code))).toEqual([
      { ok: true },
      { ok: true },
      '22003',
      { ok: true },
    ]);
    expect(calls).toBe(1 + inputs.length); // the group, then each alone
    expect(await state(wl)).toMatchObject({ inFlight: 3, workloadPending: 3000n, actions: 3, reservations: 3, outbox: 3 });
  });

  it('groups racing from two repositories on one budget: no overspend, every hold has its reservation', async () => {
    const wl = `group-race-${randomUUID()}`;
    const other = new Database(url, { poolMax: 10 });
    try {
      const second = new AdmissionRepository(other, new OutboxRepository(other));
      const results = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? grouped : second).admit(input(wl))));
      expect(results.filter((r) => r.ok)).toHaveLength(10);
      expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.code === 'budget_exhausted')).toBe(true);
      expect(await state(wl)).toEqual({
        inFlight: 10,
        tokens: 0,
        workloadPending: 10_000n,
        exceptionPending: 0n,
        actions: 10,
        reservations: 10,
        outbox: 10,
      });
    } finally {
      await other.close();
    }
  });
  // docs/decisions.md, "The admission's commit does not wait for the disk"
  it('commits without waiting for the WAL flush: the statement turns synchronous_commit off for its own transaction only', async () => {
    const wl = `async-${randomUUID()}`;
    // the repository's statement and values, kept from Postgres: the test sends them itself below
    let sent: [PreparedStatement, unknown[]] | undefined;
    const statements = jest.spyOn(db, 'query').mockImplementationOnce(async (statement, values) => {
      sent = [statement, values];
      return [{ refused: null, outbox_id: null, server_started: 'not sent' }] as never;
    });
    expect(await alone.admit(input(wl))).toEqual({ ok: true });
    statements.mockRestore();
    const [statement, values] = sent!;

    const client = await db.pool.connect();
    try {
      const serverSetting = (await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit as string;
      await client.query('BEGIN');
      const rows = (await client.query(statement.text, values)).rows;
      expect(rows).toEqual([expect.objectContaining({ refused: null, commit_mode: 'off', server_started: expect.any(String) })]);
      expect((await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe('off');
      await client.query('ROLLBACK');
      // local to the transaction: the pooled connection is back to the server's setting
      expect((await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit).toBe(serverSetting);
    } finally {
      client.release();
    }
  });

  it('hands its decision events to the relay only after the WAL flush has passed the commit', async () => {
    const wl = `flush-${randomUUID()}`;
    const order: string[] = [];
    const flushedAtRelease: bigint[] = [];
    const lsn = async (fn: 'insert' | 'flush') =>
      BigInt((await db.pool.query(`SELECT (pg_current_wal_${fn}_lsn() - '0/0'::pg_lsn)::text AS n`)).rows[0].n as string);
    const released = new Promise<OutboxRow[]>((resolve) =>
      outbox.onCommittedAppend((rows) => {
        if (!rows.some((r) => r.key === wl)) return;
        order.push('released');
        void lsn('flush').then((f) => {
          flushedAtRelease.push(f);
          resolve(rows);
        });
      }),
    );
    expect(await alone.admit(input(wl))).toEqual({ ok: true });
    order.push('admitted');
    const afterCommit = await lsn('insert'); // past the admission's commit record
    const rows = await released;
    expect(order).toEqual(['admitted', 'released']);
    expect(rows.filter((r) => r.key === wl)).toHaveLength(1);
    expect(flushedAtRelease[0]).toBeGreaterThanOrEqual(afterCommit);
  });
});
