import { InMemoryReconciliationStore, sequentialIds, silentLog } from '../../../test/in-memory-store';
import { SweepConfig } from '../../reconciliation.config';
import { ORPHANED_ATTEMPT, SweepReservations } from './sweep-reservations.usecase';

const NOW = new Date('2026-11-30T10:00:00Z');
const ago = (ms: number) => new Date(NOW.getTime() - ms);
const CONFIG: SweepConfig = { intervalMs: 0, orphanGraceMs: 60_000, dispatchClockSkewMs: 2_000, batchSize: 50 };

function setup() {
  const store = new InMemoryReconciliationStore();
  const outbox = store.outbox;
  store.addAccount('acct-wl', 10_000n);
  store.addAccount('acct-ex', 5_000n, 'exception', 'ex-1');
  const sweep = new SweepReservations(store, store.cases, store.holds, store, CONFIG, sequentialIds(), silentLog);
  return { store, outbox, sweep };
}

describe('SweepReservations: admitted actions past their dispatch deadline', () => {
  it('voids the reservation, releases pending on every account, expires the action and returns the slot', async () => {
    const { store, outbox, sweep } = setup();
    store.addAdmitted({
      actionId: 'a1',
      reservedMicrousd: 700n,
      accountIds: ['acct-wl', 'acct-ex'],
      deadlineAt: ago(10_000),
      dispatchDeadlineAt: ago(5_000),
    });

    const report = await sweep.execute(NOW);

    expect(report.voidedActionIds).toEqual(['a1']);
    expect(store.s.reservations.get('a1')).toMatchObject({
      status: 'voided',
      releasedMicrousd: 700n,
      settledMicrousd: 0n,
      unresolvedMicrousd: 0n,
    });
    expect(store.s.accounts.get('acct-wl')!.pendingMicrousd).toBe(0n);
    expect(store.s.accounts.get('acct-ex')!.pendingMicrousd).toBe(0n);
    expect(store.s.actions.get('a1')!.status).toBe('expired');
    expect(store.s.inFlight.get('wl-1')).toBe(0);
    expect(outbox.events).toEqual([]);
  });

  it('is idempotent: a second sweep releases nothing twice', async () => {
    const { store, sweep } = setup();
    store.addAdmitted({
      actionId: 'a1',
      reservedMicrousd: 700n,
      accountIds: ['acct-wl'],
      deadlineAt: ago(10_000),
      dispatchDeadlineAt: ago(5_000),
    });
    await sweep.execute(NOW);
    const second = await sweep.execute(NOW);
    expect(second.voidedActionIds).toEqual([]);
    expect(store.s.accounts.get('acct-wl')!.pendingMicrousd).toBe(0n);
    expect(store.s.inFlight.get('wl-1')).toBe(0);
  });

  it.each([
    ['not yet past its dispatch deadline', ago(-1_000)],
    ['past the deadline by less than the clock-skew margin', ago(1_000)],
  ])('leaves an action %s alone', async (_label, dispatchDeadlineAt) => {
    const { store, sweep } = setup();
    store.addAdmitted({ actionId: 'a1', reservedMicrousd: 700n, accountIds: ['acct-wl'], deadlineAt: NOW, dispatchDeadlineAt });
    expect((await sweep.execute(NOW)).voidedActionIds).toEqual([]);
    expect(store.s.reservations.get('a1')!.status).toBe('pending');
    expect(store.s.accounts.get('acct-wl')!.pendingMicrousd).toBe(700n);
  });

  it('never voids a dispatched action', async () => {
    const { store, sweep } = setup();
    store.addAdmitted({ actionId: 'a1', reservedMicrousd: 700n, accountIds: ['acct-wl'], deadlineAt: NOW, dispatchDeadlineAt: ago(5_000) });
    store.addAttempt({ attemptId: 't1', actionId: 'a1' });
    expect((await sweep.execute(NOW)).voidedActionIds).toEqual([]);
    expect(store.s.reservations.get('a1')!.status).toBe('pending');
  });
});

describe('SweepReservations: attempts orphaned in flight', () => {
  it('opens an orphaned_attempt case holding the pending hold as unresolved exposure, fails the action, publishes', async () => {
    const { store, outbox, sweep } = setup();
    store.addAdmitted({
      actionId: 'a1',
      reservedMicrousd: 900n,
      accountIds: ['acct-wl'],
      deadlineAt: ago(61_000),
      dispatchDeadlineAt: ago(70_000),
    });
    store.addAttempt({ attemptId: 't1', actionId: 'a1' });

    const report = await sweep.execute(NOW);

    expect(report.voidedActionIds).toEqual([]);
    expect(report.orphans).toEqual([{ actionId: 'a1', attemptId: 't1', caseId: expect.any(String), exposureMicrousd: 900n }]);
    const c = store.s.cases.get(report.orphans[0].caseId)!;
    expect(c).toMatchObject({ reason: ORPHANED_ATTEMPT, status: 'open', exposureMicrousd: 900n, attemptId: 't1' });
    expect(store.s.attempts.get('t1')!.status).toBe('reconciliation_required');
    expect(store.s.reservations.get('a1')).toMatchObject({ status: 'unresolved', unresolvedMicrousd: 900n, releasedMicrousd: 0n });
    expect(store.s.accounts.get('acct-wl')).toMatchObject({ pendingMicrousd: 0n, unresolvedMicrousd: 900n, settledMicrousd: 0n });
    expect(store.s.actions.get('a1')!.status).toBe('failed');
    expect(store.s.inFlight.get('wl-1')).toBe(0);
    expect(outbox.events).toHaveLength(1);
    expect(outbox.events[0]).toMatchObject({
      topic: 'reconciliationRequired',
      key: 'wl-1',
      payload: {
        case_id: c.id,
        reason: ORPHANED_ATTEMPT,
        exposure_microusd: '900',
        attempt_id: 't1',
        input_tokens: null,
        output_tokens_total: null,
        usage_source: null,
      },
    });
  });

  it('waits for the grace period after the action deadline', async () => {
    const { store, sweep } = setup();
    store.addAdmitted({
      actionId: 'a1',
      reservedMicrousd: 900n,
      accountIds: ['acct-wl'],
      deadlineAt: ago(59_000),
      dispatchDeadlineAt: ago(70_000),
    });
    store.addAttempt({ attemptId: 't1', actionId: 'a1' });
    expect((await sweep.execute(NOW)).orphans).toEqual([]);
    expect(store.s.attempts.get('t1')!.status).toBe('in_flight');
  });

  it('shares the hold between two orphans of one action', async () => {
    const { store, outbox, sweep } = setup();
    store.addAdmitted({
      actionId: 'a1',
      reservedMicrousd: 901n,
      accountIds: ['acct-wl'],
      deadlineAt: ago(120_000),
      dispatchDeadlineAt: ago(130_000),
    });
    store.addAttempt({ attemptId: 't1', actionId: 'a1' });
    store.addAttempt({ attemptId: 't2', actionId: 'a1', attemptNo: 2, role: 'hedge' });
    const report = await sweep.execute(NOW);
    expect(report.orphans.map((o) => o.exposureMicrousd)).toEqual([451n, 450n]);
    expect(store.s.accounts.get('acct-wl')!.unresolvedMicrousd).toBe(901n);
    expect(outbox.events).toHaveLength(2);
    expect(store.s.inFlight.get('wl-1')).toBe(0);
  });

  /** A 1 000 pool past its deadline: a finished primary (hold 600, in `primaryStatus`) and an orphaned extra attempt (hold 400). */
  function primaryAndOrphan(primaryStatus: 'settled' | 'failed', role: 'hedge' | 'retry') {
    const ctx = setup();
    ctx.store.addAdmitted({
      actionId: 'a1',
      reservedMicrousd: 1000n,
      accountIds: ['acct-wl'],
      deadlineAt: ago(120_000),
      dispatchDeadlineAt: ago(130_000),
    });
    ctx.store.addAttempt({ attemptId: 't1', actionId: 'a1', status: primaryStatus, holdMicrousd: 600n });
    ctx.store.addAttempt({ attemptId: 't2', actionId: 'a1', attemptNo: 2, role, holdMicrousd: 400n });
    return ctx;
  }

  it("treats each orphan alone (issue 10): only the hedge's own hold becomes unresolved; the rest is released once nothing awaits settlement", async () => {
    // the primary settled at 0: nothing of the pool was used
    const { store, outbox, sweep } = primaryAndOrphan('settled', 'hedge');
    const report = await sweep.execute(NOW);
    expect(report.orphans).toEqual([{ actionId: 'a1', attemptId: 't2', caseId: expect.any(String), exposureMicrousd: 400n }]);
    expect(store.s.reservations.get('a1')).toMatchObject({ status: 'unresolved', unresolvedMicrousd: 400n, releasedMicrousd: 600n });
    expect(store.s.accounts.get('acct-wl')).toMatchObject({ pendingMicrousd: 0n, unresolvedMicrousd: 400n, settledMicrousd: 0n });
    expect(outbox.events).toEqual([expect.objectContaining({ payload: expect.objectContaining({ exposure_microusd: '400' }) })]);
  });

  it("keeps the other attempts' holds pending while one of them may still bring usage", async () => {
    // the primary failed and its settlement has not run yet
    const { store, sweep } = primaryAndOrphan('failed', 'retry');
    expect((await sweep.execute(NOW)).orphans.map((o) => o.exposureMicrousd)).toEqual([400n]);
    expect(store.s.reservations.get('a1')).toMatchObject({ status: 'unresolved', unresolvedMicrousd: 400n, releasedMicrousd: 0n });
    expect(store.s.accounts.get('acct-wl')).toMatchObject({ pendingMicrousd: 600n, unresolvedMicrousd: 400n });
  });

  it('does not return the in-flight slot of an action that already finished', async () => {
    const { store, sweep } = setup();
    store.addAdmitted({
      actionId: 'a1',
      reservedMicrousd: 900n,
      accountIds: ['acct-wl'],
      deadlineAt: ago(120_000),
      dispatchDeadlineAt: ago(130_000),
    });
    store.addAttempt({ attemptId: 't1', actionId: 'a1' });
    store.s.actions.get('a1')!.status = 'answered';
    store.s.inFlight.set('wl-1', 3);
    await sweep.execute(NOW);
    expect(store.s.actions.get('a1')!.status).toBe('answered');
    expect(store.s.inFlight.get('wl-1')).toBe(3);
    expect(store.s.attempts.get('t1')!.status).toBe('reconciliation_required');
  });

  it('one broken action does not stop the sweep', async () => {
    const { store, sweep } = setup();
    store.addAdmitted({
      actionId: 'a1',
      reservedMicrousd: 100n,
      accountIds: ['acct-wl'],
      deadlineAt: ago(10_000),
      dispatchDeadlineAt: ago(5_000),
    });
    store.addAdmitted({
      actionId: 'a2',
      reservedMicrousd: 200n,
      accountIds: ['acct-wl'],
      deadlineAt: ago(10_000),
      dispatchDeadlineAt: ago(5_000),
    });
    const original = store.setActionStatus.bind(store);
    store.setActionStatus = async (tx, ids, ...rest) => {
      if (ids.includes('a1')) throw new Error('boom');
      return original(tx, ids, ...rest);
    };
    const report = await sweep.execute(NOW);
    expect(report.voidedActionIds).toEqual(['a2']);
    // a1's transaction rolled back whole: its hold is still pending
    expect(store.s.reservations.get('a1')!.status).toBe('pending');
    expect(store.s.accounts.get('acct-wl')!.pendingMicrousd).toBe(100n);
  });

  it('a database out of service ends the sweep at the first action, as one failure (not one error line per action)', async () => {
    const { store, sweep } = setup();
    for (const actionId of ['a1', 'a2', 'a3'])
      store.addAdmitted({
        actionId,
        reservedMicrousd: 100n,
        accountIds: ['acct-wl'],
        deadlineAt: ago(10_000),
        dispatchDeadlineAt: ago(5_000),
      });
    let tried = 0;
    store.setActionStatus = async () => {
      tried += 1;
      throw Object.assign(new Error('cannot execute UPDATE in a read-only transaction'), { code: '25006' });
    };
    await expect(sweep.execute(NOW)).rejects.toThrow(/read-only transaction/);
    expect(tried).toBe(1);
    expect(store.s.accounts.get('acct-wl')!.pendingMicrousd).toBe(300n);
  });
});
