/**
 * The global lock order (docs/architecture.md, "Lock order": attempt → action → reservation →
 * quota counters → budget accounts) for the racing pair issue 10 added: an extra attempt's
 * serialised admission (`admitExtraAttempt`: action, reservation, accounts) against the settlement
 * of the failed primary it follows (attempt, then — since this fix — action, then reservation,
 * then accounts), and the winner compare-and-set (`chooseWinner`: the attempt, then the action)
 * against the settlement of that attempt. Before the fix settlement locked the reservation and
 * then updated the action row, and `chooseWinner` locked the action and then the attempt: both
 * pairs could deadlock, and Postgres broke them by aborting one side (counted in
 * `Database.retries.deadlock`). Here they race on the real Postgres and none may be a victim.
 * (The admission-vs-sweeper races are apps/reconciliation/test/lock-order.int-spec.ts.)
 */
import { randomUUID } from 'node:crypto';
import { AdmissionRepository, budgetAccountId, Database, DispatchRepository, LedgerRepository, OutboxRepository } from '@gateway/db';
import { admitInput, primaryClaim } from '@gateway/testing';
import { billedFailureEvent, retryInput, settleOnPostgres, uniqueRoute } from './settle-on-postgres';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
/** the primary's reservation and the retry's own hold */
const HOLD = 1_000n;
/** the failed primary's error answer reported 100 prompt tokens (2.5 micro-USD each at the seeded price) */
const COST = 250n;
/** free rounds, GROUP at a time; and rounds played one at a time by script (the other side starts while settlement holds its first locks) */
const [ROUNDS, GROUP, SCRIPTED] = [Number(process.env.LOCK_ORDER_ROUNDS ?? 240), 12, 40];
const PERIOD = new Date('2026-12-01T00:00:00Z');

describe('extra-attempt admission and the winner against settlement: one lock order', () => {
  const dispatchDb = new Database(url, { poolMax: 12 });
  // room beyond the GROUP open settlement transactions: the price lookup runs outside them
  const settlementDb = new Database(url, { poolMax: 2 * GROUP });
  const dispatchOutbox = new OutboxRepository(dispatchDb);
  const admission = new AdmissionRepository(dispatchDb, dispatchOutbox);
  const dispatch = new DispatchRepository(dispatchDb, dispatchOutbox);
  const settlementOutbox = new OutboxRepository(settlementDb);
  /**
   * Settlement's ledger insert runs after it locked the attempts and the reservations and before it
   * moves the hold (which updates the action): a scripted round starts the other side there and
   * lets settlement go on once that side waits for a lock — the interleaving that deadlocked.
   */
  let midSettlement: (() => Promise<void>) | null = null;
  const ledger = new LedgerRepository(settlementOutbox);
  const recordMany = ledger.recordMany.bind(ledger);
  ledger.recordMany = async (tx, entries) => {
    await midSettlement?.();
    return recordMany(tx, entries);
  };
  const settle = settleOnPostgres(settlementDb, settlementOutbox, ledger);
  const route = uniqueRoute('route-lock-order');
  const workloadId = `wl-lock-order-${randomUUID()}`;

  beforeAll(() => route.seed(dispatchDb));
  afterAll(() => Promise.all([dispatchDb.close(), settlementDb.close()]));

  /** An admitted, dispatched action whose primary failed (a transient 503) and awaits settlement. */
  async function failedPrimary(): Promise<{ actionId: string; primary: string }> {
    const input = admitInput(workloadId, {
      reservation: { id: randomUUID(), reservedOutputTokens: 100, reservedMicrousd: HOLD, priceRevisionId: route.priceId },
      workloadBudget: { budgetMicrousd: 1_000_000_000n, periodStart: PERIOD },
    });
    input.action.routeId = route.routeId;
    expect(await admission.admit(input)).toEqual({ ok: true });
    const primary = randomUUID();
    expect(await dispatch.claim({ ...primaryClaim(input.action.id, primary), routeId: route.routeId })).toEqual({ ok: true });
    await dispatchDb.prisma.attempt.update({ where: { id: primary }, data: { status: 'failed', statusReason: 'upstream 503' } });
    return { actionId: input.action.id, primary };
  }

  // billed usage, and a retry or fallback is about to start: not the action's last word
  const failedEvent = (actionId: string, attemptId: string) =>
    billedFailureEvent({ workloadId, actionId, attemptId, routeId: route.routeId }, false);

  const admitRetry = (actionId: string, attemptId: string) =>
    dispatch.admitExtraAttempt(retryInput(route, actionId, attemptId, HOLD, 'lock-order'));

  /** Until a statement of this database waits for a row lock (at most about 3 s: then it goes on regardless). */
  async function untilBlocked(): Promise<void> {
    for (let i = 0; i < 300; i++) {
      const [{ n }] = await dispatchDb.query<{ n: string }>(
        {
          name: 'lock_order_waiting',
          text: `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        },
        [],
      );
      if (Number(n) > 0) return;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  it(`${SCRIPTED} scripted rounds: the retry's admission, or the primary's winner call, starts while settlement holds the attempt and reservation`, async () => {
    for (let i = 0; i < SCRIPTED; i++) {
      const { actionId, primary } = await failedPrimary();
      let other: Promise<unknown> | null = null;
      midSettlement = async () => {
        other = i % 2 === 0 ? admitRetry(actionId, randomUUID()) : dispatch.chooseWinner({ actionId, attemptId: primary, now: new Date() });
        await untilBlocked();
      };
      expect(await settle.execute(failedEvent(actionId, primary), new Date())).toBe('settled');
      midSettlement = null;
      const result = await other;
      expect(result).toEqual(i % 2 === 0 ? { ok: true, attemptsTotal: 2 } : { won: true, winnerAttemptId: primary });
    }
    expect({ dispatch: dispatchDb.retries.deadlock, settlement: settlementDb.retries.deadlock }).toEqual({ dispatch: 0, settlement: 0 });
  });

  it(`${ROUNDS} rounds: the retry's admission and its winner race the failed primary's settlement; no deadlock, money exact`, async () => {
    for (let g = 0; g < ROUNDS; g += GROUP) {
      const rounds = await Promise.all(Array.from({ length: Math.min(GROUP, ROUNDS - g) }, () => failedPrimary()));
      await Promise.all(
        rounds.map(async ({ actionId, primary }, k) => {
          const retry = randomUUID();
          // the settlement of the failed primary against the retry's admission and then its winner
          // compare-and-set; every other round the primary asks for the winner too (it loses or wins,
          // either way under the same two locks settlement takes)
          const [settled, admitted] = await Promise.all([
            settle.execute(failedEvent(actionId, primary), new Date()),
            (async () => {
              const a = await admitRetry(actionId, retry);
              if (a.ok) await dispatch.chooseWinner({ actionId, attemptId: retry, now: new Date() });
              if (k % 2 === 0) await dispatch.chooseWinner({ actionId, attemptId: primary, now: new Date() });
              return a;
            })(),
          ]);
          expect(settled).toBe('settled');
          expect(admitted).toEqual({ ok: true, attemptsTotal: 2 });
          // the primary settled its cost; the rest stays pending: the event said the action goes on
          // and the retry may still bring usage
          const r = await dispatchDb.prisma.reservation.findUniqueOrThrow({ where: { actionId } });
          expect([r.reservedMicrousd, r.settledMicrousd, r.releasedMicrousd, r.status]).toEqual([2n * HOLD, COST, 0n, 'pending']);
        }),
      );
    }
    expect({ dispatch: dispatchDb.retries.deadlock, settlement: settlementDb.retries.deadlock }).toEqual({ dispatch: 0, settlement: 0 });
    const account = await dispatchDb.prisma.budgetAccount.findUniqueOrThrow({
      where: { id: budgetAccountId('workload', workloadId, PERIOD) },
    });
    // every round settled its primary's cost; a free round holds two attempts' holds, a scripted one one or two
    const rounds = BigInt(ROUNDS + SCRIPTED);
    expect(account.settledMicrousd).toBe(rounds * COST);
    expect(account.pendingMicrousd).toBe(BigInt(ROUNDS) * 2n * HOLD + BigInt(SCRIPTED / 2) * 3n * HOLD - rounds * COST);
  });
});
