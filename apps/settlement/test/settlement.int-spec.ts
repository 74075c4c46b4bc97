/**
 * Settlement through the real repositories on Postgres: a redelivered `attempt.completed` settles
 * once (one ledger row, one `usage.settled` in the outbox, the hold moved once), an attempt with
 * no reservation opens a case, and the ledger query pages by keyset within a time range.
 */
import { randomUUID } from 'node:crypto';
import { AttemptCompletedV1, Topics } from '@gateway/contracts';
import {
  AttemptRepository,
  CaseRepository,
  CatalogRepository,
  Database,
  LedgerQueryRepository,
  LedgerRepository,
  OutboxRepository,
  ProcessedEventRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { randomIds } from '@gateway/service-kit';
import { answeredAttemptEvent, ledgerRow, seedHeldAttempt, Seeder } from '@gateway/testing';
import { QueryLedger } from '../src/usecases/query-ledger/query-ledger.usecase';
import { SettleAttempt } from '../src/usecases/settle-attempt/settle-attempt.usecase';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const PERIOD = new Date('2026-11-01T00:00:00Z');
const quiet = { info: () => undefined };

describe('settlement on Postgres', () => {
  const db = new Database(url, { poolMax: 10 });
  const outbox = new OutboxRepository(db);
  const ledger = new LedgerRepository(outbox);
  const settle = new SettleAttempt(
    new ProcessedEventRepository(db),
    new ReservationHoldRepository(),
    ledger,
    new CaseRepository(db, outbox),
    new AttemptRepository(),
    new CatalogRepository(db),
    randomIds,
    quiet,
  );
  const routeId = `route-settle-${randomUUID().slice(0, 8)}`;
  const priceId = `price-${routeId}-v1`;

  beforeAll(async () => {
    await new Seeder(db).route({
      routeId,
      alias: `alias-${routeId}`,
      providerKind: 'openai-chat',
      upstreamBaseUrl: 'http://x',
      upstreamModel: 'm',
    });
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

  const settledEvents = async (attemptId: string) =>
    db.prisma.$queryRaw<Array<{ payload: { request_id: string; cost_microusd: string } }>>`
      SELECT payload FROM outbox_message WHERE topic = ${Topics.usageSettled.name} AND payload->>'attempt_id' = ${attemptId}`;

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
    expect(await db.prisma.action.findUniqueOrThrow({ where: { id: a.actionId } })).toMatchObject({ financialState: 'settled' });
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
});
