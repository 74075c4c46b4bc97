/**
 * A settled batch announces its ledger rows with one outbox row (kind `ledger_settled`, issue 12),
 * on the real Postgres and Kafka: a sweep publishes the events the writer's relay would have sent
 * at once, built from the ledger rows, and deletes the row only once all of them are out; a sweep
 * stopped half way keeps the row and the next sends it whole; a row naming a ledger row that is
 * gone is quarantined (`source_missing`), one that can never be built (hand-written, not pairs, on
 * another topic) as `schema_invalid`, and the rows behind them still go out.
 */
import { randomUUID } from 'node:crypto';
import { Topics, UsageSettledV1 } from '@gateway/contracts';
import { Database, LedgerRepository, OutboxRepository } from '@gateway/db';
import { KafkaBus, OutboxPublisher, OutboxRelay, OutboxRow, RawMessage } from '@gateway/messaging';
import { answeredAttemptEvent, eventually, seedHeldAttempt } from '@gateway/testing';
import { settleOnPostgres, uniqueRoute } from './settle-on-postgres';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const PERIOD = new Date('2026-12-05T00:00:00Z');
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('a settled batch in the outbox', () => {
  const db = new Database(url, { poolMax: 10 });
  // a lease of 0: every sweep may take every row (the writer's relay is not running here)
  const outbox = new OutboxRepository(db, 0);
  const settle = settleOnPostgres(db, outbox, new LedgerRepository(outbox));
  const bus = new KafkaBus({ brokers: BROKERS.split(','), clientId: `settled-outbox-int-${process.pid}`, logger: quiet });
  const route = uniqueRoute('route-settled-outbox');
  const built: OutboxRow[] = [];
  const published: Array<{ key: string; event: UsageSettledV1 }> = [];

  beforeAll(async () => {
    await route.seed(db);
    outbox.onCommittedAppend((rows) => built.push(...rows));
    await bus.connect();
    await bus.ensureTopics();
    await bus.subscribe('usageSettled', { groupId: `settled-outbox-int-${randomUUID()}`, fromBeginning: false }, async (event, meta) => {
      published.push({ key: meta.key ?? '', event });
    });
  });
  afterAll(async () => {
    await bus.disconnect();
    await db.close();
  });

  /** `n` answered attempts of a fresh workload, settled in one batch with no relay running. */
  async function settledBatch(n: number) {
    const workloadId = `wl-settled-outbox-${randomUUID()}`;
    const held = [];
    for (let i = 0; i < n; i++) {
      held.push(
        await seedHeldAttempt(db, {
          routeId: route.routeId,
          priceRevisionId: route.priceId,
          reservedMicrousd: 20_000n,
          periodStart: PERIOD,
          workloadId,
        }),
      );
    }
    const outcomes = await settle.executeBatch(
      held.map((h) => answeredAttemptEvent({ ...h, routeId: route.routeId })),
      new Date(),
    );
    expect(outcomes).toEqual(held.map(() => 'settled'));
    const mine = built.filter((r) => r.key === workloadId);
    return { workloadId, attemptIds: held.map((h) => h.attemptId), mine, rowIds: [...new Set(mine.map((r) => r.id))] };
  }

  const publishedFor = (workloadId: string) => published.filter((p) => p.key === workloadId);

  it('is one row; a sweep publishes the events the relay would have sent at once and deletes the row', async () => {
    const batch = await settledBatch(3);
    expect(batch.mine).toHaveLength(3);
    expect(batch.rowIds).toHaveLength(1);
    const stored = await db.prisma.outboxMessage.findUniqueOrThrow({ where: { id: batch.rowIds[0] } });
    expect(stored.kind).toBe('ledger_settled');
    expect(stored.topic).toBe(Topics.usageSettled.name);
    // names the ledger rows, never carries the events themselves
    expect(stored.payload).toEqual(
      batch.mine.map((r) => [(r.payload as UsageSettledV1).attempt_id, (r.payload as UsageSettledV1).event_id]),
    );

    await new OutboxRelay(outbox, bus, quiet).drain();

    await eventually(() => (publishedFor(batch.workloadId).length >= 3 ? true : undefined));
    expect(publishedFor(batch.workloadId).map((p) => p.event)).toEqual(batch.mine.map((r) => JSON.parse(r.json as string)));
    expect(await db.prisma.outboxMessage.count({ where: { id: batch.rowIds[0] } })).toBe(0);
  });

  it('a sweep stopped half way keeps the row; the next one sends all of it again', async () => {
    const batch = await settledBatch(3);
    // fails the second send that carries one of this batch's events (one event a send)
    let sends = 0;
    const failing: OutboxPublisher = {
      publishRaw: async (topic: string, messages: RawMessage[]) => {
        if (messages.some((m) => m.key === batch.workloadId) && ++sends === 2) throw new Error('Connection error: ECONNREFUSED');
        await bus.publishRaw(topic, messages);
      },
    };
    await new OutboxRelay(outbox, failing, quiet, { maxSendBytes: 1 }).drain();
    const kept = await db.prisma.outboxMessage.findUniqueOrThrow({ where: { id: batch.rowIds[0] } });
    expect(kept.quarantinedAt).toBeNull();
    await eventually(() => (publishedFor(batch.workloadId).length >= 1 ? true : undefined));

    await new OutboxRelay(outbox, bus, quiet).drain();

    // at least once: the event that went out before the failure goes out again (consumers are idempotent)
    await eventually(() => (publishedFor(batch.workloadId).length >= 4 ? true : undefined));
    const ids = publishedFor(batch.workloadId).map((p) => p.event.attempt_id);
    expect([...new Set(ids)].sort()).toEqual([...batch.attemptIds].sort());
    expect(ids.filter((id) => id === batch.attemptIds[0])).toHaveLength(2);
    expect(await db.prisma.outboxMessage.count({ where: { id: batch.rowIds[0] } })).toBe(0);
  });

  it('a row that can never be built (not pairs, no pairs, an id with a NUL, another topic) is quarantined, never fails every sweep', async () => {
    const hostile = [
      [Topics.usageSettled.name, JSON.stringify({ attempt_id: 'x' })],
      [Topics.usageSettled.name, '[]'],
      [Topics.usageSettled.name, JSON.stringify([[1e308, null]])],
      [Topics.usageSettled.name, JSON.stringify([['a\u0000b']])],
      // a well-formed pair whose id holds a NUL, which Postgres text cannot: must not fail the sweep
      [Topics.usageSettled.name, JSON.stringify([[`attempt-\u0000${randomUUID()}`, randomUUID()]])],
      [Topics.policyChanged.name, JSON.stringify([[`attempt-${randomUUID()}`, randomUUID()]])],
    ];
    const ids: bigint[] = [];
    for (const [topic, payload] of hostile) {
      const [row] = await db.prisma.$queryRaw<Array<{ id: bigint }>>`
        INSERT INTO outbox_message (event_id, topic, key, payload, kind)
        VALUES (${randomUUID()}, ${topic}, '', ${payload}::json, 'ledger_settled') RETURNING id`;
      ids.push(row.id);
    }
    const batch = await settledBatch(2);

    await new OutboxRelay(outbox, bus, quiet).drain();

    const rows = await db.prisma.outboxMessage.findMany({ where: { id: { in: ids } }, orderBy: { id: 'asc' } });
    expect(rows.map((r) => r.quarantineReason)).toEqual(hostile.map(() => 'schema_invalid'));
    await eventually(() => (publishedFor(batch.workloadId).length >= 2 ? true : undefined));
    expect(await db.prisma.outboxMessage.count({ where: { id: batch.rowIds[0] } })).toBe(0);
  });

  it('a row naming a ledger row that is gone is quarantined, and the rows behind it still go out', async () => {
    const [gone] = await db.prisma.$queryRaw<Array<{ id: bigint }>>`
      INSERT INTO outbox_message (event_id, topic, key, payload, kind)
      VALUES (${randomUUID()}, ${Topics.usageSettled.name}, '', ${JSON.stringify([[`attempt-gone-${randomUUID()}`, randomUUID()]])}::json, 'ledger_settled')
      RETURNING id`;
    // an id 100,000 characters long names no ledger row either
    const [long] = await db.prisma.$queryRaw<Array<{ id: bigint }>>`
      INSERT INTO outbox_message (event_id, topic, key, payload, kind)
      VALUES (${randomUUID()}, ${Topics.usageSettled.name}, '', ${JSON.stringify([['x'.repeat(100_000), randomUUID()]])}::json, 'ledger_settled')
      RETURNING id`;
    const batch = await settledBatch(2);
    const counted: Array<{ topic: string; reason: string }> = [];

    await new OutboxRelay(outbox, bus, quiet, { quarantineCounter: { inc: (l) => counted.push(l) } }).drain();

    const row = await db.prisma.outboxMessage.findUniqueOrThrow({ where: { id: gone.id } });
    expect(row.quarantineReason).toBe('source_missing');
    expect((await db.prisma.outboxMessage.findUniqueOrThrow({ where: { id: long.id } })).quarantineReason).toBe('source_missing');
    expect(counted).toContainEqual({ topic: Topics.usageSettled.name, reason: 'source_missing' });
    await eventually(() => (publishedFor(batch.workloadId).length >= 2 ? true : undefined));
    expect(await db.prisma.outboxMessage.count({ where: { id: batch.rowIds[0] } })).toBe(0);
  });
});
