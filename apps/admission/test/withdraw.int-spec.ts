import { randomUUID } from 'node:crypto';
import {
  ActionWithdrawal,
  AdmissionRepository,
  budgetAccountId,
  Database,
  DispatchRepository,
  OutboxRepository,
  ReconciliationRepository,
  ReservationHoldRepository,
  voidUndispatchedAction,
  voidUndispatchedActions,
  VoidPorts,
} from '@gateway/db';
import { admitInput, primaryClaim } from '@gateway/testing';

/**
 * Admission withdraws an admitted action whose answer it will not wait for (its publish failed, or
 * its client had the 503 before the reservation committed): `ActionWithdrawal`, the sweeper's void
 * (`voidUndispatchedAction`) without waiting for the dispatch deadline. Real Postgres, the real claim.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('withdrawing an admitted action, on Postgres', () => {
  const db = new Database(url, { poolMax: 10 });
  const admission = new AdmissionRepository(db, new OutboxRepository(db));
  const dispatch = new DispatchRepository(db, new OutboxRepository(db));
  const warnings: unknown[] = [];
  const withdrawals = new ActionWithdrawal(db, { warn: (o: unknown) => void warnings.push(o) } as VoidPorts['log']);
  const periodStart = new Date('2026-11-01T00:00:00Z');
  const withdraw = (actionId: string) => withdrawals.withdraw(actionId, new Date());

  afterAll(() => db.close());

  async function admitted(wl = `withdraw-${randomUUID()}`, idempotencyKey: string | null = null) {
    const input = admitInput(wl, { workloadBudget: { budgetMicrousd: 100_000n, periodStart } });
    input.action.idempotencyKey = idempotencyKey;
    expect(await admission.admit(input)).toEqual({ ok: true });
    return { wl, actionId: input.action.id };
  }

  async function state(wl: string, actionId: string) {
    const [action, reservation, account, slots] = await Promise.all([
      db.prisma.action.findUniqueOrThrow({ where: { id: actionId } }),
      db.prisma.reservation.findUniqueOrThrow({ where: { actionId } }),
      db.prisma.budgetAccount.findUniqueOrThrow({ where: { id: budgetAccountId('workload', wl, periodStart) } }),
      db.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: wl } }),
    ]);
    return { action, reservation, account, inFlight: slots.inFlight };
  }

  it('gives back the slot and the hold at once, long before the dispatch deadline, and expires the action', async () => {
    const { wl, actionId } = await admitted();
    const before = await state(wl, actionId);
    expect(before.inFlight).toBe(1);
    expect(before.account.pendingMicrousd).toBe(1000n);
    expect(before.action.dispatchDeadlineAt.getTime()).toBeGreaterThan(Date.now() + 5_000);

    expect(await withdraw(actionId)).toBe('voided');

    const after = await state(wl, actionId);
    expect(after.action.status).toBe('expired');
    expect(after.action.statusReason).toMatch(/withdrawn by admission/);
    expect(after.reservation.status).toBe('voided');
    expect(after.reservation.releasedMicrousd).toBe(1000n);
    expect(after.account.pendingMicrousd).toBe(0n);
    expect(after.account.settledMicrousd + after.account.unresolvedMicrousd).toBe(0n);
    expect(after.inFlight).toBe(0);
  });

  it('a command that reaches dispatch after the withdrawal is refused by the claim: nothing would be sent', async () => {
    const { actionId } = await admitted();
    expect(await withdraw(actionId)).toBe('voided');
    expect(await dispatch.claim(primaryClaim(actionId, randomUUID()))).toEqual({ ok: false, reason: 'not_dispatchable' });
    expect(await db.prisma.attempt.count({ where: { actionId } })).toBe(0);
  });

  it('an action a dispatcher claimed first is not withdrawn: it runs, and its hold stays for settlement', async () => {
    const { wl, actionId } = await admitted();
    expect(await dispatch.claim(primaryClaim(actionId, randomUUID()))).toEqual({ ok: true });
    expect(await withdraw(actionId)).toBe('not_voidable');
    const after = await state(wl, actionId);
    expect(after.action.status).toBe('dispatched');
    expect(after.reservation.status).toBe('pending');
    expect(after.account.pendingMicrousd).toBe(1000n);
    expect(after.inFlight).toBe(1);
  });

  it('withdrawn twice (a retry, or the sweeper meanwhile): the money moves once', async () => {
    const { wl, actionId } = await admitted();
    const outcomes = await Promise.all([withdraw(actionId), withdraw(actionId), withdraw(actionId)]);
    expect(outcomes.filter((o) => o === 'voided')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'not_voidable')).toHaveLength(2);
    const after = await state(wl, actionId);
    expect(after.reservation.releasedMicrousd).toBe(1000n);
    expect(after.account.pendingMicrousd).toBe(0n);
    expect(after.inFlight).toBe(0);
  });

  it('raced against the claim, 20 times: exactly one of the two wins each time, and the books agree with the winner', async () => {
    const wl = `withdraw-race-${randomUUID()}`;
    let claimedRuns = 0;
    for (let i = 0; i < 20; i++) {
      const { actionId } = await admitted(wl);
      const [claim, outcome] = await Promise.all([dispatch.claim(primaryClaim(actionId, randomUUID())), withdraw(actionId)]);
      expect(claim.ok !== (outcome === 'voided')).toBe(true);
      const after = await state(wl, actionId);
      if (claim.ok) {
        claimedRuns++;
        expect(after.action.status).toBe('dispatched');
        expect(after.reservation.status).toBe('pending');
      } else {
        expect(after.action.status).toBe('expired');
        expect(after.reservation.status).toBe('voided');
        expect(await db.prisma.attempt.count({ where: { actionId } })).toBe(0);
      }
    }
    const final = await db.prisma.budgetAccount.findUniqueOrThrow({ where: { id: budgetAccountId('workload', wl, periodStart) } });
    // only the claimed actions still hold their 1000 each; every withdrawn one gave its slot back
    expect(final.pendingMicrousd).toBe(BigInt(claimedRuns) * 1000n);
    const slots = await db.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: wl } });
    expect(slots.inFlight).toBe(claimedRuns);
  });

  describe('its Idempotency-Key', () => {
    it('is released: nothing was sent, so a retry with the same key is admitted as a new action', async () => {
      const wl = `withdraw-key-${randomUUID()}`;
      const key = `idem-${randomUUID()}`;
      const first = await admitted(wl, key);
      expect((await admission.findByIdempotencyKey(wl, key))?.id).toBe(first.actionId);
      expect(await withdraw(first.actionId)).toBe('voided');
      expect(await admission.findByIdempotencyKey(wl, key)).toBeNull();
      expect((await state(wl, first.actionId)).action.statusReason).toMatch(/Idempotency-Key, if any, released/);

      const second = await admitted(wl, key);
      expect((await admission.findByIdempotencyKey(wl, key))?.id).toBe(second.actionId);
      // the first can never run now: its late command is refused
      expect(await dispatch.claim(primaryClaim(first.actionId, randomUUID()))).toEqual({ ok: false, reason: 'not_dispatchable' });
    });

    it('is kept when a dispatcher claimed the action first: a retry is a replay, never a second dispatch', async () => {
      const wl = `withdraw-key-${randomUUID()}`;
      const key = `idem-${randomUUID()}`;
      const { actionId } = await admitted(wl, key);
      expect(await dispatch.claim(primaryClaim(actionId, randomUUID()))).toEqual({ ok: true });
      expect(await withdraw(actionId)).toBe('not_voidable');
      expect(await admission.findByIdempotencyKey(wl, key)).toMatchObject({ id: actionId, status: 'dispatched' });
      const twin = admitInput(wl, { workloadBudget: { budgetMicrousd: 100_000n, periodStart } });
      twin.action.idempotencyKey = key;
      expect(await admission.admit(twin)).toMatchObject({ ok: false, code: 'idempotency_conflict' });
    });

    it("is released by the sweeper's void too (past the dispatch deadline, never dispatched)", async () => {
      const wl = `withdraw-key-${randomUUID()}`;
      const key = `idem-${randomUUID()}`;
      const { actionId } = await admitted(wl, key);
      const ports: VoidPorts = {
        store: new ReconciliationRepository(db),
        holds: new ReservationHoldRepository(),
        log: { warn: () => undefined },
      };
      const later = new Date(Date.now() + 60_000);
      expect(await voidUndispatchedAction(ports, actionId, { deadlinePassedBefore: later }, later)).toBe('voided');
      expect(await admission.findByIdempotencyKey(wl, key)).toBeNull();
      expect((await state(wl, actionId)).action.statusReason).toMatch(/dispatch deadline; its Idempotency-Key, if any, released/);
    });
  });

  describe('several at once', () => {
    const ports = (): VoidPorts => ({
      store: new ReconciliationRepository(db),
      holds: new ReservationHoldRepository(),
      log: { warn: () => undefined },
    });

    it('withdrawals that arrive together go in one transaction, each decided as if alone: slots back per workload, a claimed one left to run', async () => {
      const [a1, a2] = [await admitted(), await admitted()];
      const a3 = await admitted(a1.wl);
      const claimed = await admitted(a2.wl);
      expect(await dispatch.claim(primaryClaim(claimed.actionId, randomUUID()))).toEqual({ ok: true });

      const outcomes = await Promise.all([a1, a2, a3, claimed].map((a) => withdraw(a.actionId)));
      expect(outcomes).toEqual(['voided', 'voided', 'voided', 'not_voidable']);

      // one transaction: the three rows carry the same writing transaction id
      const xmins = await db.prisma.$queryRawUnsafe<Array<{ xmin: string }>>(
        'SELECT DISTINCT xmin::text AS xmin FROM action WHERE id = ANY($1::text[])',
        [a1, a2, a3].map((a) => a.actionId),
      );
      expect(xmins).toHaveLength(1);
      for (const a of [a1, a2, a3]) {
        const after = await state(a.wl, a.actionId);
        expect(after.action.status).toBe('expired');
        expect(after.reservation.status).toBe('voided');
        expect(after.reservation.releasedMicrousd).toBe(1000n);
      }
      // a1's workload had two actions, both withdrawn; a2's keeps the claimed one's slot and hold
      expect((await state(a1.wl, a1.actionId)).inFlight).toBe(0);
      expect((await state(a1.wl, a1.actionId)).account.pendingMicrousd).toBe(0n);
      const other = await state(a2.wl, claimed.actionId);
      expect(other.inFlight).toBe(1);
      expect(other.account.pendingMicrousd).toBe(1000n);
      expect(other.action.status).toBe('dispatched');
    });

    it('an id named twice in one void moves the money once; an unknown id is left alone', async () => {
      const { wl, actionId } = await admitted();
      const outcomes = await voidUndispatchedActions(ports(), [actionId, randomUUID(), actionId], 'withdrawn', new Date());
      expect(outcomes).toEqual(['voided', 'not_voidable', 'not_voidable']);
      const after = await state(wl, actionId);
      expect(after.reservation.releasedMicrousd).toBe(1000n);
      expect(after.account.pendingMicrousd).toBe(0n);
      expect(after.inFlight).toBe(0);
    });
  });

  it('an action that is not there, or not admitted any more, is left alone', async () => {
    expect(await withdraw(randomUUID())).toBe('not_voidable');
    expect(warnings).toEqual([]);
  });
});
