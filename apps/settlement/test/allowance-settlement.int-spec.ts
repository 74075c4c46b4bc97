/**
 * The experiment allowance through the real settlement use case (issue 10): a primary on the
 * workload's budget and a retry funded by the allowance settle in one action; each attempt's cost
 * lands on the account its own hold sits on (`attempt.funding_account_ids`, read by settlement's
 * `lockAttempts`), the team account holds both, and the action's end releases the rest of both
 * holds. Then a second action's retry under the same, now spent, allowance is refused.
 */
import { randomUUID } from 'node:crypto';
import { AdmissionRepository, budgetAccountId, Database, DispatchRepository, OutboxRepository } from '@gateway/db';
import { allowanceFundingOf, EXPERIMENT_ALLOWANCE_SCOPE } from '@gateway/domain';
import { admitInput, primaryClaim } from '@gateway/testing';
import { billedFailureEvent, retryInput, settleOnPostgres, uniqueRoute } from './settle-on-postgres';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const PERIOD = new Date('2026-12-01T00:00:00Z');
const HOLD = 1_000n;

describe('settlement of an allowance-funded extra attempt', () => {
  const db = new Database(url, { poolMax: 6 });
  const outbox = new OutboxRepository(db);
  const admission = new AdmissionRepository(db, outbox);
  const dispatch = new DispatchRepository(db, outbox);
  const settle = settleOnPostgres(db, outbox);
  const route = uniqueRoute('route-allowance');
  const workloadId = `wl-allowance-${randomUUID()}`;
  const team = `team-allowance-${randomUUID()}`;
  const allowance = allowanceFundingOf(
    { workloadId, routeId: null, experimentAllowance: { budgetMicrousd: HOLD + HOLD / 10n, period: 'month' } },
    new Date('2026-12-15T00:00:00Z'),
  )!;
  const accounts = {
    workload: budgetAccountId('workload', workloadId, PERIOD),
    team: budgetAccountId('team', team, PERIOD),
    allowance: budgetAccountId(EXPERIMENT_ALLOWANCE_SCOPE, allowance.scopeId, allowance.periodStart),
  };

  beforeAll(() => route.seed(db));
  afterAll(() => db.close());

  async function failedPrimary() {
    const input = admitInput(workloadId, {
      reservation: { id: randomUUID(), reservedOutputTokens: 100, reservedMicrousd: HOLD, priceRevisionId: route.priceId },
      workloadBudget: { budgetMicrousd: 1_000_000n, periodStart: PERIOD },
      scopeBudgets: [{ scope: 'team', scopeId: team, budgetMicrousd: 1_000_000n, periodStart: PERIOD }],
    });
    input.action.routeId = route.routeId;
    input.action.deadlineAt = new Date(input.now.getTime() + 60_000);
    input.action.dispatchDeadlineAt = input.action.deadlineAt;
    expect(await admission.admit(input)).toEqual({ ok: true });
    const primary = randomUUID();
    expect(await dispatch.claim({ ...primaryClaim(input.action.id, primary), routeId: route.routeId })).toEqual({ ok: true });
    await db.prisma.attempt.update({ where: { id: primary }, data: { status: 'failed', statusReason: 'upstream 503' } });
    return { actionId: input.action.id, primary };
  }

  const retry = (actionId: string, attemptId: string) =>
    dispatch.admitExtraAttempt({ ...retryInput(route, actionId, attemptId, HOLD, 'allowance'), allowance });

  const billed = (actionId: string, attemptId: string, actionFinal: boolean) =>
    billedFailureEvent({ workloadId, actionId, attemptId, routeId: route.routeId }, actionFinal);

  async function account(id: string) {
    const a = await db.prisma.budgetAccount.findUniqueOrThrow({ where: { id } });
    expect(a.pendingMicrousd + a.unresolvedMicrousd + a.settledMicrousd).toBeLessThanOrEqual(a.budgetMicrousd);
    return { pending: a.pendingMicrousd, unresolved: a.unresolvedMicrousd, settled: a.settledMicrousd };
  }

  const costOf = async (attemptId: string) => (await db.prisma.ledgerEntry.findFirstOrThrow({ where: { attemptId } })).costMicrousd;

  it("each attempt's cost lands on its funder; the action's end releases the rest of both holds; the spent allowance refuses the next", async () => {
    const { actionId, primary } = await failedPrimary();
    expect(await settle.execute(billed(actionId, primary, false), new Date())).toBe('settled');
    const retryId = randomUUID();
    expect(await retry(actionId, retryId)).toEqual({ ok: true, attemptsTotal: 2 });
    expect(await account(accounts.allowance)).toEqual({ pending: HOLD, unresolved: 0n, settled: 0n });
    await db.prisma.attempt.update({ where: { id: retryId }, data: { status: 'failed', statusReason: 'upstream 503' } });
    await db.prisma.action.update({ where: { id: actionId }, data: { status: 'failed' } });
    expect(await settle.execute(billed(actionId, retryId, true), new Date())).toBe('settled');

    const [primaryCost, retryCost] = [await costOf(primary), await costOf(retryId)];
    expect(primaryCost).toBeGreaterThan(0n);
    expect(await account(accounts.workload)).toEqual({ pending: 0n, unresolved: 0n, settled: primaryCost });
    expect(await account(accounts.allowance)).toEqual({ pending: 0n, unresolved: 0n, settled: retryCost });
    expect(await account(accounts.team)).toEqual({ pending: 0n, unresolved: 0n, settled: primaryCost + retryCost });
    const r = await db.prisma.reservation.findUniqueOrThrow({ where: { actionId } });
    expect([r.settledMicrousd, r.releasedMicrousd, r.status]).toEqual([
      primaryCost + retryCost,
      2n * HOLD - primaryCost - retryCost,
      'settled',
    ]);

    // the allowance (1.1 holds) has retryCost settled: another hold does not fit
    const next = await failedPrimary();
    expect(await retry(next.actionId, randomUUID())).toEqual({ ok: false, reason: 'experiment_allowance_spent' });
    expect(await account(accounts.workload)).toEqual({ pending: HOLD, unresolved: 0n, settled: primaryCost });
  });
});
