/**
 * Settlement in batches, on the real Postgres and Kafka: a batch repeating events (same event id,
 * or a new event id for an attempt already in it) settles each attempt once, and the same batch
 * delivered again settles nothing; a batch whose handler fails after its transaction committed
 * (a crash before the offset commit) comes again (in halves) and every event is a duplicate; a poison event in the middle of a batch is parked while the events around it settle.
 */
import { randomUUID } from 'node:crypto';
import { AttemptCompletedV1, DeadLetterV1, UsageSettledV1 } from '@gateway/contracts';
import { Database, OutboxRepository } from '@gateway/db';
import { KafkaBus } from '@gateway/messaging';
import { answeredAttemptEvent, eventually, seedHeldAttempt } from '@gateway/testing';
import { SettleOutcome } from '../src/usecases/settle-attempt/settle-attempt.usecase';
import { settleOnPostgres, uniqueRoute } from './settle-on-postgres';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const PERIOD = new Date('2026-12-02T00:00:00Z');
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const FAST = { initialBackoffMs: 10, maxBackoffMs: 20, maxTransientRetries: 1 };

describe('settlement batches', () => {
  const db = new Database(url, { poolMax: 10 });
  const settle = settleOnPostgres(db);
  const bus = new KafkaBus({ brokers: BROKERS.split(','), clientId: `settle-batch-int-${process.pid}`, logger: quiet });
  const route = uniqueRoute('route-batch');
  const { routeId, priceId } = route;

  beforeAll(async () => {
    await route.seed(db);
    await bus.connect();
    await bus.ensureTopics();
  });
  afterAll(async () => {
    await bus.disconnect();
    await db.close();
  });

  /** `n` answered attempts of one workload (one budget account), each holding 20,000 micro-USD. */
  async function answered(n: number) {
    const workloadId = `wl-batch-${randomUUID()}`;
    const out = [];
    for (let i = 0; i < n; i++) {
      out.push(
        await seedHeldAttempt(db, { routeId, priceRevisionId: priceId, reservedMicrousd: 20_000n, periodStart: PERIOD, workloadId }),
      );
    }
    return out;
  }

  function completed(
    a: { workloadId: string; actionId: string; attemptId: string },
    usage = { input: 100, cached: 0 },
  ): AttemptCompletedV1 {
    return answeredAttemptEvent(
      { ...a, routeId },
      { input_tokens: usage.input, total_tokens: usage.input + 50, cached_input_tokens: usage.cached },
    );
  }

  /** Ledger rows, settled events and the workload account, for the attempts of one workload. */
  async function books(attempts: Array<{ attemptId: string; accountId: string }>) {
    const ids = attempts.map((a) => a.attemptId);
    const rows = await db.prisma.ledgerEntry.findMany({ where: { attemptId: { in: ids } } });
    const settledEvents = (await new OutboxRepository(db).waitingMessages('usageSettled')).map((m) => m.payload as UsageSettledV1);
    const acct = await db.prisma.budgetAccount.findUniqueOrThrow({ where: { id: attempts[0].accountId } });
    const attemptRows = await db.prisma.attempt.findMany({ where: { id: { in: ids } } });
    return {
      rowsPerAttempt: ids.map((id) => rows.filter((r) => r.attemptId === id).length),
      eventsPerAttempt: ids.map((id) => settledEvents.filter((e) => e.attempt_id === id).length),
      cost: rows.reduce((sum, r) => sum + r.costMicrousd, 0n),
      account: { pending: acct.pendingMicrousd, settled: acct.settledMicrousd, unresolved: acct.unresolvedMicrousd },
      statuses: ids.map((id) => attemptRows.find((r) => r.id === id)?.status),
    };
  }

  it('a batch repeating events settles each attempt once, and the same batch again settles nothing', async () => {
    const a = await answered(3);
    const e = a.map((x) => completed(x));
    const batch = [e[0], e[1], e[0], { ...e[1], event_id: randomUUID() }, e[2]];

    expect(await settle.executeBatch(batch, new Date())).toEqual(['settled', 'settled', 'duplicate', 'duplicate', 'settled']);
    const once = await books(a);
    expect(once.rowsPerAttempt).toEqual([1, 1, 1]);
    expect(once.eventsPerAttempt).toEqual([1, 1, 1]);
    expect(once.statuses).toEqual(['settled', 'settled', 'settled']);
    // every action was final: its cost settled, the rest of its hold released
    expect(once.account).toEqual({ pending: 0n, settled: once.cost, unresolved: 0n });
    const reservations = await db.prisma.reservation.findMany({ where: { actionId: { in: a.map((x) => x.actionId) } } });
    expect(reservations.map((r) => [r.status, r.settledMicrousd + r.releasedMicrousd])).toEqual(
      reservations.map(() => ['settled', 20_000n]),
    );

    expect(await settle.executeBatch(batch, new Date())).toEqual(batch.map(() => 'duplicate'));
    expect(await books(a)).toEqual(once);
  });

  it('a batch whose handler fails after its commit comes again in halves, each event a duplicate', async () => {
    const a = await answered(4);
    const calls: SettleOutcome[][] = [];
    let crashed = false;
    const consumer = await bus.subscribeBatch(
      'attemptCompleted',
      { groupId: `settle-batch-int-${randomUUID()}`, fromBeginning: false, batch: { maxSize: 50 }, poison: FAST },
      async (items) => {
        const mine = items.map((i) => i.payload).filter((p) => a.some((x) => x.attemptId === p.attempt_id));
        if (mine.length === 0) return;
        calls.push(await settle.executeBatch(mine, new Date()));
        if (!crashed && mine.length > 1) {
          crashed = true;
          throw new Error('process died before the offset commit');
        }
      },
    );
    try {
      // one produce request with one key: one partition, fetched as one batch
      await bus.publish(
        'attemptCompleted',
        a.map((x) => ({ key: x.workloadId, value: completed(x) })),
      );
      await eventually(async () => (calls.length >= 3 ? true : undefined), { timeoutMs: 30_000, what: 'the batch and its redelivery' });
      expect(calls).toEqual([
        ['settled', 'settled', 'settled', 'settled'],
        ['duplicate', 'duplicate'],
        ['duplicate', 'duplicate'],
      ]);
      const after = await books(a);
      expect(after.rowsPerAttempt).toEqual([1, 1, 1, 1]);
      expect(after.eventsPerAttempt).toEqual([1, 1, 1, 1]);
      expect(after.account).toEqual({ pending: 0n, settled: after.cost, unresolved: 0n });
    } finally {
      await consumer.stop();
    }
  });

  it('a poison event in the middle of a batch is parked; the events before and after it settle', async () => {
    const a = await answered(3);
    const parked: DeadLetterV1[] = [];
    const calls: string[][] = [];
    const consumer = await bus.subscribeBatch(
      'attemptCompleted',
      {
        groupId: `settle-batch-int-${randomUUID()}`,
        fromBeginning: false,
        batch: { maxSize: 50 },
        poison: FAST,
        onPoison: async (record) => {
          parked.push(record);
        },
      },
      async (items) => {
        const mine = items.map((i) => i.payload).filter((p) => a.some((x) => x.attemptId === p.attempt_id));
        if (mine.length === 0) return;
        try {
          await settle.executeBatch(mine, new Date());
        } finally {
          // recorded once the transaction is over, committed or rolled back
          calls.push(mine.map((p) => p.attempt_id));
        }
      },
    );
    try {
      // cached tokens above input tokens: pricing throws RangeError, on every delivery
      const events = [completed(a[0]), completed(a[1], { input: 10, cached: 900 }), completed(a[2])];
      await bus.publish(
        'attemptCompleted',
        events.map((value) => ({ key: a[0].workloadId, value })),
      );
      await eventually(async () => (parked.length === 1 && calls.length === 5 ? true : undefined), {
        timeoutMs: 30_000,
        what: 'the poison event parked and the event after it handled',
      });
      expect(parked[0]).toMatchObject({ attempt_id: a[1].attemptId, reason_class: 'deterministic_error', error_class: 'RangeError' });
      const ids = a.map((x) => x.attemptId);
      // the whole batch (rolled back), its halves (the first rolled back), then single events
      expect(calls).toEqual([ids, [ids[0], ids[1]], [ids[0]], [ids[1]], [ids[2]]]);
      const after = await books(a);
      expect(after.rowsPerAttempt).toEqual([1, 0, 1]);
      expect(after.statuses).toEqual(['settled', 'succeeded', 'settled']);
      // the poison attempt's hold stays pending (its case, opened by the service's poison hook, holds it)
      expect(after.account).toEqual({ pending: 20_000n, settled: after.cost, unresolved: 0n });
    } finally {
      await consumer.stop();
    }
  });
});
