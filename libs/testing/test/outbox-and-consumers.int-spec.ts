import { randomUUID } from 'node:crypto';
import { dispatchReplyV1 as dispatchReplyV1Schema, PolicyChangedV1, Topics } from '@gateway/contracts';
import { Database, OutboxRepository, ProcessedEventRepository } from '@gateway/db';
import { ContentCipher, handleOnce, KafkaBus, OutboxRelay, OutboxStore, RawMessage, ReplyRouter } from '@gateway/messaging';
import { eventually } from '../src/eventually';
import { policyChangedEvent, responseReply } from '../src/events';

/**
 * The reliability core against the real Postgres and Kafka: the transactional outbox, its relay
 * (several at once), the idempotent consumer and reply correlation over the replies topic.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('outbox, relay, idempotent consumer, reply correlation', () => {
  const db = new Database(url);
  // The sweep normally waits a few seconds for the direct path; here it may take rows at once.
  const outbox = new OutboxRepository(db, 0);
  const bus = new KafkaBus({ brokers, clientId: `int-${randomUUID().slice(0, 6)}`, logger: quiet });
  const seen: PolicyChangedV1[] = [];

  beforeAll(async () => {
    await bus.connect();
    await bus.ensureTopics();
    await bus.subscribe('policyChanged', { groupId: `int-outbox-${randomUUID()}`, fromBeginning: false }, async (e) => {
      seen.push(e);
    });
  });

  afterAll(async () => {
    await bus.disconnect();
    await db.close();
  });

  it('publishes what committed, exactly the rows that committed, even with three relays at once', async () => {
    const tag = `outbox-${randomUUID()}`;
    const ids = Array.from({ length: 30 }, (_, i) => `${tag}-${i}`);
    for (const id of ids) await db.transaction((tx) => outbox.append(tx, 'policyChanged', id, policyChangedEvent(id)));
    // A rolled-back state change takes its event with it.
    await expect(
      db.transaction(async (tx) => {
        await outbox.append(tx, 'policyChanged', `${tag}-rolled-back`, policyChangedEvent(`${tag}-rolled-back`));
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');

    const relays = [1, 2, 3].map(() => new OutboxRelay(outbox, bus, quiet, { batchSize: 7 }));
    await Promise.all(relays.map((r) => r.drain()));

    const mine = await eventually(() => {
      const got = seen.filter((e) => e.entity_id.startsWith(tag));
      return got.length >= ids.length ? got : undefined;
    });
    await new Promise((r) => setTimeout(r, 300));
    const final = seen.filter((e) => e.entity_id.startsWith(tag));
    expect(new Set(final.map((e) => e.entity_id))).toEqual(new Set(ids));
    expect(final).toHaveLength(ids.length); // SKIP LOCKED: no row went out twice
    expect(mine.some((e) => e.entity_id.endsWith('rolled-back'))).toBe(false);
    // a published row is deleted: nothing of the batch is left waiting
    const left = await db.prisma.outboxMessage.count({ where: { key: { startsWith: tag } } });
    expect(left).toBe(0);
  });

  it('rows are handed to the relay right after their commit (never after a rollback) and deleted once published', async () => {
    const committedRows: string[] = [];
    const direct = new OutboxRepository(db);
    const relay = new OutboxRelay(direct, bus, quiet, { deleteDelayMs: 5 });
    direct.onCommittedAppend((rows) => {
      committedRows.push(...rows.map((r) => r.key));
      relay.publishCommitted(rows);
    });
    const id = `direct-${randomUUID()}`;
    await db.transaction(async (tx) => {
      await direct.append(tx, 'policyChanged', id, policyChangedEvent(id));
      expect(committedRows).not.toContain(id); // not before the commit
    });
    await expect(
      db.transaction(async (tx) => {
        await direct.append(tx, 'policyChanged', `${id}-rolled-back`, policyChangedEvent(`${id}-rolled-back`));
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(committedRows).toEqual([id]);
    await eventually(() => seen.find((e) => e.entity_id === id));
    await eventually(async () => ((await db.prisma.outboxMessage.count({ where: { key: id } })) === 0 ? true : undefined));
    await relay.stop();
    expect(seen.some((e) => e.entity_id === `${id}-rolled-back`)).toBe(false);
  });

  it('a slow delete does not make another relay publish the row again; a failed direct send is swept at once', async () => {
    // Relay A (the writer's process) publishes at once but its deletes take 4 s to land, as on a
    // saturated machine; relay B (another service) sweeps the same table every 100 ms meanwhile.
    const writer = new OutboxRepository(db);
    const slowDeletes: OutboxStore = {
      drainBatch: (limit, publish, retry) => writer.drainBatch(limit, publish, retry),
      deletePublished: async (ids) => {
        await new Promise((r) => setTimeout(r, 4000));
        await writer.deletePublished(ids);
      },
    };
    const a = new OutboxRelay(slowDeletes, bus, quiet, { deleteDelayMs: 5 });
    writer.onCommittedAppend((rows) => a.publishCommitted(rows));
    const b = new OutboxRelay(new OutboxRepository(db), bus, quiet, { sweepIntervalMs: 100, sweepIdleMaxMs: 100 });
    b.start();
    const tag = `slow-delete-${randomUUID()}`;
    const ids = Array.from({ length: 5 }, (_, i) => `${tag}-${i}`);
    try {
      for (const id of ids) await db.transaction((tx) => writer.append(tx, 'policyChanged', id, policyChangedEvent(id)));
      await eventually(
        async () => ((await db.prisma.outboxMessage.count({ where: { key: { startsWith: tag } } })) === 0 ? true : undefined),
        {
          timeoutMs: 20_000,
        },
      );
      // B swept every 100 ms for the 4 s the deletes took, and then some
      await new Promise((r) => setTimeout(r, 1000));
      const mine = seen.filter((e) => e.entity_id.startsWith(tag));
      expect(mine.map((e) => e.entity_id).sort()).toEqual([...ids].sort()); // each once
    } finally {
      await b.stop();
      await a.stop();
    }

    // A direct send that fails: its relay sweeps the row itself at once, without waiting for the lease.
    let down = true;
    const flaky = {
      publishRaw: async (topicName: string, messages: RawMessage[]) => {
        if (down) {
          down = false;
          throw new Error('Connection error: ECONNREFUSED');
        }
        await bus.publishRaw(topicName, messages);
      },
    };
    const c = new OutboxRelay(writer, flaky, quiet, { sweepIntervalMs: 100 });
    const other = new OutboxRepository(db);
    other.onCommittedAppend((rows) => c.publishCommitted(rows));
    c.start();
    const failed = `failed-direct-${randomUUID()}`;
    const started = Date.now();
    try {
      await db.transaction((tx) => other.append(tx, 'policyChanged', failed, policyChangedEvent(failed)));
      await eventually(() => seen.find((e) => e.entity_id === failed), { timeoutMs: 10_000 });
      expect(Date.now() - started).toBeLessThan(10_000); // far below the 30 s lease
    } finally {
      await c.stop();
    }
  });

  it('the periodic sweep delivers rows nobody published', async () => {
    const id = `sweep-${randomUUID()}`;
    await db.transaction((tx) => outbox.append(tx, 'policyChanged', id, policyChangedEvent(id)));
    const relay = new OutboxRelay(outbox, bus, quiet, { sweepIntervalMs: 200 });
    relay.start();
    try {
      await eventually(() => seen.find((e) => e.entity_id === id));
    } finally {
      await relay.stop();
    }
  });

  it('a batch keeps each event whole and in order whatever its text holds (newlines, quotes, backslashes, U+2028, NUL)', async () => {
    // appendMany sends the batch as newline-joined lines: nothing inside a key or payload may split a row.
    const tag = `hostile-${randomUUID()}`;
    const texts = [
      'line 1\nline 2\r\n',
      '"quoted" \\ back\\slash',
      'sep\u2028ara\u2029tors',
      'nul\u0000byte',
      '{"not":"an object"}',
      '🙂 ünïcode',
    ];
    // (a key is text: Postgres text holds no NUL, so the keys carry the rest)
    const events = texts.map((t, i) => ({
      key: `${tag}-${i}\n"k" \\ ${t.replace('\u0000', '')}`,
      payload: { ...policyChangedEvent(`${tag}-${i}`), change: t },
    }));
    await db.transaction((tx) => outbox.appendMany(tx, 'policyChanged', events));
    const rows = await db.prisma.$queryRaw<Array<{ event_id: string; key: string; payload: PolicyChangedV1 }>>`
      SELECT event_id, key, payload FROM outbox_message WHERE key LIKE ${`${tag}-%`} ORDER BY id`;
    expect(rows.map((r) => ({ event_id: r.event_id, key: r.key, payload: r.payload }))).toEqual(
      events.map((e) => ({ event_id: e.payload.event_id, key: e.key, payload: e.payload })),
    );
    // and what the sweep publishes from the stored rows is the same events
    const relay = new OutboxRelay(outbox, bus, quiet, { sweepIntervalMs: 100 });
    relay.start();
    try {
      for (const e of events) {
        const got = await eventually(() => seen.find((s) => s.event_id === e.payload.event_id));
        expect(got).toEqual(e.payload);
      }
    } finally {
      await relay.stop();
    }
  });

  it('an idempotent consumer applies a redelivered event once', async () => {
    const store = new ProcessedEventRepository(db);
    const eventId = randomUUID();
    const key = `idem-${eventId}`;
    const effect = (tx: Parameters<Parameters<typeof handleOnce>[3]>[0]) =>
      outbox.append(tx as never, 'policyChanged', key, policyChangedEvent(key));
    const results = await Promise.all([1, 2, 3].map(() => handleOnce(store, 'int-spec', eventId, effect).catch((e: Error) => e)));
    const applied = results.filter((r) => !(r instanceof Error) && r.duplicate === false);
    expect(applied).toHaveLength(1);
    expect(await db.prisma.outboxMessage.count({ where: { key } })).toBe(1);
    const again = await handleOnce(store, 'int-spec', eventId, effect);
    expect(again.duplicate).toBe(true);
  });

  it('a consumer committing on an interval (a per-instance group) resumes after what it handled when re-created', async () => {
    const group = `int-interval-${randomUUID()}`;
    const tag = `interval-${randomUUID()}`;
    const got: string[] = [];
    const consume = () =>
      bus.subscribe('policyChanged', { groupId: group, fromBeginning: false, commitIntervalMs: 60_000 }, async (e) => {
        if (e.entity_id.startsWith(tag)) got.push(e.entity_id);
      });
    const first = await consume();
    await bus.publish(
      'policyChanged',
      [0, 1, 2].map((i) => ({ key: `${tag}-${i}`, value: policyChangedEvent(`${tag}-${i}`) })),
    );
    await eventually(() => (got.length >= 3 ? true : undefined), { what: 'the first three events' });
    // Long before the interval: stopping commits what was handled.
    await first.stop();
    await bus.publish(
      'policyChanged',
      [3, 4].map((i) => ({ key: `${tag}-${i}`, value: policyChangedEvent(`${tag}-${i}`) })),
    );
    const second = await consume();
    try {
      await eventually(() => (got.length >= 5 ? true : undefined), { what: 'the events published while no consumer ran' });
      await new Promise((r) => setTimeout(r, 300));
      expect([...got].sort()).toEqual([0, 1, 2, 3, 4].map((i) => `${tag}-${i}`));
    } finally {
      await second.stop();
    }
  });

  it('correlates an encrypted reply on the replies topic with its waiter', async () => {
    const cipher = new ContentCipher(Buffer.alloc(32, 7));
    const router = new ReplyRouter();
    const instance = `int-${randomUUID()}`;
    await bus.subscribe('dispatchReplies', { groupId: `int-replies-${instance}`, fromBeginning: false }, async (env) => {
      if (env.reply_to === instance) router.deliver(env.action_id, dispatchReplyV1Schema.parse(cipher.decrypt(env.body, env.action_id)));
    });
    const actionId = randomUUID();
    const now = new Date();
    const waiting = router.awaitReply(actionId, new Date(now.getTime() + 10000), now);
    const reply = responseReply();
    await bus.publish('dispatchReplies', [
      { key: actionId, value: { event_id: randomUUID(), action_id: actionId, reply_to: instance, body: cipher.encrypt(reply, actionId) } },
    ]);
    await expect(waiting).resolves.toEqual(reply);
    expect(Topics.dispatchReplies.contentBearing).toBe(true);
  });
});
