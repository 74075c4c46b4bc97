import { DomainError } from '@gateway/domain';
import { InMemoryReconciliationStore, sequentialIds, silentLog, sweeperFor } from '../../../test/in-memory-store';
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
  const sweep = sweeperFor(store);
  const [orphan] = (await sweep.execute(NOW)).orphans;
  store.outbox.events.length = 0;
  return {
    store,
    caseId: orphan.caseId,
    release: new ReleaseCase(store, store.cases, store.holds, store, store, sequentialIds(), silentLog),
  };
}

describe('ReleaseCase', () => {
  // Regression (issue 6, defect 3): release used to release the exposure and write no ledger row,
  // so the budget counted the unknown usage as zero. It now books the attested amount.
  it('books the full held exposure by default: ledger row (operator_release, who, why), settled on reservation and budget', async () => {
    const { store, caseId, release } = await orphanCase();

    const result = await release.execute(
      releaseCaseCommand(caseId, { reason: 'provider console shows the request; export not available' }, 'ops-anna'),
      LATER,
    );

    expect(result).toEqual({
      case_id: caseId,
      status: 'resolved',
      action_id: 'a1',
      attempt_id: 't1',
      usage_source: 'operator_release',
      ledger_entry_id: expect.any(String),
      settled_microusd: '8000',
      released_microusd: '0',
      resolved_by: 'ops-anna',
      resolution: 'provider console shows the request; export not available',
      reservation_status: 'settled',
    });
    expect(store.s.accounts.get('acct-wl')).toMatchObject({ pendingMicrousd: 0n, unresolvedMicrousd: 0n, settledMicrousd: 8_000n });
    expect(store.s.reservations.get('a1')).toMatchObject({ status: 'settled', releasedMicrousd: 0n, settledMicrousd: 8_000n });
    expect(store.s.ledger.get('t1')).toMatchObject({
      id: result.ledger_entry_id,
      usageSource: 'operator_release',
      costMicrousd: 8_000n,
      inputTokens: null,
      outputTokensTotal: null,
      inputMicrousd: null,
      requestId: 'req-a1',
      caseId,
      attestedBy: 'ops-anna',
      attestationReason: 'provider console shows the request; export not available',
      settledAt: LATER,
    });
    // token counts stay unknown on the attempt
    expect(store.s.attempts.get('t1')).toMatchObject({
      status: 'settled',
      usageSource: 'operator_release',
      tokens: {},
      financialState: 'settled',
    });
    expect(store.s.cases.get(caseId)).toMatchObject({
      status: 'resolved',
      resolvedBy: 'ops-anna',
      details: expect.objectContaining({ usage_source: 'operator_release', settled_microusd: '8000', released_microusd: '0' }),
    });
    expect(store.outbox.events).toEqual([
      expect.objectContaining({
        topic: 'usageSettled',
        key: 'wl-1',
        payload: expect.objectContaining({
          request_id: 'req-a1',
          attempt_id: 't1',
          usage_source: 'operator_release',
          cost_microusd: '8000',
          cost_microusd_by_category: null,
          input_tokens: null,
        }),
      }),
    ]);
  });

  it('books the amount the operator attests and releases what the case held beyond it', async () => {
    const { store, caseId, release } = await orphanCase();

    const result = await release.execute(
      releaseCaseCommand(caseId, { reason: 'invoice line shows 2500 micro-USD', amount_microusd: '2500' }, 'ops-anna'),
      LATER,
    );

    expect(result).toMatchObject({ settled_microusd: '2500', released_microusd: '5500', reservation_status: 'settled' });
    expect(store.s.ledger.get('t1')).toMatchObject({ costMicrousd: 2_500n, usageSource: 'operator_release' });
    expect(store.s.accounts.get('acct-wl')).toMatchObject({ pendingMicrousd: 0n, unresolvedMicrousd: 0n, settledMicrousd: 2_500n });
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
    expect(result).toMatchObject({ released_microusd: '0', settled_microusd: '0', ledger_entry_id: null });
    expect(store.s.accounts.get('acct-wl')).toEqual(before);
  });
});

describe('releaseCaseCommand', () => {
  it.each([
    undefined,
    {},
    { reason: '' },
    { reason: '  ' },
    { reason: 42 },
    { reason: 'ok because', extra: 1 },
    { reason: 'ok because', amount_microusd: '-1' },
    { reason: 'ok because', amount_microusd: 12 },
    { reason: 'ok because', amount_microusd: '1.5' },
  ])('requires a reason: %o', (body) => {
    expect(() => releaseCaseCommand('c1', body, 'ops')).toThrow(DomainError);
  });

  it('trims the reason', () => {
    expect(releaseCaseCommand('c1', { reason: '  duplicate of case 7  ' }, 'ops').reason).toBe('duplicate of case 7');
  });
});
