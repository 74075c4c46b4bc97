import { randomUUID } from 'node:crypto';
import { AdmissionRepository, budgetAccountId, Database, DispatchRepository, ExtraAttemptInput, OutboxRepository } from '@gateway/db';
import { admitInput, primaryClaim } from '@gateway/testing';

/**
 * The serialised extra-attempt admission and the winner compare-and-set (issue 10) on the real
 * Postgres: a funded hedge grows the reservation and every budget account it holds on by exactly
 * its own hold, every refusal is reachable and writes nothing, and the first winner wins.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const PERIOD = new Date('2026-12-01T00:00:00Z');
const HOLD = 1_000n;

describe('extra attempts: serialised admission and the winner', () => {
  const db = new Database(url, { poolMax: 20 });
  const outbox = new OutboxRepository(db);
  const admission = new AdmissionRepository(db, outbox);
  const repo = new DispatchRepository(db, outbox);

  afterAll(() => db.close());

  /** An admitted action (workload + team budgets, reserving HOLD: admitInput's 1 000) whose primary is claimed. */
  async function dispatchedAction(opts: { team?: string; workloadBudget?: bigint; teamBudget?: bigint; deadlineMs?: number } = {}) {
    const workloadId = `extra-${randomUUID()}`;
    const team = opts.team ?? `team-${randomUUID()}`;
    const input = admitInput(workloadId, {
      workloadBudget: { budgetMicrousd: opts.workloadBudget ?? 10_000n, periodStart: PERIOD },
      scopeBudgets: [{ scope: 'team', scopeId: team, budgetMicrousd: opts.teamBudget ?? 10_000n, periodStart: PERIOD }],
    });
    input.action.deadlineAt = new Date(input.now.getTime() + (opts.deadlineMs ?? 60_000));
    input.action.dispatchDeadlineAt = input.action.deadlineAt;
    expect(await admission.admit(input)).toEqual({ ok: true });
    const primary = randomUUID();
    const claimed = await repo.claim(primaryClaim(input.action.id, primary));
    expect(claimed).toEqual({ ok: true });
    return {
      actionId: input.action.id,
      primary,
      accounts: [budgetAccountId('workload', workloadId, PERIOD), budgetAccountId('team', team, PERIOD)],
    };
  }

  const extra = (actionId: string, over: Partial<ExtraAttemptInput> = {}, limits: Partial<ExtraAttemptInput['limits']> = {}) =>
    repo.admitExtraAttempt({
      actionId,
      attemptId: randomUUID(),
      attemptNo: 2,
      role: 'hedge',
      routeId: 'r',
      routeVersion: 1,
      effectiveCandidates: 1,
      holdMicrousd: HOLD,
      policyRevisionId: 'rev-1',
      priceRevisionId: 'p',
      limits: {
        maxAttempts: 3,
        maxHedges: 1,
        maxRetries: 1,
        maxExtraSpendMicrousd: 5_000n,
        spendFloorMicrousd: 0n,
        minUsefulRemainingMs: 100,
        ...limits,
      },
      claimedBy: 'd',
      now: new Date(),
      ...over,
    });

  async function snapshot(actionId: string, accounts: string[]) {
    const r = await db.prisma.reservation.findUniqueOrThrow({ where: { actionId } });
    const acc = await db.prisma.budgetAccount.findMany({ where: { id: { in: accounts } }, orderBy: { id: 'asc' } });
    return {
      reserved: r.reservedMicrousd,
      pending: acc.map((a) => a.pendingMicrousd),
      attempts: await db.prisma.attempt.count({ where: { actionId } }),
      claims: await db.prisma.dispatchClaim.count({ where: { actionId } }),
    };
  }

  it('a funded hedge: the reservation and every account pending grow by exactly its hold; the attempt records role, hold, revision', async () => {
    const a = await dispatchedAction();
    const before = await snapshot(a.actionId, a.accounts);
    const attemptId = randomUUID();
    // a fallback-like extra attempt on a route priced by another revision: the attempt records that one
    expect(await extra(a.actionId, { attemptId, priceRevisionId: 'p-other-route' })).toEqual({ ok: true, attemptsTotal: 2 });
    const after = await snapshot(a.actionId, a.accounts);
    expect(after.reserved).toBe(before.reserved + HOLD);
    expect(after.pending).toEqual(before.pending.map((p) => p + HOLD));
    expect([after.attempts, after.claims]).toEqual([2, 2]);
    const t = await db.prisma.attempt.findUniqueOrThrow({ where: { id: attemptId } });
    expect([t.role, t.attemptNo, t.holdMicrousd, t.hedgePolicyRevisionId, t.priceRevisionId, t.status, t.winner]).toEqual([
      'hedge',
      2,
      HOLD,
      'rev-1',
      'p-other-route',
      'in_flight',
      false,
    ]);
    // the primary recorded the reservation's amount at admission as its own hold, and the reservation's price revision
    const p = await db.prisma.attempt.findUniqueOrThrow({ where: { id: a.primary } });
    expect([p.holdMicrousd, p.priceRevisionId]).toEqual([1_000n, 'p']);
  });

  it('every refusal is reachable, in order, and writes nothing', async () => {
    const refused = async (
      reason: string,
      run: (a: Awaited<ReturnType<typeof dispatchedAction>>) => Promise<{ ok: boolean }>,
      opts: Parameters<typeof dispatchedAction>[0] & {
        prepare?: (a: Awaited<ReturnType<typeof dispatchedAction>>) => Promise<unknown>;
      } = {},
    ) => {
      const a = await dispatchedAction(opts);
      await opts.prepare?.(a);
      const before = await snapshot(a.actionId, a.accounts);
      const result = await run(a);
      expect({ reason, result }).toEqual({ reason, result: { ok: false, reason } });
      expect(await snapshot(a.actionId, a.accounts)).toEqual(before);
    };
    await refused('winner_chosen', (a) => extra(a.actionId), {
      prepare: (a) => repo.chooseWinner({ actionId: a.actionId, attemptId: a.primary, now: new Date() }),
    });
    await refused('action_terminal', (a) => extra(a.actionId), {
      prepare: (a) => db.prisma.action.update({ where: { id: a.actionId }, data: { status: 'failed' } }),
    });
    await refused('deadline_too_short', (a) => extra(a.actionId, {}, { minUsefulRemainingMs: 60_000 }), { deadlineMs: 5_000 });
    await refused('hedge_limit', (a) => extra(a.actionId, {}, { maxHedges: 0 }));
    await refused('retry_limit', (a) => extra(a.actionId, { role: 'retry' }, { maxRetries: 0 }));
    await refused('attempt_allowance_spent', (a) => extra(a.actionId, { role: 'fallback' }, { maxAttempts: 1 }));
    await refused('spend_allowance_spent', (a) => extra(a.actionId, {}, { maxExtraSpendMicrousd: HOLD - 1n }));
    // team budget 2 500: the primary holds 1 000, a hedge of 1 000 leaves 500 < floor 600
    await refused('spend_floor', (a) => extra(a.actionId, {}, { spendFloorMicrousd: 600n }), { teamBudget: 2_500n });
    await refused('budget_exhausted', (a) => extra(a.actionId), { teamBudget: 1_999n });
    // attempt 2 claimed already (a redelivered admission, or a second dispatcher)
    await refused('already_claimed', (a) => extra(a.actionId, { role: 'retry' }), { prepare: (a) => extra(a.actionId) });
  });

  it('the extra spend counts every prior non-primary attempt: its hold while uncertain', async () => {
    const a = await dispatchedAction();
    expect(await extra(a.actionId, { role: 'retry', attemptNo: 2 })).toEqual({ ok: true, attemptsTotal: 2 });
    // 1 000 already held by the retry; 1 000 more would exceed 1 500
    expect(await extra(a.actionId, { role: 'fallback', attemptNo: 3 }, { maxExtraSpendMicrousd: 1_500n })).toEqual({
      ok: false,
      reason: 'spend_allowance_spent',
    });
    expect(await extra(a.actionId, { role: 'fallback', attemptNo: 3 }, { maxExtraSpendMicrousd: 2_000n })).toEqual({
      ok: true,
      attemptsTotal: 3,
    });
  });

  it('chooseWinner: the first caller wins, the second gets the winner; asking again as the winner is won', async () => {
    const a = await dispatchedAction();
    const hedge = randomUUID();
    expect(await extra(a.actionId, { attemptId: hedge })).toMatchObject({ ok: true });
    const now = new Date();
    const [p, h] = await Promise.all([
      repo.chooseWinner({ actionId: a.actionId, attemptId: a.primary, now }),
      repo.chooseWinner({ actionId: a.actionId, attemptId: hedge, now }),
    ]);
    expect([p.won, h.won].filter(Boolean)).toHaveLength(1);
    const winner = p.won ? a.primary : hedge;
    expect([p.winnerAttemptId, h.winnerAttemptId]).toEqual([winner, winner]);
    expect(await repo.chooseWinner({ actionId: a.actionId, attemptId: winner, now })).toEqual({ won: true, winnerAttemptId: winner });
    const rows = await db.prisma.attempt.findMany({ where: { actionId: a.actionId }, orderBy: { attemptNo: 'asc' } });
    expect(rows.map((r) => r.winner)).toEqual([winner === a.primary, winner === hedge]);
    expect((await db.prisma.action.findUniqueOrThrow({ where: { id: a.actionId } })).winnerAttemptId).toBe(winner);
  });

  it('chooseWinner refuses an attempt of another action and a closed action', async () => {
    const a = await dispatchedAction();
    const b = await dispatchedAction();
    const now = new Date();
    expect(await repo.chooseWinner({ actionId: a.actionId, attemptId: b.primary, now })).toEqual({ won: false, winnerAttemptId: null });
    await db.prisma.action.update({ where: { id: b.actionId }, data: { status: 'expired' } });
    expect(await repo.chooseWinner({ actionId: b.actionId, attemptId: b.primary, now })).toEqual({ won: false, winnerAttemptId: null });
    expect(await repo.chooseWinner({ actionId: randomUUID(), attemptId: b.primary, now })).toEqual({ won: false, winnerAttemptId: null });
  });

  it('12 racing hedge admissions of one action on a shared team budget: one claims, the rest are refused', async () => {
    const team = `team-${randomUUID()}`;
    const a = await dispatchedAction({ team });
    const before = await snapshot(a.actionId, a.accounts);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => extra(a.actionId, { claimedBy: `d-${i}` })));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    const after = await snapshot(a.actionId, a.accounts);
    expect(after.pending).toEqual(before.pending.map((p) => p + HOLD));
    expect(after.attempts).toBe(2);
  });
});
