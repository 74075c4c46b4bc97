import { DomainError, PriceRevision } from '@gateway/domain';
import { catalogWith, InMemoryReconciliationStore, PRICE, sequentialIds, silentLog, sweeperFor } from '../../../test/in-memory-store';
import { ReconciliationError } from '../../reconciliation.errors';
import { importUsageCommand } from './import-usage.command';
import { ImportUsage } from './import-usage.usecase';

const NOW = new Date('2026-11-30T10:00:00Z');
const LATER = new Date('2026-11-30T12:00:00Z');

const EVIDENCE = {
  provider_request_id: 'chatcmpl-123',
  input_tokens: 1000,
  cached_input_tokens: 200,
  output_tokens_total: 300,
  reasoning_tokens: 100,
};
// input 800 × 2.5 = 2000, cached 200 × 1.25 = 250, visible output 200 × 10 = 2000, reasoning 100 × 10 = 1000 → 5250
const COST = 5250n;

/** An orphaned attempt turned into a case by the real sweeper, so the fixture is what production makes. */
async function orphanCase(reservedMicrousd = 20_000n, attemptPriceRevisionId: string | null = null) {
  const store = new InMemoryReconciliationStore();
  const outbox = store.outbox;
  store.addAccount('acct-wl', 1_000_000n);
  store.addAdmitted({
    actionId: 'a1',
    reservedMicrousd,
    accountIds: ['acct-wl'],
    deadlineAt: new Date('2026-11-30T09:00:00Z'),
    dispatchDeadlineAt: new Date('2026-11-30T08:59:00Z'),
  });
  store.addAttempt({ attemptId: 't1', actionId: 'a1', priceRevisionId: attemptPriceRevisionId });
  const sweep = sweeperFor(store);
  const [orphan] = (await sweep.execute(NOW)).orphans;
  outbox.events.length = 0;
  return {
    store,
    outbox,
    caseId: orphan.caseId,
    importUsage: new ImportUsage(store, store.cases, store.holds, store, store, catalogWith(), sequentialIds(), silentLog),
  };
}

describe('ImportUsage', () => {
  it('settles the attempt from the export, releases the rest of the exposure, resolves the case and publishes usage.settled', async () => {
    const { store, outbox, caseId, importUsage } = await orphanCase();

    const result = await importUsage.execute(importUsageCommand(caseId, EVIDENCE, 'fin-ops'), LATER);

    expect(result).toMatchObject({
      case_id: caseId,
      status: 'resolved',
      usage_source: 'provider_export',
      price_revision: 'price-1',
      cost_microusd: '5250',
      cost_microusd_by_category: { input: '2000', cached_input: '250', output: '2000', reasoning: '1000' },
      settled_microusd: '5250',
      released_microusd: '14750',
      overrun_microusd: '0',
      reservation_status: 'settled',
    });
    expect(store.s.ledger.get('t1')).toMatchObject({
      usageSource: 'provider_export',
      costMicrousd: COST,
      priceRevisionId: 'price-1',
      providerRequestId: 'chatcmpl-123',
      totalTokens: 1300,
    });
    expect(store.s.attempts.get('t1')).toMatchObject({ status: 'settled', usageSource: 'provider_export' });
    expect(store.s.reservations.get('a1')).toMatchObject({
      status: 'settled',
      settledMicrousd: COST,
      unresolvedMicrousd: 0n,
      releasedMicrousd: 14_750n,
    });
    expect(store.s.accounts.get('acct-wl')).toMatchObject({ pendingMicrousd: 0n, unresolvedMicrousd: 0n, settledMicrousd: COST });
    expect(store.s.cases.get(caseId)).toMatchObject({ status: 'resolved', resolvedBy: 'fin-ops', resolvedAt: LATER });
    expect(outbox.events).toEqual([
      {
        topic: 'usageSettled',
        key: 'wl-1',
        payload: expect.objectContaining({
          usage_source: 'provider_export',
          cost_microusd: '5250',
          input_tokens: 1000,
          output_tokens_total: 300,
          total_tokens: 1300,
          attempt_id: 't1',
          provider_request_id: 'chatcmpl-123',
        }),
      },
    ]);
  });

  it('prices the billable detail of the export at the tier it reports, and names what the price does not price', async () => {
    const { store, outbox, caseId } = await orphanCase();
    const price: PriceRevision = {
      ...PRICE,
      audioInputPerMTokMicrousd: 40_000_000n,
      serviceTiers: {
        flex: {
          rates: {
            inputPerMTokMicrousd: 1_250_000n,
            cachedInputPerMTokMicrousd: 625_000n,
            outputPerMTokMicrousd: 5_000_000n,
            reasoningPerMTokMicrousd: 5_000_000n,
            audioInputPerMTokMicrousd: 20_000_000n,
          },
        },
      },
    };
    const importUsage = new ImportUsage(store, store.cases, store.holds, store, store, catalogWith(price), sequentialIds(), silentLog);
    const detail = { ...EVIDENCE, audio_input_tokens: 100, service_tier: 'flex', feature_calls: { web_search: 1 } };
    const result = await importUsage.execute(importUsageCommand(caseId, detail, 'fin-ops'), LATER);
    // at flex: 700 plain input × 1.25 = 875, 200 cached × 0.625 = 125, 100 audio × 20 = 2000, 200 out × 5 = 1000, 100 reasoning × 5 = 500
    expect(result).toMatchObject({
      cost_microusd: '4500',
      cost_microusd_by_category: { input: '875', cached_input: '125', output: '1000', reasoning: '500', audio_input: '2000' },
      unpriced: ['feature:web_search'],
    });
    expect(store.s.ledger.get('t1')).toMatchObject({ serviceTier: 'flex', audioInputTokens: 100, costMicrousd: 4500n });
    expect(store.s.cases.get(caseId)).toMatchObject({ details: expect.objectContaining({ unpriced: ['feature:web_search'] }) });
    expect(outbox.events[0].payload).toMatchObject({
      service_tier: 'flex',
      fee_lines: [{ feature: 'web_search', calls: 1, microusd: '0' }],
    });
  });

  it("prices an attempt at its own price revision (a fallback on another route), not the reservation's", async () => {
    const { store, caseId } = await orphanCase(20_000n, 'price-fallback');
    // twice PRICE's rates: 5 / 2.5 / 20 / 20 micro-USD per token
    const fallbackPrice: PriceRevision = {
      id: 'price-fallback',
      inputPerMTokMicrousd: 5_000_000n,
      cachedInputPerMTokMicrousd: 2_500_000n,
      outputPerMTokMicrousd: 20_000_000n,
      reasoningPerMTokMicrousd: 20_000_000n,
    };
    const catalog = { priceById: async (id: string) => [PRICE, fallbackPrice].find((p) => p.id === id) ?? null };
    const importUsage = new ImportUsage(store, store.cases, store.holds, store, store, catalog, sequentialIds(), silentLog);
    const result = await importUsage.execute(importUsageCommand(caseId, EVIDENCE, 'fin-ops'), LATER);
    expect(result).toMatchObject({ price_revision: 'price-fallback', cost_microusd: String(2n * COST) });
    expect(store.s.ledger.get('t1')).toMatchObject({ priceRevisionId: 'price-fallback', costMicrousd: 2n * COST });
  });

  it('refuses detail counts that exceed the totals they are part of', () => {
    expect(() => importUsageCommand('c', { ...EVIDENCE, audio_input_tokens: 900, cache_write_input_tokens: 200 }, 'x')).toThrow(
      expect.objectContaining({ code: 'invalid_request' }),
    );
    expect(() => importUsageCommand('c', { ...EVIDENCE, audio_output_tokens: 201 }, 'x')).toThrow(
      expect.objectContaining({ code: 'invalid_request' }),
    );
  });

  it('records an overrun when the provider billed more than was held', async () => {
    const { store, caseId, importUsage } = await orphanCase(5_000n);
    const result = await importUsage.execute(importUsageCommand(caseId, EVIDENCE, 'fin-ops'), LATER);
    expect(result).toMatchObject({ settled_microusd: '5250', released_microusd: '0', overrun_microusd: '250' });
    expect(store.s.accounts.get('acct-wl')).toMatchObject({ pendingMicrousd: 0n, unresolvedMicrousd: 0n, settledMicrousd: COST });
  });

  it('settles a case once: a second import is refused and changes nothing', async () => {
    const { store, outbox, caseId, importUsage } = await orphanCase();
    await importUsage.execute(importUsageCommand(caseId, EVIDENCE, 'fin-ops'), LATER);
    await expect(importUsage.execute(importUsageCommand(caseId, EVIDENCE, 'fin-ops'), LATER)).rejects.toMatchObject({
      code: 'case_already_resolved',
    });
    expect(store.s.accounts.get('acct-wl')!.settledMicrousd).toBe(COST);
    expect(outbox.events).toHaveLength(1);
  });

  it('refuses evidence for a different provider request than the attempt recorded', async () => {
    const { store, caseId, importUsage } = await orphanCase();
    store.s.cases.get(caseId)!.providerRequestId = 'chatcmpl-other';
    await expect(importUsage.execute(importUsageCommand(caseId, EVIDENCE, 'x'), LATER)).rejects.toMatchObject({
      code: 'provider_request_mismatch',
    });
    expect(store.s.ledger.size).toBe(0);
  });

  it('accepts another of the provider ids for the request when the evidence echoes the attempt id as its client request id', async () => {
    const { store, caseId, importUsage } = await orphanCase();
    store.s.cases.get(caseId)!.providerRequestId = 'req_sim_1';
    const attemptId = store.s.cases.get(caseId)!.attemptId!;
    // another attempt's id does not vouch for this one
    await expect(
      importUsage.execute({ ...importUsageCommand(caseId, EVIDENCE, 'x'), clientRequestId: 'another-attempt' }, LATER),
    ).rejects.toMatchObject({ code: 'provider_request_mismatch' });
    expect(store.s.ledger.size).toBe(0);
    const result = await importUsage.execute({ ...importUsageCommand(caseId, EVIDENCE, 'x'), clientRequestId: attemptId }, LATER);
    expect(result).toMatchObject({ settled_microusd: String(COST) });
    expect(store.s.ledger.size).toBe(1);
  });

  it('refuses an unknown case', async () => {
    const { importUsage } = await orphanCase();
    await expect(importUsage.execute(importUsageCommand('nope', EVIDENCE, 'x'), LATER)).rejects.toEqual(expect.any(ReconciliationError));
  });

  it('refuses evidence for an attempt that already has its ledger row', async () => {
    const { store, importUsage } = await orphanCase();
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
    await expect(importUsage.execute(importUsageCommand('shortfall', EVIDENCE, 'x'), LATER)).rejects.toMatchObject({
      code: 'attempt_already_settled',
    });
  });

  it('fails without a trace when the price revision is missing (nothing half-written)', async () => {
    const { store, caseId } = await orphanCase();
    const importUsage = new ImportUsage(store, store.cases, store.holds, store, store, catalogWith(null), sequentialIds(), silentLog);
    await expect(importUsage.execute(importUsageCommand(caseId, EVIDENCE, 'x'), LATER)).rejects.toThrow(/price revision/);
    expect(store.s.cases.get(caseId)!.status).toBe('open');
    expect(store.s.ledger.size).toBe(0);
  });
});

describe('importUsageCommand', () => {
  it.each([
    [{ ...EVIDENCE, input_tokens: undefined }, 'input_tokens'],
    [{ ...EVIDENCE, reasoning_tokens: undefined }, 'reasoning_tokens'],
    [{ ...EVIDENCE, output_tokens_total: -1 }, 'output_tokens_total'],
    [{ ...EVIDENCE, input_tokens: 1.5 }, 'input_tokens'],
    [{ ...EVIDENCE, cached_input_tokens: 2000 }, 'cached_input_tokens'],
    [{ ...EVIDENCE, reasoning_tokens: 400 }, 'reasoning_tokens'],
    [{ ...EVIDENCE, provider_request_id: '' }, 'provider_request_id'],
    [{ ...EVIDENCE, output_tokens: 3 }, ''],
  ])('rejects %o naming %s (a missing count is never zero)', (body, param) => {
    try {
      importUsageCommand('c1', body, 'x');
      throw new Error('accepted');
    } catch (err) {
      expect(err).toBeInstanceOf(DomainError);
      expect(err).toMatchObject({ code: 'invalid_request' });
      if (param) expect((err as DomainError).param).toBe(param);
    }
  });

  it('rejects a missing body', () => {
    expect(() => importUsageCommand('c1', undefined, 'x')).toThrow(DomainError);
  });
});
