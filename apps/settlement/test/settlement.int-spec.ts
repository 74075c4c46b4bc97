/**
 * Settlement through the real repositories on Postgres: a redelivered `attempt.completed` settles
 * once (one ledger row, one `usage.settled` in the outbox, the hold moved once), an attempt with
 * no reservation opens a case, and the ledger query pages by keyset within a time range; and
 * settlement at the tier the usage reached (issue 14): a priority-tier attempt with cache writes,
 * audio and per-call fees, a long-context attempt, and a tier the revision does not price, against
 * a structured revision stored in Postgres.
 */
import { randomUUID } from 'node:crypto';
import { AttemptCompletedV1, Topics, UsageSettledV1 } from '@gateway/contracts';
import { Database, LedgerQueryRepository, LedgerRepository, OutboxRepository } from '@gateway/db';
import type { OutboxRow } from '@gateway/messaging';
import { answeredAttemptEvent, ledgerRow, seedHeldAttempt, Seeder, STRUCTURED_CONTEXT_THRESHOLD, structuredPrice } from '@gateway/testing';
import { QueryLedger } from '../src/usecases/query-ledger/query-ledger.usecase';
import { settleOnPostgres, uniqueRoute } from './settle-on-postgres';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const PERIOD = new Date('2026-11-01T00:00:00Z');

describe('settlement on Postgres', () => {
  const db = new Database(url, { poolMax: 10 });
  const outbox = new OutboxRepository(db);
  const ledger = new LedgerRepository(outbox);
  const tieredRouteId = `route-tiers-${randomUUID().slice(0, 8)}`;
  const tieredPriceId = `price-${tieredRouteId}-v1`;
  const settle = settleOnPostgres(db, outbox, ledger);
  const route = uniqueRoute('route-settle');
  const { routeId, priceId } = route;

  beforeAll(async () => {
    await route.seed(db);
    const { id: _id, ...structured } = structuredPrice(tieredPriceId);
    await new Seeder(db).route(
      {
        routeId: tieredRouteId,
        alias: `alias-${tieredRouteId}`,
        providerKind: 'openai-chat',
        upstreamBaseUrl: 'http://x',
        upstreamModel: 'm',
      },
      { price: structured },
    );
  });
  afterAll(() => db.close());

  const answered = (reservedMicrousd: bigint) =>
    seedHeldAttempt(db, { routeId, priceRevisionId: priceId, reservedMicrousd, periodStart: PERIOD });

  function completed(
    a: { workloadId: string; actionId: string; attemptId: string },
    over: Partial<AttemptCompletedV1> = {},
  ): AttemptCompletedV1 {
    return answeredAttemptEvent({ ...a, routeId }, { provider_request_id: 'chatcmpl-1', ...over });
  }

  // What the relay of the settling process would publish at once: each event as built, as its text.
  const sentAtOnce: OutboxRow[] = [];
  outbox.onCommittedAppend((rows) => sentAtOnce.push(...rows));

  /**
   * An attempt's `usage.settled` events still in the outbox, as a sweep would publish them (built
   * from the ledger row the batch's one outbox row names), and the same as the relay would have
   * sent at once: key and payload, compared as published text.
   */
  const settledEvents = async (attemptId: string) => {
    const ofAttempt = (rows: OutboxRow[]) =>
      rows.filter((r) => r.topic === Topics.usageSettled.name && (r.payload as UsageSettledV1).attempt_id === attemptId);
    const swept = ofAttempt(await outbox.waitingMessages('usageSettled'));
    expect(swept.map((r) => ({ key: r.key, payload: JSON.parse(JSON.stringify(r.payload)) }))).toEqual(
      ofAttempt(sentAtOnce).map((r) => ({ key: r.key, payload: JSON.parse(r.json as string) })),
    );
    return swept as Array<OutboxRow & { payload: UsageSettledV1 }>;
  };

  it('a redelivered attempt.completed (same and new event id, also racing) writes one ledger row and one settled event', async () => {
    const a = await answered(20_000n);
    const e = completed(a);

    const outcomes = await Promise.all([settle.execute(e, new Date()), settle.execute(e, new Date())]);
    outcomes.push(await settle.execute({ ...e, event_id: randomUUID() }, new Date()));

    expect(outcomes.filter((o) => o === 'settled')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'duplicate')).toHaveLength(2);
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: a.attemptId } })).toBe(1);
    const events = await settledEvents(a.attemptId);
    expect(events).toHaveLength(1);
    const row = await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: a.attemptId } });
    expect(events[0].payload).toMatchObject({ request_id: `req-${a.actionId}`, cost_microusd: row.costMicrousd.toString() });
    expect(row.requestId).toBe(`req-${a.actionId}`);
    const acct = await db.prisma.budgetAccount.findUniqueOrThrow({ where: { id: a.accountId } });
    expect({ pending: acct.pendingMicrousd, settled: acct.settledMicrousd, unresolved: acct.unresolvedMicrousd }).toEqual({
      pending: 0n,
      settled: row.costMicrousd,
      unresolved: 0n,
    });
    expect(await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: a.actionId } })).toMatchObject({
      status: 'settled',
      settledMicrousd: row.costMicrousd,
      releasedMicrousd: 20_000n - row.costMicrousd,
    });
    expect(await db.prisma.attempt.findUniqueOrThrow({ where: { id: a.attemptId } })).toMatchObject({
      status: 'settled',
      financialState: 'settled',
    });
  });

  it('an attempt with no reservation opens a no_reservation case once, never silently processed', async () => {
    const a = { workloadId: `wl-${randomUUID()}`, actionId: randomUUID(), attemptId: randomUUID() };
    const e = completed(a);

    await expect(settle.execute(e, new Date())).resolves.toBe('reconciliation_required');
    await settle.execute({ ...e, event_id: randomUUID() }, new Date());

    const cases = await db.prisma.reconciliationCase.findMany({ where: { attemptId: a.attemptId } });
    expect(cases).toEqual([expect.objectContaining({ reason: 'no_reservation', status: 'open', actionId: a.actionId })]);
    const required = await db.prisma.$queryRaw<Array<{ n: bigint }>>`
      SELECT count(*) AS n FROM outbox_message WHERE topic = ${Topics.reconciliationRequired.name} AND payload->>'attempt_id' = ${a.attemptId}`;
    expect(Number(required[0].n)).toBe(1);
  });

  it('GET /ledger pages newest first by an opaque keyset cursor, within a time range, missing and repeating nothing', async () => {
    const workloadId = `wl-page-${randomUUID()}`;
    const base = Date.parse('2026-11-20T00:00:00Z');
    // two rows share a settled_at, so the id breaks the tie
    const at = [0, 1, 1, 2, 3, 4, 5].map((m) => new Date(base + m * 60_000));
    await db.transaction(async (tx) => {
      for (const settledAt of at) {
        const row = ledgerRow({ workloadId, routeId, priceRevisionId: priceId, settledAt });
        await ledger.record(tx, row, randomUUID());
      }
    });
    const query = new QueryLedger(new LedgerQueryRepository(db));
    const all = await query.execute({ workloadId, actionId: null, from: null, to: null, cursor: null, limit: 1000 });
    expect(all.entries.map((e) => e.settled_at)).toEqual([...at].reverse().map((d) => d.toISOString()));

    const paged: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Awaited<ReturnType<QueryLedger['execute']>> = await query.execute({
        workloadId,
        actionId: null,
        from: null,
        to: null,
        cursor,
        limit: 2,
      });
      paged.push(...page.entries.map((e) => e.ledger_entry_id));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(paged).toEqual(all.entries.map((e) => e.ledger_entry_id));

    const window = await query.execute({
      workloadId,
      actionId: null,
      from: at[1].toISOString(),
      to: at[5].toISOString(),
      cursor: null,
      limit: 1000,
    });
    expect(window.entries.map((e) => e.settled_at)).toEqual([at[4], at[3], at[2], at[1]].map((d) => d.toISOString()));
    await expect(
      query.execute({ workloadId, actionId: null, from: null, to: null, cursor: 'not-a-cursor', limit: 2 }),
    ).rejects.toMatchObject({
      code: 'invalid_request',
    });
  });

  describe('at the tier the usage reached (issue 14)', () => {
    async function settledAtTiers(over: Partial<AttemptCompletedV1>) {
      const a = await seedHeldAttempt(db, {
        routeId: tieredRouteId,
        priceRevisionId: tieredPriceId,
        reservedMicrousd: 100_000n,
        periodStart: PERIOD,
      });
      const outcome = await settle.execute(answeredAttemptEvent({ ...a, routeId: tieredRouteId }, over), new Date());
      const row = await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: a.attemptId } });
      const events = await settledEvents(a.attemptId);
      expect(events).toHaveLength(1);
      const cases = await db.prisma.reconciliationCase.findMany({ where: { attemptId: a.attemptId } });
      const [read] = await new LedgerQueryRepository(db).page({
        workloadId: null,
        actionId: a.actionId,
        from: null,
        to: null,
        after: null,
        limit: 1,
      });
      return { a, outcome, row, event: Topics.usageSettled.schema.parse(events[0].payload), cases, read };
    }

    it('priority with cache writes, audio and web search: every line on the row and the event, the total is the hand-computed bill', async () => {
      const { outcome, row, event, cases, read } = await settledAtTiers({
        input_tokens: 800,
        cached_input_tokens: 200,
        cache_write_input_tokens: 100,
        audio_input_tokens: 50,
        output_tokens_total: 300,
        reasoning_tokens: 100,
        audio_output_tokens: 20,
        total_tokens: 1100,
        service_tier: 'priority',
        feature_calls: { web_search: 2 },
      });
      // priority = double the base, per token: 450 plain input × 5 = 2250, 200 cached × 2.5 = 500,
      // 100 cache write × 6.25 = 625, 50 audio in × 80 = 4000, 180 text out × 20 = 3600,
      // 100 reasoning × 20 = 2000, 20 audio out × 160 = 3200; 2 searches × 10 000 = 20 000
      const bill = 2250n + 500n + 625n + 4000n + 3600n + 2000n + 3200n + 20_000n;
      expect(outcome).toBe('settled');
      expect(cases).toEqual([]);
      expect(row).toMatchObject({
        costMicrousd: bill,
        inputMicrousd: 2250n,
        cachedInputMicrousd: 500n,
        cacheWriteMicrousd: 625n,
        audioInputMicrousd: 4000n,
        outputMicrousd: 3600n,
        reasoningMicrousd: 2000n,
        audioOutputMicrousd: 3200n,
        imageOutputMicrousd: 0n,
        feesMicrousd: 20_000n,
        feeLines: [{ feature: 'web_search', calls: 2, microusd: '20000' }],
        cacheWriteInputTokens: 100,
        audioInputTokens: 50,
        audioOutputTokens: 20,
        imageOutputTokens: 0,
        serviceTier: 'priority',
        contextTierAboveInputTokens: null,
      });
      expect(event).toMatchObject({
        cost_microusd: bill.toString(),
        cost_microusd_by_category: {
          input: '2250',
          cached_input: '500',
          output: '3600',
          reasoning: '2000',
          cache_write: '625',
          audio_input: '4000',
          audio_output: '3200',
          fees: '20000',
        },
        service_tier: 'priority',
        fee_lines: [{ feature: 'web_search', calls: 2, microusd: '20000' }],
      });
      expect(event).not.toHaveProperty('context_tier_above_input_tokens');
      expect(read).toMatchObject({
        feeLines: [{ feature: 'web_search', calls: 2, microusd: 20_000n }],
        serviceTier: 'priority',
        costMicrousd: bill,
      });
    });

    it('a prompt above the threshold is billed at the context tier, and the event names it', async () => {
      const { row, event } = await settledAtTiers({ input_tokens: 1500, output_tokens_total: 50, total_tokens: 1550 });
      // whole request at double: 1500 × 5 + 50 × 20
      expect(row).toMatchObject({ costMicrousd: 8500n, contextTierAboveInputTokens: STRUCTURED_CONTEXT_THRESHOLD, serviceTier: 'default' });
      expect(event).toMatchObject({ cost_microusd: '8500', context_tier_above_input_tokens: STRUCTURED_CONTEXT_THRESHOLD });
      expect(event).not.toHaveProperty('service_tier');
      expect(event).not.toHaveProperty('fee_lines');
    });

    it('a tier the revision does not price settles at the dearest priced tier and opens a usage_unpriced case', async () => {
      const { a, outcome, row, cases } = await settledAtTiers({ service_tier: 'flex' });
      // 100 in, 50 out at priority: 100 × 5 + 50 × 20
      expect(outcome).toBe('settled');
      expect(row).toMatchObject({ costMicrousd: 1500n, serviceTier: 'priority' });
      expect(cases).toEqual([
        expect.objectContaining({
          reason: 'usage_unpriced',
          status: 'open',
          exposureMicrousd: 0n,
          details: expect.objectContaining({ unpriced: ['service_tier:flex'] }),
        }),
      ]);
      const required = await db.prisma.$queryRaw<Array<{ payload: { reason: string } }>>`
        SELECT payload FROM outbox_message WHERE topic = ${Topics.reconciliationRequired.name} AND payload->>'attempt_id' = ${a.attemptId}`;
      expect(required.map((r) => r.payload.reason)).toEqual(['usage_unpriced']);
      expect(await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: a.actionId } })).toMatchObject({
        status: 'settled',
        settledMicrousd: 1500n,
      });
    });
  });
});
