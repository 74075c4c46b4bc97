import { DomainError } from '@gateway/domain';
import { InMemoryReconciliationStore, RecordingOutbox, silentLog } from '../../../test/in-memory-store';
import { SweepReservations } from '../sweep-reservations/sweep-reservations.usecase';
import { releaseCaseCommand } from './release-case.command';
import { ReleaseCase } from './release-case.usecase';

const NOW = new Date('2026-11-30T10:00:00Z');
const LATER = new Date('2026-11-30T12:00:00Z');

async function orphanCase() {
  const store = new InMemoryReconciliationStore();
  store.addAccount('acct-wl', 1_000_000n);
  store.addAdmitted({
    actionId: 'a1',
    reservedMicrousd: 8_000n,
    accountIds: ['acct-wl'],
    deadlineAt: new Date('2026-11-30T09:00:00Z'),
    dispatchDeadlineAt: new Date('2026-11-30T08:59:00Z'),
  });
  store.addAttempt({ attemptId: 't1', actionId: 'a1' });
  const sweep = new SweepReservations(
    store,
    new RecordingOutbox(),
    { intervalMs: 0, orphanGraceMs: 60_000, dispatchClockSkewMs: 0, batchSize: 10 },
    silentLog,
  );
  const [orphan] = (await sweep.execute(NOW)).orphans;
  return { store, caseId: orphan.caseId, release: new ReleaseCase(store, silentLog) };
}

describe('ReleaseCase', () => {
  it('releases the unresolved exposure, settles nothing, records who and why', async () => {
    const { store, caseId, release } = await orphanCase();

    const result = await release.execute(
      releaseCaseCommand(caseId, { reason: 'provider console shows no request with this id' }, 'ops-anna'),
      LATER,
    );

    expect(result).toEqual({
      case_id: caseId,
      status: 'resolved',
      action_id: 'a1',
      attempt_id: 't1',
      usage_source: 'operator',
      released_microusd: '8000',
      resolved_by: 'ops-anna',
      resolution: 'provider console shows no request with this id',
      reservation_status: 'released',
    });
    expect(store.s.accounts.get('acct-wl')).toMatchObject({ pendingMicrousd: 0n, unresolvedMicrousd: 0n, settledMicrousd: 0n });
    expect(store.s.reservations.get('a1')).toMatchObject({ status: 'released', releasedMicrousd: 8_000n, settledMicrousd: 0n });
    // No usage was established: no ledger row, token counts stay unknown.
    expect(store.s.ledger.size).toBe(0);
    expect(store.s.attempts.get('t1')).toMatchObject({ status: 'settled', usageSource: 'operator', tokens: {} });
    expect(store.s.cases.get(caseId)).toMatchObject({
      status: 'resolved',
      resolvedBy: 'ops-anna',
      details: expect.objectContaining({ usage_source: 'operator', released_microusd: '8000' }),
    });
  });

  it('resolves once', async () => {
    const { caseId, release } = await orphanCase();
    await release.execute(releaseCaseCommand(caseId, { reason: 'written off' }, 'ops'), LATER);
    await expect(release.execute(releaseCaseCommand(caseId, { reason: 'again' }, 'ops'), LATER)).rejects.toMatchObject({
      code: 'case_already_resolved',
    });
  });

  it('closes a zero-exposure case on an already settled attempt without moving money', async () => {
    const { store, release } = await orphanCase();
    store.addCase({
      id: 'shortfall',
      actionId: 'a1',
      attemptId: 't1',
      reason: 'candidate_shortfall_unexplained',
      providerRequestId: null,
      exposureMicrousd: 0n,
      details: {},
      openedAt: NOW,
    });
    store.s.attempts.get('t1')!.status = 'settled';
    const before = structuredClone(store.s.accounts.get('acct-wl'));
    const result = await release.execute(releaseCaseCommand('shortfall', { reason: 'route contract reviewed' }, 'ops'), LATER);
    expect(result.released_microusd).toBe('0');
    expect(store.s.accounts.get('acct-wl')).toEqual(before);
  });
});

describe('releaseCaseCommand', () => {
  it.each([undefined, {}, { reason: '' }, { reason: '  ' }, { reason: 42 }, { reason: 'ok because', extra: 1 }])(
    'requires a reason: %o',
    (body) => {
      expect(() => releaseCaseCommand('c1', body, 'ops')).toThrow(DomainError);
    },
  );

  it('trims the reason', () => {
    expect(releaseCaseCommand('c1', { reason: '  duplicate of case 7  ' }, 'ops').reason).toBe('duplicate of case 7');
  });
});
