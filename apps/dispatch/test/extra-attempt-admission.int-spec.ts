import { randomUUID } from 'node:crypto';
import {
  AdmissionRepository,
  budgetAccountId,
  Database,
  DispatchRepository,
  ExtraAttemptInput,
  OutboxRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { allowanceFundingOf, applyMovement, EXPERIMENT_ALLOWANCE_SCOPE, Movement, planMoveToUnresolved, planSettle } from '@gateway/domain';
import { admitInput, primaryClaim } from '@gateway/testing';

/**
 * The serialised extra-attempt admission and the winner compare-and-set (issue 10) on the real
 * Postgres: a funded hedge grows the reservation and every budget account it holds on by exactly
 * its own hold, every refusal is reachable and writes nothing, and the first winner wins. Under an
 * experiment allowance the hedge holds on the allowance and the team account, never the workload's;
 * an allowance without room refuses it with its own reason and leaves the primary alone; settling,
 * moving to unresolved and releasing move each attempt's money on the accounts its hold sits on;
 * racing hedges of many actions on one allowance never overspend it.
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

  describe('under an experiment allowance', () => {
    const holds = new ReservationHoldRepository();
    const funded = (a: Awaited<ReturnType<typeof dispatchedAction>>) => ({ ...a, workload: a.accounts[0], team: a.accounts[1] });
    /** The allowance a policy of `lineage` (its workload) with `budgetMicrousd` a month funds, and its account's id. */
    const allowanceOf = (lineage: string, budgetMicrousd: bigint) => {
      const funding = allowanceFundingOf(
        { workloadId: lineage, routeId: null, experimentAllowance: { budgetMicrousd, period: 'month' } },
        new Date('2026-12-15T00:00:00Z'),
      )!;
      return { ...funding, accountId: budgetAccountId(EXPERIMENT_ALLOWANCE_SCOPE, funding.scopeId, funding.periodStart) };
    };

    async function account(id: string) {
      const a = await db.prisma.budgetAccount.findUnique({ where: { id } });
      if (!a) return null;
      expect(a.pendingMicrousd + a.unresolvedMicrousd + a.settledMicrousd).toBeLessThanOrEqual(a.budgetMicrousd);
      return { pending: a.pendingMicrousd, unresolved: a.unresolvedMicrousd, settled: a.settledMicrousd };
    }

    /** One step through the repository every money path uses, on the attempt's funding set. */
    async function move(
      actionId: string,
      plan: (r: Awaited<ReturnType<ReservationHoldRepository['lock']>> & object) => Movement,
      funding: string[] | null,
    ) {
      await db.transaction(async (tx) => {
        const r = (await holds.lock(tx, actionId))!;
        const m = plan(r);
        applyMovement(r, m);
        await holds.moveMany(tx, [{ r, steps: [m], reason: 'test', fundings: [funding] }], new Date());
      });
    }

    it('a hedge under an allowance holds on the allowance and the team, not the workload; settling moves each attempt on its own accounts', async () => {
      const a = funded(await dispatchedAction({ teamBudget: 1_000_000n }));
      const al = allowanceOf(`lineage-${randomUUID()}`, 5_000n);
      const attemptId = randomUUID();
      expect(await extra(a.actionId, { attemptId, allowance: al })).toEqual({ ok: true, attemptsTotal: 2 });
      expect(await account(a.workload)).toEqual({ pending: HOLD, unresolved: 0n, settled: 0n }); // the primary's only
      expect(await account(al.accountId)).toEqual({ pending: HOLD, unresolved: 0n, settled: 0n });
      expect(await account(a.team)).toEqual({ pending: 2n * HOLD, unresolved: 0n, settled: 0n });
      const t = await db.prisma.attempt.findUniqueOrThrow({ where: { id: attemptId } });
      expect(t.fundingAccountIds).toEqual([al.accountId, a.team]);
      const allowanceAccount = await db.prisma.budgetAccount.findUniqueOrThrow({ where: { id: al.accountId } });
      expect([allowanceAccount.scope, allowanceAccount.budgetMicrousd]).toEqual([EXPERIMENT_ALLOWANCE_SCOPE, 5_000n]);

      // the hedge settles at 300 (action not over yet), then the primary at 200 and the rest is released
      await move(a.actionId, (r) => planSettle(r, { costMicrousd: 300n, actionDone: false }).movement, t.fundingAccountIds);
      expect(await account(al.accountId)).toEqual({ pending: HOLD - 300n, unresolved: 0n, settled: 300n });
      expect(await account(a.workload)).toEqual({ pending: HOLD, unresolved: 0n, settled: 0n });
      await move(a.actionId, (r) => planSettle(r, { costMicrousd: 200n, actionDone: true }).movement, null);
      expect(await account(al.accountId)).toEqual({ pending: 0n, unresolved: 0n, settled: 300n });
      expect(await account(a.workload)).toEqual({ pending: 0n, unresolved: 0n, settled: 200n });
      expect(await account(a.team)).toEqual({ pending: 0n, unresolved: 0n, settled: 500n });
      const f = await db.prisma.reservationFunding.findMany({ where: { accountId: al.accountId } });
      expect(f.map((x) => [x.pendingMicrousd, x.unresolvedMicrousd])).toEqual([[0n, 0n]]);
    });

    it("a hedge without usage evidence moves its own hold to unresolved on the allowance; the workload's stays pending", async () => {
      const a = funded(await dispatchedAction({ teamBudget: 1_000_000n }));
      const al = allowanceOf(`lineage-${randomUUID()}`, 5_000n);
      const attemptId = randomUUID();
      expect(await extra(a.actionId, { attemptId, allowance: al })).toEqual({ ok: true, attemptsTotal: 2 });
      const funding = [al.accountId, a.team];
      await move(a.actionId, (r) => planMoveToUnresolved(r, [HOLD]).movement, funding);
      expect(await account(al.accountId)).toEqual({ pending: 0n, unresolved: HOLD, settled: 0n });
      expect(await account(a.workload)).toEqual({ pending: HOLD, unresolved: 0n, settled: 0n });
      expect(await account(a.team)).toEqual({ pending: HOLD, unresolved: HOLD, settled: 0n });
    });

    it('an allowance without room refuses the hedge with experiment_allowance_spent; its floor is the spend floor; the primary is untouched', async () => {
      const lineage = `lineage-${randomUUID()}`;
      const first = funded(await dispatchedAction({ teamBudget: 1_000_000n }));
      expect(await extra(first.actionId, { allowance: allowanceOf(lineage, 1_500n) })).toEqual({ ok: true, attemptsTotal: 2 });
      const second = funded(await dispatchedAction({ teamBudget: 1_000_000n }));
      const before = { workload: await account(second.workload), team: await account(second.team) };
      expect(await extra(second.actionId, { allowance: allowanceOf(lineage, 1_500n) })).toEqual({
        ok: false,
        reason: 'experiment_allowance_spent',
      });
      expect({ workload: await account(second.workload), team: await account(second.team) }).toEqual(before);
      expect(await db.prisma.attempt.count({ where: { actionId: second.actionId } })).toBe(1);
      const p = await db.prisma.attempt.findUniqueOrThrow({ where: { id: second.primary } });
      expect(p.status).toBe('in_flight');
      expect(await account(allowanceOf(lineage, 0n).accountId)).toEqual({ pending: HOLD, unresolved: 0n, settled: 0n });
      // room for the hold, but not for the floor after it
      const third = funded(await dispatchedAction({ teamBudget: 1_000_000n }));
      const roomy = allowanceOf(`lineage-${randomUUID()}`, 1_500n);
      expect(await extra(third.actionId, { allowance: roomy }, { spendFloorMicrousd: 600n })).toEqual({
        ok: false,
        reason: 'spend_floor',
      });
      // and without an allowance the same hedge draws on the workload, as before
      expect(await extra(third.actionId, { allowance: null })).toEqual({ ok: true, attemptsTotal: 2 });
      expect(await account(third.workload)).toEqual({ pending: 2n * HOLD, unresolved: 0n, settled: 0n });
    });

    it('a new allowance account created by two hedges at once: both are decided on it, neither fails on the account', async () => {
      // Before migration 20261203800000 the second creator could hit the account's other unique
      // key (its id) and fail with a unique violation; many fresh allowances raised by two hedges
      // at once make the collision likely (the same race admission had, migration 20261203700000).
      const pairs = await Promise.all(
        Array.from({ length: 60 }, async () => {
          const team = `team-${randomUUID()}`;
          return [await dispatchedAction({ team, teamBudget: 1_000_000n }), await dispatchedAction({ team, teamBudget: 1_000_000n })];
        }),
      );
      const settled = await Promise.allSettled(
        pairs.map(async (pair) => {
          const al = allowanceOf(`lineage-${randomUUID()}`, 10n * HOLD);
          const results = await Promise.all(pair.map((a) => extra(a.actionId, { allowance: al })));
          return { results, account: await account(al.accountId) };
        }),
      );
      expect(settled.filter((s) => s.status === 'rejected')).toEqual([]);
      for (const s of settled) {
        if (s.status !== 'fulfilled') continue;
        expect(s.value.results).toEqual([
          { ok: true, attemptsTotal: 2 },
          { ok: true, attemptsTotal: 2 },
        ]);
        expect(s.value.account).toEqual({ pending: 2n * HOLD, unresolved: 0n, settled: 0n });
      }
    });

    it('24 racing hedges of different actions on one allowance of 10 holds: exactly 10 admitted, the sum rule holds', async () => {
      const team = `team-${randomUUID()}`;
      const al = allowanceOf(`lineage-${randomUUID()}`, 10n * HOLD);
      const actions = await Promise.all(
        Array.from({ length: 24 }, async () => funded(await dispatchedAction({ team, teamBudget: 1_000_000n }))),
      );
      const results = await Promise.all(actions.map((a) => extra(a.actionId, { allowance: al })));
      expect(results.filter((r) => r.ok)).toHaveLength(10);
      expect(results.filter((r) => !r.ok).map((r) => (r.ok ? null : r.reason))).toEqual(Array(14).fill('experiment_allowance_spent'));
      expect(await account(al.accountId)).toEqual({ pending: 10n * HOLD, unresolved: 0n, settled: 0n });
      expect(await account(actions[0].team)).toEqual({ pending: 34n * HOLD, unresolved: 0n, settled: 0n });
      for (const a of actions) expect(await account(a.workload)).toEqual({ pending: HOLD, unresolved: 0n, settled: 0n });
    });
  });
});
