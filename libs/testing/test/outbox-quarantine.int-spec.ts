import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { PolicyChangedV1, Topics } from '@gateway/contracts';
import { Database, OutboxRepository } from '@gateway/db';
import { KafkaBus, OutboxRelay } from '@gateway/messaging';
import { eventually } from '../src/eventually';

/**
 * Outbox rows that can never be published are quarantined (and the rows behind them still go
 * out); a broker that is down quarantines nothing; what went out is deleted, what waits stays.
 * Real Postgres and Kafka.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

function policyEvent(entityId: string, change = 'test'): PolicyChangedV1 {
  return {
    event_id: randomUUID(),
    timestamp: new Date().toISOString(),
    entity: 'workload',
    entity_id: entityId,
    change,
    actor: 'int-spec',
  };
}

/** A port on which nothing listens (bound, then released). */
function deadPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function recorder() {
  const errors: Array<{ obj: object; msg?: string }> = [];
  return {
    errors,
    logger: { info: () => undefined, warn: () => undefined, error: (obj: object, msg?: string) => errors.push({ obj, msg }) },
  };
}

describe('outbox quarantine and deletion', () => {
  const db = new Database(url);
  const outbox = new OutboxRepository(db, 0);
  const bus = new KafkaBus({ brokers, clientId: `int-q-${randomUUID().slice(0, 6)}`, logger: quiet });
  const seen: PolicyChangedV1[] = [];

  beforeAll(async () => {
    await bus.connect();
    await bus.ensureTopics();
    await bus.subscribe('policyChanged', { groupId: `int-quarantine-${randomUUID()}`, fromBeginning: false }, async (e) => {
      seen.push(e);
    });
  });

  afterAll(async () => {
    await bus.disconnect();
    await db.close();
  });

  const rowOf = (key: string) => db.prisma.outboxMessage.findFirstOrThrow({ where: { key } });

  it('quarantines a row larger than the broker accepts and publishes the rows after it', async () => {
    const tag = `q-${randomUUID()}`;
    const limit = await bus.maxMessageBytes(Topics.policyChanged.name);
    const keys = [`${tag}-before`, `${tag}-big`, `${tag}-after-1`, `${tag}-after-2`];
    for (const key of keys) {
      const change = key.endsWith('big') ? 'x'.repeat(limit + 1024) : 'test';
      await db.transaction((tx) => outbox.append(tx, 'policyChanged', key, policyEvent(key, change)));
    }
    const counted: Array<{ topic: string; reason: string }> = [];
    const alerts = recorder();
    const relay = new OutboxRelay(outbox, bus, alerts.logger, { quarantineCounter: { inc: (l) => counted.push(l) } });

    await relay.drain();

    await eventually(() => (seen.filter((e) => e.entity_id.startsWith(tag)).length >= 3 ? true : undefined));
    expect(seen.filter((e) => e.entity_id.startsWith(tag)).map((e) => e.entity_id)).toEqual([keys[0], keys[2], keys[3]]);
    const big = await rowOf(`${tag}-big`);
    expect(big.quarantinedAt).not.toBeNull();
    expect(big.quarantineReason).toBe('message_too_large');
    // the rows that went out are deleted in the sweep's transaction; the quarantined one stays
    const left = await db.prisma.outboxMessage.findMany({ where: { key: { startsWith: tag } }, select: { key: true } });
    expect(left.map((r) => r.key)).toEqual([`${tag}-big`]);
    expect(counted).toEqual([{ topic: Topics.policyChanged.name, reason: 'message_too_large' }]);
    // The alert names the row by id only: nothing of its payload.
    expect(alerts.errors).toHaveLength(1);
    expect(alerts.errors[0].obj).toEqual({ outbox_id: big.id.toString(), topic: Topics.policyChanged.name, reason: 'message_too_large' });

    // The next sweeps no longer load it.
    const loaded: string[] = [];
    await outbox.drainBatch(1000, async (rows) => {
      loaded.push(...rows.map((r) => r.key));
      return { published: [], quarantined: [] };
    });
    expect(loaded).not.toContain(`${tag}-big`);
    expect(await relay.drain()).toBe(0);
    expect(counted).toHaveLength(1);
  });

  it('quarantines a row whose payload no longer matches its topic schema, or whose topic is not declared', async () => {
    const tag = `schema-${randomUUID()}`;
    await db.prisma.$executeRaw`
      INSERT INTO outbox_message (event_id, topic, key, payload) VALUES
        (${randomUUID()}, ${Topics.policyChanged.name}, ${`${tag}-bad`}, ${JSON.stringify({ entity: 'nonsense' })}::jsonb),
        (${randomUUID()}, 'gateway.not.declared.v1', ${`${tag}-undeclared`}, '{}'::jsonb)`;
    await db.transaction((tx) => outbox.append(tx, 'policyChanged', `${tag}-good`, policyEvent(`${tag}-good`)));
    const relay = new OutboxRelay(outbox, bus, quiet);
    await relay.drain();
    expect((await rowOf(`${tag}-bad`)).quarantineReason).toBe('schema_invalid');
    expect((await rowOf(`${tag}-undeclared`)).quarantineReason).toBe('unknown_topic');
    await eventually(() => seen.find((e) => e.entity_id === `${tag}-good`));
  });

  it('a broker that is down quarantines nothing: the row is retried and goes out once the broker is back', async () => {
    const key = `down-${randomUUID()}`;
    await db.transaction((tx) => outbox.append(tx, 'policyChanged', key, policyEvent(key)));
    // Pointed at a port nobody listens on: every publish fails the way a lost broker does.
    const deadBus = new KafkaBus({
      brokers: [`127.0.0.1:${await deadPort()}`],
      clientId: 'int-dead',
      logger: quiet,
      retry: { initialRetryTime: 50, retries: 1, maxRetryTime: 100 },
    });
    const counted: unknown[] = [];
    const warnings: string[] = [];
    const down = new OutboxRelay(
      outbox,
      deadBus,
      { ...quiet, warn: (_obj: object, msg?: string) => warnings.push(msg ?? '') },
      { quarantineCounter: { inc: (l) => counted.push(l) } },
    );
    expect(await down.drain()).toBe(0);
    expect(await down.drain()).toBe(0);
    const row = await rowOf(key);
    expect(row.quarantinedAt).toBeNull(); // still there, waiting
    expect(counted).toHaveLength(0);
    expect(warnings).toEqual(Array(2).fill('outbox sweep publish failed; the next sweep retries'));
    await deadBus.disconnect();

    await new OutboxRelay(outbox, bus, quiet).drain();
    await eventually(() => seen.find((e) => e.entity_id === key));
    expect(await db.prisma.outboxMessage.count({ where: { key } })).toBe(0);
  });

  it("the sweep takes only rows past their writer's lease, and never a quarantined one, however old", async () => {
    const leased = new OutboxRepository(db, 60_000);
    const tag = `lease-${randomUUID()}`;
    const keys = ['fresh', 'old', 'old-quarantined'].map((k) => `${tag}-${k}`);
    for (const key of keys) await db.transaction((tx) => leased.append(tx, 'policyChanged', key, policyEvent(key)));
    const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000);
    // Made old but never published: a long outage must not lose it.
    await db.prisma.outboxMessage.update({ where: { eventId: (await rowOf(keys[1])).eventId }, data: { createdAt: hoursAgo(200) } });
    await db.prisma.outboxMessage.update({
      where: { eventId: (await rowOf(keys[2])).eventId },
      data: { createdAt: hoursAgo(200), quarantinedAt: hoursAgo(199), quarantineReason: 'message_too_large' },
    });
    const loaded: string[] = [];
    await leased.drainBatch(1000, async (rows) => {
      loaded.push(...rows.map((r) => r.key).filter((k) => k.startsWith(tag)));
      return { published: rows.filter((r) => r.key.startsWith(tag)).map((r) => r.id), quarantined: [] };
    });
    expect(loaded).toEqual([keys[1]]);
    const left = await db.prisma.outboxMessage.findMany({ where: { key: { startsWith: tag } }, select: { key: true } });
    expect(left.map((r) => r.key).sort()).toEqual([keys[0], keys[2]].sort());
  });
});
