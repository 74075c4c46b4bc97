/**
 * Issue 12 (Kafka produce path): publishes issued together share produce requests, against the
 * real broker. Nothing is lost or reordered per key, a message the broker refuses inside a
 * shared request is answered alone while the others arrive (and the producer's idempotent
 * sequences stay sound afterwards), and a broker restart mid-stream loses nothing. Replies are
 * the topic used: six partitions, keyed by action, the hottest produce path of an action.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DispatchReplyEnvelopeV1, Topics } from '@gateway/contracts';
import { eventually } from '@gateway/testing';
import { KafkaBus, PermanentPublishError } from '@gateway/messaging';
import { freeBrokerPort, OwnBroker, startOwnBroker } from './kafka-broker';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sharedBrokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');

/** A reply envelope whose (unencrypted, schema-valid) body carries the per-key sequence number. */
function reply(key: string, seq: number | 'end', pad = ''): { key: string; value: DispatchReplyEnvelopeV1 } {
  return {
    key,
    value: {
      event_id: randomUUID(),
      action_id: key,
      reply_to: 'coalescing',
      body: { alg: 'A256GCM', kid: 'k', iv: '', tag: String(seq), ct: pad },
    },
  };
}

/** Sequence numbers seen per key, in arrival order; `ended(keys)` once every key's end marker arrived. */
function recorder(tag: string) {
  const byKey = new Map<string, Array<number | 'end'>>();
  return {
    byKey,
    handle: async (e: DispatchReplyEnvelopeV1) => {
      if (!e.action_id.startsWith(tag)) return;
      const seq = e.body.tag === 'end' ? 'end' : Number(e.body.tag);
      byKey.set(e.action_id, [...(byKey.get(e.action_id) ?? []), seq]);
    },
    ended: (keys: string[]) => (keys.every((k) => byKey.get(k)?.includes('end')) ? true : undefined),
  };
}

/** What arrived before the key's end marker (the marker follows every publish of its key, on the same partition). */
const beforeEnd = (seqs: Array<number | 'end'> | undefined) => (seqs ?? []).slice(0, (seqs ?? []).indexOf('end'));
const firstOccurrences = (seqs: Array<number | 'end'>) => [...new Set(seqs)];

describe('coalesced produce requests on the shared broker', () => {
  const requests = { n: 0, inc: () => (requests.n += 1) };
  // Large enough that a message over the topic's limit can share a request with small ones.
  const bus = new KafkaBus({
    brokers: sharedBrokers,
    clientId: `coalesce-${randomUUID().slice(0, 6)}`,
    logger: quiet,
    requestCounter: { inc: ({ api }) => (api === 'Produce' ? requests.inc() : undefined) },
    maxProduceRequestBytes: 8 * 1024 * 1024,
  });
  const tag = `co-${randomUUID().slice(0, 8)}`;
  const seen = recorder(tag);

  beforeAll(async () => {
    await bus.connect();
    await bus.ensureTopics();
    // From the beginning (filtered by tag): no race with the resolution of "latest" offsets.
    await bus.subscribe('dispatchReplies', { groupId: `coalesce-${randomUUID()}`, fromBeginning: true }, seen.handle);
  });

  afterAll(async () => {
    await bus.disconnect();
  });

  it('200 concurrent publishes go out in a few produce requests, each message once and in order per key', async () => {
    const keys = Array.from({ length: 20 }, (_, i) => `${tag}-order-${i}`);
    const before = requests.n;
    const publishes: Array<Promise<void>> = [];
    for (let seq = 0; seq < 10; seq++) for (const key of keys) publishes.push(bus.publish('dispatchReplies', [reply(key, seq)]));
    await Promise.all(publishes);
    const used = requests.n - before;
    expect(used).toBeGreaterThan(0);
    expect(used).toBeLessThanOrEqual(publishes.length / 20);

    await Promise.all(keys.map((key) => bus.publish('dispatchReplies', [reply(key, 'end')])));
    await eventually(() => seen.ended(keys), { timeoutMs: 30_000, what: 'every key to reach its end marker' });
    for (const key of keys) expect(beforeEnd(seen.byKey.get(key))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('a message the broker refuses inside a shared request fails alone; the rest arrive, and later publishes too', async () => {
    const limit = await bus.maxMessageBytes(Topics.dispatchReplies.name);
    const keys = Array.from({ length: 30 }, (_, i) => `${tag}-refuse-${i}`);
    const big = reply(`${tag}-big`, 0, 'x'.repeat(limit + 1024));
    const before = requests.n;
    const round1 = keys.map((key) => bus.publish('dispatchReplies', [reply(key, 0)]));
    const refused = bus.publish('dispatchReplies', [big]);
    const round1b = keys.map((key) => bus.publish('dispatchReplies', [reply(key, 1)]));

    await expect(refused).rejects.toBeInstanceOf(PermanentPublishError);
    await expect(refused).rejects.toMatchObject({ refusal: 'MESSAGE_TOO_LARGE' });
    await expect(Promise.all([...round1, ...round1b])).resolves.toBeDefined();
    // one shared request, refused as a whole, then each of the 61 callers alone
    expect(requests.n - before).toBeGreaterThan(61);

    // The broker appended the other partitions' batches of the refused request; a producer that
    // reused their sequence numbers would now see its sends dropped or refused as out of order.
    await Promise.all(keys.map((key) => bus.publish('dispatchReplies', [reply(key, 2)])));
    await Promise.all(keys.map((key) => bus.publish('dispatchReplies', [reply(key, 'end')])));
    await eventually(() => seen.ended(keys), { timeoutMs: 30_000, what: 'every key to reach its end marker' });
    for (const key of keys) {
      const got = beforeEnd(seen.byKey.get(key));
      // at least once: the shared request may have been appended in part before its refusal
      expect(firstOccurrences(got)).toEqual([0, 1, 2]);
    }
    expect(seen.byKey.has(big.key)).toBe(false);
  });
});

describe('coalesced produce requests across a broker restart', () => {
  const DATA_DIR = path.resolve(__dirname, `../../../.local/kafka/coalesce-${process.pid}-${randomUUID().slice(0, 8)}`);
  let broker: OwnBroker | undefined;
  let bus: KafkaBus | undefined;
  let reader: KafkaBus | undefined;

  afterAll(async () => {
    await reader?.disconnect();
    await bus?.disconnect();
    await broker?.stop();
    fs.rmSync(DATA_DIR, { recursive: true, force: true });
  });

  it('a stream published while the broker stops and comes back loses nothing (failed publishes retried, as the outbox sweep does)', async () => {
    const port = await freeBrokerPort(Number(process.env.KAFKA_PORT ?? 9092) + 240);
    broker = await startOwnBroker({ port, dataDir: DATA_DIR, fresh: true });
    const brokers = [broker.brokers];
    bus = new KafkaBus({
      brokers,
      clientId: 'coalesce-restart',
      logger: quiet,
      retry: { initialRetryTime: 100, retries: 2, maxRetryTime: 500 },
    });
    await bus.connect();
    await bus.ensureTopics();
    const tag = `rs-${randomUUID().slice(0, 8)}`;
    const keys = Array.from({ length: 10 }, (_, i) => `${tag}-${i}`);
    const live = bus;
    let failed = 0;
    /** One burst: a message per key, concurrently; what fails is published again until it goes out. */
    const burst = async (seq: number | 'end') => {
      let pending = keys;
      while (pending.length > 0) {
        const results = await Promise.allSettled(pending.map((key) => live.publish('dispatchReplies', [reply(key, seq)])));
        pending = pending.filter((_, i) => results[i].status === 'rejected');
        failed += pending.length;
        if (pending.length > 0) await new Promise((r) => setTimeout(r, 200));
      }
    };
    // Bursts go on while the broker stops and starts again, and for five more once it is back.
    let back: number | undefined;
    let seq = 0;
    for (; back === undefined || seq < back + 5; seq++) {
      if (seq === 10) {
        const old = broker;
        void old.stop().then(async () => {
          broker = await startOwnBroker({ port, dataDir: DATA_DIR, fresh: false });
          back = seq;
        });
      }
      await burst(seq);
    }
    await burst('end');
    expect(failed).toBeGreaterThan(0); // the broker was really gone mid-stream

    reader = new KafkaBus({ brokers, clientId: 'coalesce-restart-reader', logger: quiet });
    const seen = recorder(tag);
    await reader.subscribe('dispatchReplies', { groupId: `coalesce-read-${randomUUID()}`, fromBeginning: true }, seen.handle);
    await eventually(() => seen.ended(keys), { timeoutMs: 60_000, what: 'every key to reach its end marker' });
    const all = Array.from({ length: seq }, (_, i) => i);
    for (const key of keys) {
      const got = beforeEnd(seen.byKey.get(key));
      expect(firstOccurrences(got)).toEqual(all);
    }
  }, 240_000);
});
