import { AttemptCompletedV1, ReconciliationRequiredV1, TopicKey, Topics, UsageSettledV1 } from '@gateway/contracts';
import { LedgerRow, NewCase, ReservationView, Tx, usageSettledEvent } from '@gateway/db';
import { ActionState, applyMovement, attemptMachine, AttemptEvent, AttemptState, Movement, PriceRevision } from '@gateway/domain';
import { structuredPrice } from '@gateway/testing';
import { SettleAttempt, SettlementPorts, usageOfAttempt } from './settle-attempt.usecase';

const NOW = new Date('2026-04-01T09:00:00.000Z');
const RESERVED = 20_000n;

/** $2.50 / $1.25 / $10 / $10 per MTok: 2.5, 1.25, 10 and 10 micro-USD per token. */
const PRICE: PriceRevision = {
  id: 'price-7',
  inputPerMTokMicrousd: 2_500_000n,
  cachedInputPerMTokMicrousd: 1_250_000n,
  outputPerMTokMicrousd: 10_000_000n,
  reasoningPerMTokMicrousd: 10_000_000n,
};

interface State {
  processed: Set<string>;
  reservation: ReservationView | null;
  /** the budget account's buckets, as the hold repository mirrors them */
  account: { pending: bigint; settled: bigint; unresolved: bigint };
  attempts: Map<string, string>;
  /** each attempt's own hold (attempt.hold_microusd; null: recorded before holds were per attempt) */
  attemptHolds: Map<string, bigint | null>;
  ledger: LedgerRow[];
  cases: NewCase[];
  movements: Movement[];
  outbox: Array<{ topic: TopicKey; key: string; payload: unknown }>;
}

/** One in-memory database behind every repository fake; a throwing transaction rolls back. */
function harness(
  opts: {
    reservation?: boolean;
    attemptStatus?: string;
    price?: PriceRevision | null;
    /** several attempts of the action, each with its own hold (and price revision); the reservation holds their sum */
    attempts?: Array<{ id: string; status: string; hold: bigint; priceRevisionId?: string }>;
    /** price revisions besides the reservation's (an extra attempt's route) */
    otherPrices?: PriceRevision[];
    /** the action's state as settlement's lock reads it (default dispatched) */
    actionStatus?: ActionState;
  } = {},
) {
  const reserved = opts.attempts ? opts.attempts.reduce((sum, a) => sum + a.hold, 0n) : RESERVED;
  let s: State = {
    processed: new Set(),
    reservation:
      opts.reservation === false
        ? null
        : {
            id: 'res-1',
            actionId: 'act-1',
            status: 'pending',
            reservedMicrousd: reserved,
            settledMicrousd: 0n,
            unresolvedMicrousd: 0n,
            releasedMicrousd: 0n,
            priceRevisionId: PRICE.id,
            accountIds: ['acct-wl'],
            actionStatus: opts.actionStatus ?? 'dispatched',
          },
    account: { pending: reserved, settled: 0n, unresolved: 0n },
    attempts: new Map(opts.attempts ? opts.attempts.map((a) => [a.id, a.status]) : [['att-1', opts.attemptStatus ?? 'succeeded']]),
    attemptHolds: new Map(opts.attempts ? opts.attempts.map((a) => [a.id, a.hold]) : [['att-1', null]]),
    ledger: [],
    cases: [],
    movements: [],
    outbox: [],
  };
  const tx = {} as Tx;
  const append = (topic: TopicKey, key: string, payload: unknown) =>
    // as the real outbox does: only schema-valid events are written
    s.outbox.push({ topic, key, payload: Topics[topic].schema.parse(payload) });

  const processed: SettlementPorts['processed'] = {
    async transaction<T>(fn: (t: Tx) => Promise<T>): Promise<T> {
      const before = structuredClone(s);
      try {
        return await fn(tx);
      } catch (err) {
        s = before;
        throw err;
      }
    },
    async recordMany(_tx: Tx, consumer: string, eventIds: readonly string[]): Promise<Set<string>> {
      const fresh = new Set<string>();
      for (const eventId of eventIds) {
        const key = `${consumer}/${eventId}`;
        if (s.processed.has(key)) continue;
        s.processed.add(key);
        fresh.add(eventId);
      }
      return fresh;
    },
  };

  const holds: SettlementPorts['holds'] = {
    async lockMany(_tx, actionIds) {
      const r = s.reservation;
      return new Map(r && actionIds.includes(r.actionId) ? [[r.actionId, { ...r }]] : []);
    },
    async moveMany(_tx, moves) {
      for (const { r, steps } of moves) {
        const cur = s.reservation!;
        expect(r.id).toBe(cur.id);
        for (const m of steps) {
          // the real repository refuses the same plans (negative buckets, edges the machine lacks)
          Object.assign(cur, applyMovement(cur, m));
          s.account.pending -= m.fromPendingMicrousd;
          s.account.settled += m.toSettledMicrousd;
          s.account.unresolved += m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd;
          s.movements.push(m);
        }
      }
    },
  };

  const ledger: SettlementPorts['ledger'] = {
    async recordMany(_tx, entries) {
      const inserted = new Set<string>();
      for (const { row, eventId } of entries) {
        if (s.ledger.some((l) => l.attemptId === row.attemptId)) continue;
        s.ledger.push(row);
        append('usageSettled', row.workloadId, usageSettledEvent(row, eventId));
        inserted.add(row.attemptId);
      }
      return inserted;
    },
  };

  const cases: SettlementPorts['cases'] = {
    async open(_tx, c, announce) {
      if (s.cases.some((x) => x.attemptId === c.attemptId && x.reason === c.reason)) return false;
      s.cases.push(c);
      append('reconciliationRequired', announce.fields.workload_id ?? 'unknown', {
        ...announce.fields,
        event_id: announce.eventId,
        case_id: c.id,
        reason: c.reason,
        exposure_microusd: c.exposureMicrousd.toString(),
      });
      return true;
    },
  };

  const attempts: SettlementPorts['attempts'] = {
    async lockAttempts(_tx, attemptIds) {
      const own = new Map((opts.attempts ?? []).map((a) => [a.id, a.priceRevisionId ?? null]));
      return new Map(
        attemptIds
          .filter((id) => s.attempts.has(id))
          .map((id) => [id, { status: s.attempts.get(id) as AttemptState, priceRevisionId: own.get(id) ?? null }]),
      );
    },
    async transitionMany(_tx, items: ReadonlyArray<{ attemptId: string; event: AttemptEvent }>) {
      // the real repository is a compare-and-set on the states the domain machine allows
      for (const { attemptId, event } of items) {
        s.attempts.set(attemptId, attemptMachine.transition(s.attempts.get(attemptId) as AttemptState, event));
      }
    },
    async holdsOf(_tx, attemptIds) {
      return new Map(attemptIds.filter((id) => s.attemptHolds.has(id)).map((id) => [id, s.attemptHolds.get(id) ?? null]));
    },
    async awaitingSettlementByAction(_tx, actionIds) {
      // every attempt in this harness belongs to the one action
      const n = [...s.attempts.values()].filter((st) => st !== 'settled' && st !== 'reconciliation_required').length;
      return new Map(actionIds.map((id) => [id, n]));
    },
  };

  const catalog: SettlementPorts['catalog'] = {
    async priceById(id: string): Promise<PriceRevision | null> {
      const price = opts.price === undefined ? PRICE : opts.price;
      return [price, ...(opts.otherPrices ?? [])].find((p) => p?.id === id) ?? null;
    },
  };

  let n = 0;
  const ids = { next: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}` };
  const log = { info: jest.fn() };

  const useCase = new SettleAttempt(processed, holds, ledger, cases, attempts, catalog, ids, log);
  return { useCase, log, state: () => s };
}

function attemptEvent(over: Partial<AttemptCompletedV1> = {}): AttemptCompletedV1 {
  return {
    event_id: '0d6f5b0e-8a57-4c4e-9c0f-6a1f2d3b4c5d',
    timestamp: '2026-04-01T08:59:58.000Z',
    request_id: 'req-1',
    action_id: 'act-1',
    attempt_id: 'att-1',
    attempt_no: 1,
    attempt_role: 'primary',
    workload_id: 'wl-1',
    environment: 'prod',
    route_id: 'route-1',
    route_version: 3,
    model_alias: 'approved-standard',
    provider_request_id: 'chatcmpl-1',
    requested_candidate_count: 2,
    effective_candidate_count: 2,
    returned_candidate_count: 2,
    input_tokens: 1000,
    output_tokens_total: 300,
    total_tokens: 1300,
    cached_input_tokens: 400,
    reasoning_tokens: 100,
    output_includes_reasoning: true,
    stream_mode: 'none',
    usage_source: 'provider_response',
    quota_scope: 'workload',
    policy_result: null,
    policy_reason: null,
    outcome: 'succeeded',
    http_status: 200,
    candidates: [
      { index: 0, finish_reason: 'stop', outcome: 'ok' },
      { index: 1, finish_reason: 'stop', outcome: 'ok' },
    ],
    prompt_block_reason: null,
    attempts_total: 1,
    action_final: true,
    ...over,
  };
}

/** A provider error answer: failed, zero usage reported. */
const errorAnswer = (httpStatus: number, over: Partial<AttemptCompletedV1> = {}) =>
  attemptEvent({
    outcome: 'failed',
    http_status: httpStatus,
    provider_request_id: null,
    returned_candidate_count: 0,
    candidates: [],
    input_tokens: 0,
    output_tokens_total: 0,
    total_tokens: 0,
    cached_input_tokens: 0,
    reasoning_tokens: 0,
    ...over,
  });

const NO_USAGE = {
  input_tokens: null,
  output_tokens_total: null,
  total_tokens: null,
  cached_input_tokens: null,
  reasoning_tokens: null,
  usage_source: null,
} as const;

const byTopic = (s: State, topic: TopicKey) => s.outbox.filter((o) => o.topic === topic).map((o) => o.payload);

describe('SettleAttempt', () => {
  it('settles a normal attempt once: priced ledger row, pending → settled, rest released, one usage.settled', async () => {
    const { useCase, log, state } = harness();

    await expect(useCase.execute(attemptEvent(), NOW)).resolves.toBe('settled');

    const s = state();
    // 600 uncached × 2.5 + 400 cached × 1.25 + (300 − 100) visible output × 10 + 100 reasoning × 10
    const byCategory = { input: 1500n, cached: 500n, output: 2000n, reasoning: 1000n };
    expect(s.ledger).toHaveLength(1);
    const row = s.ledger[0];
    expect(row).toMatchObject({
      attemptId: 'att-1',
      actionId: 'act-1',
      attemptRole: 'primary',
      workloadId: 'wl-1',
      requestedCandidates: 2,
      effectiveCandidates: 2,
      returnedCandidates: 2,
      inputTokens: 1000,
      cachedInputTokens: 400,
      outputTokensTotal: 300,
      reasoningTokens: 100,
      totalTokens: 1300,
      streamMode: 'none',
      usageSource: 'provider_response',
      priceRevisionId: 'price-7',
      inputMicrousd: byCategory.input,
      cachedInputMicrousd: byCategory.cached,
      outputMicrousd: byCategory.output,
      reasoningMicrousd: byCategory.reasoning,
      costMicrousd: 5000n,
      settledAt: NOW,
    });
    expect(row.inputMicrousd! + row.cachedInputMicrousd! + row.outputMicrousd! + row.reasoningMicrousd!).toBe(row.costMicrousd);

    expect(s.reservation).toMatchObject({ status: 'settled', settledMicrousd: 5000n, releasedMicrousd: 15_000n, unresolvedMicrousd: 0n });
    expect(s.account).toEqual({ pending: 0n, settled: 5000n, unresolved: 0n });
    expect(s.attempts.get('att-1')).toBe('settled');
    expect(s.cases).toEqual([]);

    expect(s.outbox.map((o) => [o.topic, o.key])).toEqual([['usageSettled', 'wl-1']]);
    const settled = byTopic(s, 'usageSettled')[0] as UsageSettledV1;
    expect(settled).toMatchObject({
      request_id: 'req-1',
      action_id: 'act-1',
      attempt_id: 'att-1',
      price_revision: 'price-7',
      cost_microusd: '5000',
      cost_microusd_by_category: { input: '1500', cached_input: '500', output: '2000', reasoning: '1000' },
      input_tokens: 1000,
      output_tokens_total: 300,
      total_tokens: 1300,
      settled_at: NOW.toISOString(),
    });
    expect(log.info).toHaveBeenCalledWith(expect.objectContaining({ outcome: 'settled' }), expect.any(String));
  });

  it('treats a redelivered event as a duplicate and writes nothing twice', async () => {
    const { useCase, state } = harness();
    await useCase.execute(attemptEvent(), NOW);
    const after = structuredClone(state());

    await expect(useCase.execute(attemptEvent(), NOW)).resolves.toBe('duplicate');

    expect(state()).toEqual(after);
    expect(state().ledger).toHaveLength(1);
    expect(byTopic(state(), 'usageSettled')).toHaveLength(1);
  });

  it('settles the same attempt once even when it arrives again under a new event id', async () => {
    const { useCase, state } = harness();
    await useCase.execute(attemptEvent(), NOW);

    await expect(useCase.execute(attemptEvent({ event_id: '7a1c2e3f-4b5d-4e6f-8a9b-0c1d2e3f4a5b' }), NOW)).resolves.toBe('duplicate');

    const s = state();
    expect(s.ledger).toHaveLength(1);
    expect(byTopic(s, 'usageSettled')).toHaveLength(1);
    expect(s.reservation).toMatchObject({ settledMicrousd: 5000n, releasedMicrousd: 15_000n });
    expect(s.account).toEqual({ pending: 0n, settled: 5000n, unresolved: 0n });
  });

  it.each([
    { name: 'whole response without usage', stream: 'none' as const, reason: 'usage_missing' },
    { name: 'SSE stream cut before its usage chunk', stream: 'sse' as const, reason: 'stream_ended_before_usage' },
  ])('$name → case $reason, pending moved to unresolved, never a zero-cost ledger row', async ({ stream, reason }) => {
    const { useCase, state } = harness({ attemptStatus: 'usage_missing' });

    const outcome = await useCase.execute(attemptEvent({ ...NO_USAGE, stream_mode: stream, outcome: 'usage_missing' }), NOW);

    expect(outcome).toBe('reconciliation_required');
    const s = state();
    expect(s.ledger).toEqual([]);
    expect(s.cases).toEqual([
      expect.objectContaining({
        actionId: 'act-1',
        attemptId: 'att-1',
        reason,
        exposureMicrousd: RESERVED,
        providerRequestId: 'chatcmpl-1',
      }),
    ]);
    expect(s.reservation).toMatchObject({ status: 'unresolved', unresolvedMicrousd: RESERVED, settledMicrousd: 0n, releasedMicrousd: 0n });
    expect(s.account).toEqual({ pending: 0n, settled: 0n, unresolved: RESERVED });
    expect(s.attempts.get('att-1')).toBe('reconciliation_required');
    expect(byTopic(s, 'usageSettled')).toEqual([]);
    const required = byTopic(s, 'reconciliationRequired') as ReconciliationRequiredV1[];
    expect(required).toEqual([
      expect.objectContaining({
        reason,
        case_id: s.cases[0].id,
        exposure_microusd: '20000',
        input_tokens: null,
        output_tokens_total: null,
        total_tokens: null,
      }),
    ]);
  });

  it('opens returned_exceeds_effective and writes no ledger row when more candidates came back than effective', async () => {
    const { useCase, state } = harness();
    const e = attemptEvent({
      requested_candidate_count: null,
      effective_candidate_count: 1,
      returned_candidate_count: 2,
      candidates: [
        { index: 0, finish_reason: 'stop', outcome: 'ok' },
        { index: 1, finish_reason: 'stop', outcome: 'ok' },
      ],
    });

    await expect(useCase.execute(e, NOW)).resolves.toBe('reconciliation_required');

    const s = state();
    expect(s.ledger).toEqual([]);
    expect(s.cases.map((c) => [c.reason, c.exposureMicrousd])).toEqual([['returned_exceeds_effective', RESERVED]]);
    expect(s.reservation).toMatchObject({ status: 'unresolved', unresolvedMicrousd: RESERVED });
    expect(byTopic(s, 'usageSettled')).toEqual([]);
    expect(byTopic(s, 'reconciliationRequired')).toEqual([expect.objectContaining({ reason: 'returned_exceeds_effective' })]);
  });

  it('settles a silent shortfall AND flags it as candidate_shortfall_unexplained (no exposure held)', async () => {
    const { useCase, state } = harness();
    const e = attemptEvent({
      requested_candidate_count: 3,
      effective_candidate_count: 3,
      returned_candidate_count: 2,
    });

    await expect(useCase.execute(e, NOW)).resolves.toBe('settled');

    const s = state();
    expect(s.ledger).toHaveLength(1);
    expect(s.cases).toEqual([
      expect.objectContaining({ reason: 'candidate_shortfall_unexplained', exposureMicrousd: 0n, details: { effective: 3, returned: 2 } }),
    ]);
    expect(s.reservation).toMatchObject({ status: 'settled', settledMicrousd: 5000n, releasedMicrousd: 15_000n, unresolvedMicrousd: 0n });
    expect(s.outbox.map((o) => o.topic)).toEqual(['usageSettled', 'reconciliationRequired']);
  });

  it.each([
    {
      name: 'a filtered candidate',
      candidates: [
        { index: 0, finish_reason: 'STOP', outcome: 'ok' as const },
        { index: 1, finish_reason: 'SAFETY', outcome: 'filtered' as const },
      ],
      block: null,
    },
    { name: 'a blocked prompt', candidates: [], block: 'SAFETY' },
  ])('does not flag a shortfall explained by $name', async ({ candidates, block }) => {
    const { useCase, state } = harness();
    const e = attemptEvent({
      effective_candidate_count: 3,
      requested_candidate_count: 3,
      candidates,
      prompt_block_reason: block,
      returned_candidate_count: 1,
    });

    await expect(useCase.execute(e, NOW)).resolves.toBe('settled');
    expect(state().cases).toEqual([]);
  });

  // Regression test for a fixed bug (apps/settlement/src/usecases/settle-attempt/settle-attempt.usecase.ts, silentShortfall):
  // any candidate whose outcome is not 'ok' counts as the explanation for the missing ones, so a
  // truncated ('length'/MAX_TOKENS) or empty sibling hides a silent shortfall. The domain rule
  // (libs/domain acceptance.ts candidateShortfall, used by dispatch's metrics) only accepts a
  // filtered sibling or a blocked prompt as an explanation, so dispatch counts a contract failure
  // that settlement never opens a case for. Fix: `e.candidates.some((c) => c.outcome === 'filtered')`
  // (or better, reuse candidateShortfall from @gateway/domain on the event's candidates).
  it.each([
    { name: 'a truncated sibling', outcome: 'truncated' as const, finish: 'length' },
    { name: 'an empty sibling', outcome: 'empty' as const, finish: 'stop' },
  ])('flags a shortfall that $name does not explain', async ({ outcome, finish }) => {
    const { useCase, state } = harness();
    const e = attemptEvent({
      effective_candidate_count: 3,
      requested_candidate_count: 3,
      candidates: [
        { index: 0, finish_reason: 'stop', outcome: 'ok' },
        { index: 1, finish_reason: finish, outcome },
      ],
    });

    await expect(useCase.execute(e, NOW)).resolves.toBe('settled');
    expect(state().cases.map((c) => c.reason)).toEqual(['candidate_shortfall_unexplained']);
  });

  it('settles usage of an unknown shape from its total AND opens a usage_shape_unknown case', async () => {
    const { useCase, state } = harness();
    const e = attemptEvent({ usage_unknown_fields: ['groundingTokenCount', 'total_exceeds_parts'] });

    await expect(useCase.execute(e, NOW)).resolves.toBe('settled');

    const s = state();
    expect(s.ledger).toHaveLength(1);
    expect(s.cases).toEqual([
      expect.objectContaining({
        reason: 'usage_shape_unknown',
        exposureMicrousd: 0n,
        details: { unknown_fields: ['groundingTokenCount', 'total_exceeds_parts'] },
      }),
    ]);
    expect(byTopic(s, 'reconciliationRequired')).toEqual([expect.objectContaining({ reason: 'usage_shape_unknown' })]);
  });

  it.each([
    ['below the floor of its candidates → settled from the provider AND a usage_implausible case', 2, 40, ['usage_implausible']],
    ['at the floor → settled, no case', 2, 10, []],
    ['one candidate is not judged', 1, 40, []],
  ])('multi-candidate usage %s', async (_name, effective, floor, reasons) => {
    const { useCase, state } = harness();
    const e = attemptEvent({
      effective_candidate_count: effective,
      requested_candidate_count: effective,
      candidates: Array.from({ length: effective }, (_, index) => ({ index, finish_reason: 'stop', outcome: 'ok' as const })),
      output_tokens_total: 10,
      reasoning_tokens: 0,
      total_tokens: 1010,
      output_tokens_floor: floor,
    });

    await expect(useCase.execute(e, NOW)).resolves.toBe('settled');
    const s = state();
    expect(s.ledger).toHaveLength(1);
    expect(s.cases.map((c) => c.reason)).toEqual(reasons);
    if (reasons.length > 0) {
      expect(s.cases[0]).toMatchObject({ exposureMicrousd: 0n, details: { output_tokens_total: 10, output_tokens_floor: 40 } });
      expect(byTopic(s, 'reconciliationRequired')).toEqual([expect.objectContaining({ reason: 'usage_implausible' })]);
    }
  });

  it('settles a provider error (zero usage) at 0 and releases the whole hold', async () => {
    const { useCase, state } = harness({ attemptStatus: 'failed' });
    const e = errorAnswer(400);

    await expect(useCase.execute(e, NOW)).resolves.toBe('settled');

    const s = state();
    expect(s.ledger).toEqual([expect.objectContaining({ costMicrousd: 0n, inputMicrousd: 0n, outputMicrousd: 0n, inputTokens: 0 })]);
    expect(s.reservation).toMatchObject({ status: 'settled', settledMicrousd: 0n, releasedMicrousd: RESERVED, unresolvedMicrousd: 0n });
    expect(s.account).toEqual({ pending: 0n, settled: 0n, unresolved: 0n });
    // a failed attempt is not a silent shortfall
    expect(s.cases).toEqual([]);
    expect(byTopic(s, 'usageSettled')).toEqual([expect.objectContaining({ cost_microusd: '0' })]);
  });

  it('keeps the rest of the hold pending while other attempts of the action may still bring usage', async () => {
    const { useCase, state } = harness();

    await expect(useCase.execute(attemptEvent({ action_final: false, attempts_total: 2 }), NOW)).resolves.toBe('settled');

    expect(state().reservation).toMatchObject({ status: 'pending', settledMicrousd: 5000n, releasedMicrousd: 0n });
    expect(state().account).toEqual({ pending: RESERVED - 5000n, settled: 5000n, unresolved: 0n });
  });

  describe('several attempts of one action (issue 10)', () => {
    const PRIMARY = { id: 'att-1', status: 'succeeded', hold: 20_000n };
    const HEDGE = { id: 'att-2', status: 'cancelled', hold: 12_000n };
    const hedgeCancelled = (over: Partial<AttemptCompletedV1> = {}) =>
      attemptEvent({
        event_id: '1d6f5b0e-8a57-4c4e-9c0f-6a1f2d3b4c5d',
        attempt_id: 'att-2',
        attempt_no: 2,
        attempt_role: 'hedge',
        outcome: 'cancelled',
        http_status: null,
        provider_request_id: null,
        returned_candidate_count: 0,
        candidates: [],
        ...NO_USAGE,
        attempts_total: 2,
        action_final: false,
        winner: false,
        deadline_outcome: 'cancelled',
        ...over,
      });
    const primaryWon = (over: Partial<AttemptCompletedV1> = {}) =>
      attemptEvent({
        attempts_total: 2,
        action_final: true,
        winner: true,
        deadline_outcome: 'on_time',
        policy_revision_id: 'rev-1',
        ...over,
      });

    it('a loser cancelled without usage moves only its own hold to unresolved; the primary settles; the rest is released at the end', async () => {
      const { useCase, state } = harness({ attempts: [PRIMARY, HEDGE] });

      await expect(useCase.execute(hedgeCancelled(), NOW)).resolves.toBe('reconciliation_required');
      let s = state();
      expect(s.cases).toEqual([expect.objectContaining({ attemptId: 'att-2', reason: 'usage_missing', exposureMicrousd: 12_000n })]);
      // the primary's hold stays pending: never the whole pool, never zero
      expect(s.reservation).toMatchObject({ status: 'unresolved', unresolvedMicrousd: 12_000n, settledMicrousd: 0n, releasedMicrousd: 0n });
      expect(s.account).toEqual({ pending: 20_000n, settled: 0n, unresolved: 12_000n });

      await expect(useCase.execute(primaryWon(), NOW)).resolves.toBe('settled');
      s = state();
      // 5 000 settled from the primary's own usage, the rest of the pool (15 000) released; 12 000 still unresolved
      expect(s.reservation).toMatchObject({
        status: 'unresolved',
        settledMicrousd: 5000n,
        releasedMicrousd: 15_000n,
        unresolvedMicrousd: 12_000n,
      });
      expect(s.account).toEqual({ pending: 0n, settled: 5000n, unresolved: 12_000n });
      // one ledger row per attempt that has usage; the loser's row comes with its evidence
      expect(s.ledger.map((l) => [l.attemptId, l.attemptNo, l.winner, l.attemptsTotal, l.policyRevisionId, l.deadlineOutcome])).toEqual([
        ['att-1', 1, true, 2, 'rev-1', 'on_time'],
      ]);
      expect(byTopic(s, 'usageSettled')).toEqual([
        expect.objectContaining({ attempt_id: 'att-1', attempt_role: 'primary', winner: true, attempts_total: 2, attempt_no: 1 }),
      ]);
    });

    it('a loser that reports usage settles from its own usage (its own ledger row), not from the winner', async () => {
      const { useCase, state } = harness({ attempts: [PRIMARY, { ...HEDGE, status: 'succeeded' }] });
      const loser = attemptEvent({
        event_id: '2d6f5b0e-8a57-4c4e-9c0f-6a1f2d3b4c5d',
        attempt_id: 'att-2',
        attempt_no: 2,
        attempt_role: 'hedge',
        input_tokens: 1000,
        output_tokens_total: 100,
        total_tokens: 1100,
        cached_input_tokens: 0,
        reasoning_tokens: 0,
        attempts_total: 2,
        action_final: false,
        winner: false,
        deadline_outcome: 'cancelled',
      });
      await expect(useCase.executeBatch([loser, primaryWon()], NOW)).resolves.toEqual(['settled', 'settled']);
      const s = state();
      // loser: 1 000 × 2.5 + 100 × 10 = 3 500; primary 5 000; the rest of 32 000 released
      expect(s.ledger.map((l) => [l.attemptId, l.costMicrousd, l.winner])).toEqual([
        ['att-2', 3500n, false],
        ['att-1', 5000n, true],
      ]);
      expect(s.reservation).toMatchObject({ status: 'settled', settledMicrousd: 8500n, releasedMicrousd: 23_500n, unresolvedMicrousd: 0n });
      expect(s.account).toEqual({ pending: 0n, settled: 8500n, unresolved: 0n });
    });

    it("a fallback on another route is priced at its own route's revision, the primary at the reservation's", async () => {
      // the fallback route costs four times as much: 10 / 5 / 40 / 40 micro-USD per token
      const DEAR: PriceRevision = {
        id: 'price-fallback',
        inputPerMTokMicrousd: 10_000_000n,
        cachedInputPerMTokMicrousd: 5_000_000n,
        outputPerMTokMicrousd: 40_000_000n,
        reasoningPerMTokMicrousd: 40_000_000n,
      };
      const { useCase, state } = harness({
        attempts: [
          { ...PRIMARY, status: 'failed' },
          { id: 'att-2', status: 'succeeded', hold: 30_000n, priceRevisionId: DEAR.id },
        ],
        otherPrices: [DEAR],
      });
      const primaryFailed = errorAnswer(503, { attempts_total: 2, action_final: false });
      const fallbackWon = attemptEvent({
        event_id: '3d6f5b0e-8a57-4c4e-9c0f-6a1f2d3b4c5d',
        attempt_id: 'att-2',
        attempt_no: 2,
        attempt_role: 'fallback',
        route_id: 'route-2',
        attempts_total: 2,
        winner: true,
      });
      await expect(useCase.executeBatch([primaryFailed, fallbackWon], NOW)).resolves.toEqual(['settled', 'settled']);
      const s = state();
      // fallback: 600 × 10 + 400 × 5 + 300 × 40 = 20 000 (at the primary's price it would be 5 000)
      expect(s.ledger.map((l) => [l.attemptId, l.priceRevisionId, l.costMicrousd])).toEqual([
        ['att-1', PRICE.id, 0n],
        ['att-2', DEAR.id, 20_000n],
      ]);
      expect(byTopic(s, 'usageSettled')).toEqual([
        expect.objectContaining({ attempt_id: 'att-1', price_revision: PRICE.id }),
        expect.objectContaining({ attempt_id: 'att-2', price_revision: DEAR.id, cost_microusd: '20000' }),
      ]);
      expect(s.reservation).toMatchObject({ status: 'settled', settledMicrousd: 20_000n, releasedMicrousd: 30_000n });
    });

    it('after the sweeper failed the action, a sibling whose event said action_final=false still releases the rest', async () => {
      // the hedge ended without usage (its own hold unresolved on a case, as the sweeper leaves an
      // orphan) and the action was failed; the primary's event, sent before with action_final=false,
      // settles afterwards: the action's state says it is over, so the rest of the pool is released
      const { useCase, state } = harness({ attempts: [PRIMARY, HEDGE], actionStatus: 'failed' });
      await expect(useCase.execute(hedgeCancelled(), NOW)).resolves.toBe('reconciliation_required');
      expect(state().reservation).toMatchObject({ unresolvedMicrousd: 12_000n, releasedMicrousd: 0n });
      await expect(useCase.execute(primaryWon({ action_final: false, winner: false }), NOW)).resolves.toBe('settled');
      expect(state().reservation).toMatchObject({
        status: 'unresolved',
        settledMicrousd: 5000n,
        releasedMicrousd: 15_000n,
        unresolvedMicrousd: 12_000n,
      });
      expect(state().account).toEqual({ pending: 0n, settled: 5000n, unresolved: 12_000n });
    });

    it('the same events while the action is still dispatched keep the rest pending (another attempt may start)', async () => {
      const { useCase, state } = harness({ attempts: [PRIMARY, HEDGE] });
      await useCase.execute(hedgeCancelled(), NOW);
      await expect(useCase.execute(primaryWon({ action_final: false, winner: false }), NOW)).resolves.toBe('settled');
      expect(state().reservation).toMatchObject({ settledMicrousd: 5000n, releasedMicrousd: 0n, unresolvedMicrousd: 12_000n });
      expect(state().account).toEqual({ pending: 15_000n, settled: 5000n, unresolved: 12_000n });
    });

    it('the last attempt without usage, once the action is over: its hold unresolved, the rest released', async () => {
      const { useCase, state } = harness({ attempts: [{ ...PRIMARY, status: 'settled' }, HEDGE] });
      await expect(useCase.execute(hedgeCancelled({ action_final: true }), NOW)).resolves.toBe('reconciliation_required');
      expect(state().reservation).toMatchObject({ status: 'unresolved', unresolvedMicrousd: 12_000n, releasedMicrousd: 20_000n });
      expect(state().account).toEqual({ pending: 0n, settled: 0n, unresolved: 12_000n });
    });
  });

  // Regression (issue 6): an attempt.completed event without a reservation used to return
  // 'no_reservation' and be marked processed with nothing else written: the attempt's spend vanished.
  it('opens a no_reservation case (never silently processed) when the action has no hold', async () => {
    const { useCase, state } = harness({ reservation: false });

    await expect(useCase.execute(attemptEvent(), NOW)).resolves.toBe('reconciliation_required');

    const s = state();
    expect(s).toMatchObject({ ledger: [], movements: [] });
    expect(s.cases).toEqual([
      expect.objectContaining({ actionId: 'act-1', attemptId: 'att-1', reason: 'no_reservation', exposureMicrousd: 0n }),
    ]);
    expect(byTopic(s, 'reconciliationRequired')).toEqual([expect.objectContaining({ reason: 'no_reservation', input_tokens: 1000 })]);
    // a redelivery opens nothing twice
    await expect(useCase.execute(attemptEvent({ event_id: '7a1c2e3f-4b5d-4e6f-8a9b-0c1d2e3f4a5b' }), NOW)).resolves.toBe(
      'reconciliation_required',
    );
    expect(state().cases).toHaveLength(1);
  });

  it('fails the whole transaction when the price revision is missing, so a redelivery can settle it', async () => {
    const { useCase, state } = harness({ price: null });

    await expect(useCase.execute(attemptEvent(), NOW)).rejects.toThrow(/price revision price-7 missing/);

    const s = state();
    expect(s.processed.size).toBe(0);
    expect(s).toMatchObject({ ledger: [], cases: [], outbox: [], movements: [] });
    expect(s.reservation).toMatchObject({ status: 'pending', settledMicrousd: 0n });
  });

  describe('a batch', () => {
    const second = (over: Partial<AttemptCompletedV1> = {}) =>
      attemptEvent({
        event_id: '7a1e9c2d-3b4f-4a5e-8d6c-1f2e3d4c5b6a',
        attempt_id: 'att-2',
        attempt_no: 2,
        attempt_role: 'hedge',
        ...over,
      });

    /** Both attempts of the one action: what the books say, ids aside (they are drawn in another order). */
    const books = (st: State) => ({
      reservation: st.reservation,
      account: st.account,
      attempts: [...st.attempts.entries()],
      ledger: st.ledger.map((r) => [r.attemptId, r.costMicrousd]),
      cases: st.cases.map((c) => [c.attemptId, c.reason, c.exposureMicrousd]),
      settled: byTopic(st, 'usageSettled').length,
    });

    it.each([
      ['two priced attempts, the first not final', [attemptEvent({ action_final: false }), second()]],
      ['an attempt without usage, then a priced final one', [attemptEvent({ ...NO_USAGE, action_final: false }), second()]],
      ['a priced attempt, then one without usage that ends the action', [attemptEvent({ action_final: false }), second(NO_USAGE)]],
      [
        'an event, its redelivery and a new event id for the same attempt',
        [attemptEvent(), attemptEvent(), attemptEvent({ event_id: '5c4b3a29-1d0e-4f8a-9b7c-6d5e4f3a2b1c' })],
      ],
    ])('settles as its events one at a time would: %s', async (_name, events) => {
      const oneByOne = harness();
      oneByOne.state().attempts.set('att-2', 'succeeded');
      const expected: string[] = [];
      for (const e of events) expected.push(await oneByOne.useCase.execute(e, NOW));

      const batched = harness();
      batched.state().attempts.set('att-2', 'succeeded');
      expect(await batched.useCase.executeBatch(events, NOW)).toEqual(expected);
      expect(books(batched.state())).toEqual(books(oneByOne.state()));
    });
  });
});

/**
 * The testing lib's structured revision under PRICE's id (PRICE's base rates, cache write $3.125, audio
 * in $40 and out $80, a priority tier at double every rate, a context tier above 1000 input tokens
 * these usages stay at), with web search at 1000 micro-USD a call.
 */
const STRUCTURED: PriceRevision = {
  ...structuredPrice(PRICE.id),
  perCallFees: [{ feature: 'web_search', feeMicrousd: 1_000n, reservedCallsPerRequest: 2 }],
};

/** 1000 in (400 cached, 100 written to the cache, 50 audio), 300 out (100 reasoning, 10 audio), three searches. */
const DETAILED: Partial<AttemptCompletedV1> = {
  cache_write_input_tokens: 100,
  audio_input_tokens: 50,
  audio_output_tokens: 10,
  service_tier: 'priority',
  feature_calls: { web_search: 3 },
};

describe('usageOfAttempt', () => {
  it('maps the v1 counts and leaves the detail at zero and the tier unset when the event has none', () => {
    expect(usageOfAttempt(attemptEvent())).toEqual({
      inputTokens: 1000,
      cachedInputTokens: 400,
      outputTokens: 300,
      reasoningTokens: 100,
      outputIncludesReasoning: true,
      cacheWriteInputTokens: 0,
      audioInputTokens: 0,
      audioOutputTokens: 0,
      imageOutputTokens: 0,
      serviceTier: null,
      featureCalls: {},
    });
    expect(
      usageOfAttempt(
        attemptEvent({ cache_write_input_tokens: null, audio_input_tokens: null, image_output_tokens: null, service_tier: null }),
      ),
    ).toMatchObject({ cacheWriteInputTokens: 0, audioInputTokens: 0, imageOutputTokens: 0, serviceTier: null });
  });

  it('carries every billable detail field', () => {
    expect(usageOfAttempt(attemptEvent({ ...DETAILED, image_output_tokens: 7, output_includes_reasoning: false }))).toEqual({
      inputTokens: 1000,
      cachedInputTokens: 400,
      outputTokens: 300,
      reasoningTokens: 100,
      outputIncludesReasoning: false,
      cacheWriteInputTokens: 100,
      audioInputTokens: 50,
      audioOutputTokens: 10,
      imageOutputTokens: 7,
      serviceTier: 'priority',
      featureCalls: { web_search: 3 },
    });
  });
});

describe('SettleAttempt at the tier the usage reached (issue 14)', () => {
  it('plain usage publishes the same settled event as before tiers: no extra category, tier or fee keys', async () => {
    const { useCase, state } = harness({ price: STRUCTURED });
    await useCase.execute(attemptEvent(), NOW);
    const settled = byTopic(state(), 'usageSettled')[0] as UsageSettledV1;
    expect(Object.keys(settled.cost_microusd_by_category!)).toEqual(['input', 'cached_input', 'output', 'reasoning']);
    expect(settled).not.toHaveProperty('service_tier');
    expect(settled).not.toHaveProperty('context_tier_above_input_tokens');
    expect(settled).not.toHaveProperty('fee_lines');
    expect(state().ledger[0]).toMatchObject({ serviceTier: 'default', feesMicrousd: 0n, feeLines: [], contextTierAboveInputTokens: null });
  });

  it('priority, cache write, audio and per-call fees: the row and the event carry each line, the total is the hand-computed bill', async () => {
    const { useCase, state } = harness({ price: STRUCTURED });
    await expect(useCase.execute(attemptEvent(DETAILED), NOW)).resolves.toBe('settled');
    // at priority rates: 450 plain input × 5 = 2250, 400 cached × 2.5 = 1000, 100 cache write × 6.25 = 625,
    // 50 audio in × 80 = 4000, 190 text out × 20 = 3800, 100 reasoning × 20 = 2000, 10 audio out × 160 = 1600,
    // 3 searches × 1000 = 3000
    const bill = 2250n + 1000n + 625n + 4000n + 3800n + 2000n + 1600n + 3000n;
    expect(state().ledger[0]).toMatchObject({
      inputMicrousd: 2250n,
      cachedInputMicrousd: 1000n,
      cacheWriteMicrousd: 625n,
      audioInputMicrousd: 4000n,
      outputMicrousd: 3800n,
      reasoningMicrousd: 2000n,
      audioOutputMicrousd: 1600n,
      imageOutputMicrousd: 0n,
      feesMicrousd: 3000n,
      feeLines: [{ feature: 'web_search', calls: 3, microusd: 3000n }],
      cacheWriteInputTokens: 100,
      audioInputTokens: 50,
      audioOutputTokens: 10,
      imageOutputTokens: 0,
      serviceTier: 'priority',
      contextTierAboveInputTokens: null,
      costMicrousd: bill,
    });
    const settled = byTopic(state(), 'usageSettled')[0] as UsageSettledV1;
    expect(settled).toMatchObject({
      cost_microusd: bill.toString(),
      cost_microusd_by_category: {
        input: '2250',
        cached_input: '1000',
        output: '3800',
        reasoning: '2000',
        cache_write: '625',
        audio_input: '4000',
        audio_output: '1600',
        fees: '3000',
      },
      service_tier: 'priority',
      fee_lines: [{ feature: 'web_search', calls: 3, microusd: '3000' }],
    });
    expect(settled.cost_microusd_by_category).not.toHaveProperty('image_output');
    const lines = Object.values(settled.cost_microusd_by_category!).reduce((a, b) => a + BigInt(b), 0n);
    expect(lines).toBe(bill);
    expect(state().cases).toEqual([]);
    expect(state().reservation).toMatchObject({ status: 'settled', settledMicrousd: bill, releasedMicrousd: RESERVED - bill });
  });

  it.each<[string, Partial<AttemptCompletedV1>, string[]]>([
    ['an unpriced feature', { feature_calls: { code_execution: 2 } }, ['feature:code_execution']],
    ['an unpriced service tier', { service_tier: 'scale' }, ['service_tier:scale']],
  ])('%s settles at the priced amount and opens a usage_unpriced case', async (_name, over, unpriced) => {
    const { useCase, state } = harness({ price: STRUCTURED });
    await expect(useCase.execute(attemptEvent(over), NOW)).resolves.toBe('settled');
    expect(state().ledger).toHaveLength(1);
    expect(state().cases).toEqual([
      expect.objectContaining({ reason: 'usage_unpriced', exposureMicrousd: 0n, details: expect.objectContaining({ unpriced }) }),
    ]);
    expect(byTopic(state(), 'reconciliationRequired')).toEqual([expect.objectContaining({ reason: 'usage_unpriced' })]);
    expect(state().attempts.get('att-1')).toBe('settled');
  });

  it('an unknown tier is billed at the dearest priced tier', async () => {
    const atPriority = harness({ price: STRUCTURED });
    await atPriority.useCase.execute(attemptEvent({ service_tier: 'priority' }), NOW);
    const unknown = harness({ price: STRUCTURED });
    await unknown.useCase.execute(attemptEvent({ service_tier: 'scale' }), NOW);
    expect(unknown.state().ledger[0].costMicrousd).toBe(atPriority.state().ledger[0].costMicrousd);
    expect(unknown.state().ledger[0].serviceTier).toBe('priority');
  });
});
