#!/usr/bin/env node
// End-to-end check that kafkajs works against the broker scripts/kafka.mjs
// runs, and a produce -> consume latency measurement.
//
//   node scripts/kafka-smoke.mjs              recommended client settings
//   node scripts/kafka-smoke.mjs --defaults   kafkajs default settings, to compare
//
// Steps: start broker; create a 3-partition topic; produce 100 keyed messages
// with an idempotent producer (acks=-1); consume them all in a consumer group
// from the beginning, committing offsets; restart the consumer and check that
// nothing is delivered again; measure 200 sequential round trips; stop.
// Exits non-zero on any failure.

import { performance } from 'node:perf_hooks';
import kafkajs from 'kafkajs';
import { startKafka } from './kafka.mjs';

const { Kafka, Partitioners, logLevel } = kafkajs;
const useDefaults = process.argv.includes('--defaults');

// Client settings for a single local broker where latency matters more than
// throughput. See the comments on each setting; kafkajs defaults in brackets.
const RECOMMENDED = {
  client: {
    connectionTimeout: 3000, // [1000]
    requestTimeout: 30000, // [30000]
    // Retry fast at first: locally a failed request is usually a coordinator
    // still loading (e.g. __consumer_offsets right after start), gone in ms.
    retry: { initialRetryTime: 50, maxRetryTime: 2000, retries: 10 }, // [300, 30000, 5]
  },
  producer: {
    idempotent: true,
    maxInFlightRequests: 1, // idempotence in kafkajs is only safe with 1 in flight
    // kafkajs wants unbounded retries for an idempotent producer (it warns
    // otherwise); bound send() with your own timeout where that matters.
    retry: { retries: Number.MAX_SAFE_INTEGER },
    // The Java client's murmur2 partitioning (same key -> same partition as
    // any other client); also silences the v2 partitioner warning.
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
  },
  consumer: {
    // The broker answers a fetch as soon as minBytes are there, so a short
    // maxWait does not buy latency; it bounds how long the fetch loop is
    // blind to rebalances, heartbeats and disconnect() (each waits for the
    // in-flight fetch), and how often an idle consumer asks: 1000 keeps
    // an idle stack cheap (issue 12). [5000]
    maxWaitTimeInMs: 1000,
    minBytes: 1, // [1] answer with the first byte
    heartbeatInterval: 2000, // [3000] rebalances are noticed on the next heartbeat
    sessionTimeout: 6000, // [30000] 6000 = the broker default group.min.session.timeout.ms
    rebalanceTimeout: 10000, // [60000] how long a join waits for slow members
    allowAutoTopicCreation: false,
  },
};

const log = (msg) => console.error(`[smoke] ${msg}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function assert(cond, msg) {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

async function waitFor(cond, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main() {
  const t0 = performance.now();
  const kafkaProc = await startKafka({ log });
  log(`broker at ${kafkaProc.brokers} after ${Math.round(performance.now() - t0)} ms`);

  const settings = useDefaults
    ? {
        client: {},
        producer: { idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner },
        consumer: {},
      }
    : RECOMMENDED;
  log(`client settings: ${useDefaults ? 'kafkajs defaults' : 'recommended'}`);

  const kafka = new Kafka({
    clientId: 'kafka-smoke',
    brokers: kafkaProc.brokers.split(','),
    logLevel: logLevel.WARN,
    ...settings.client,
  });
  const admin = kafka.admin();
  const run = `${Date.now()}`;
  const topic = `smoke-${run}`;
  const latencyTopic = `smoke-latency-${run}`;
  const consumers = [];
  let producer;

  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    log(`cluster ${cluster.clusterId}, controller ${cluster.controller}, brokers ${cluster.brokers.length}`);

    await admin.createTopics({
      waitForLeaders: true,
      topics: [
        { topic, numPartitions: 3, replicationFactor: 1 },
        { topic: latencyTopic, numPartitions: 1, replicationFactor: 1 },
      ],
    });
    const meta = await admin.fetchTopicMetadata({ topics: [topic] });
    assert(meta.topics[0].partitions.length === 3, 'topic has 3 partitions');
    log(`created ${topic} (3 partitions)`);

    // ---- produce 100 keyed messages, idempotent, acks=-1
    producer = kafka.producer(settings.producer);
    await producer.connect();
    const sent = new Map(); // key -> partition
    for (let batch = 0; batch < 10; batch++) {
      const messages = Array.from({ length: 10 }, (_, i) => {
        const n = batch * 10 + i;
        return { key: `key-${n}`, value: JSON.stringify({ n }) };
      });
      const res = await producer.send({ topic, acks: -1, messages });
      for (const r of res) assert(r.errorCode === 0, `produce error ${r.errorCode}`);
      // kafkajs hashes keys (murmur2, like the Java client) to pick partitions.
      for (const m of messages) sent.set(m.key, null);
    }
    const offsets = await admin.fetchTopicOffsets(topic);
    const total = offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
    assert(total === 100, `100 messages in the topic (got ${total})`);
    log(`produced 100 messages; per partition: ${offsets.map((p) => `${p.partition}:${p.high}`).join(' ')}`);

    // ---- consume them all in a group, committing as we go
    const groupId = `smoke-group-${run}`;
    const received = [];
    const startConsumer = async (onMessage) => {
      const consumer = kafka.consumer({ groupId, ...settings.consumer });
      consumers.push(consumer);
      let joined = false;
      consumer.on(consumer.events.GROUP_JOIN, () => (joined = true));
      await consumer.connect();
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachMessage: async ({ topic: t, partition, message }) => {
          onMessage({ partition, key: message.key.toString(), offset: Number(message.offset) });
          // Commit the next offset to read, as the Java client does.
          await consumer.commitOffsets([{ topic: t, partition, offset: String(Number(message.offset) + 1) }]);
        },
      });
      return { consumer, joined: () => joined };
    };

    const c1Start = performance.now();
    const c1 = await startConsumer((m) => received.push(m));
    await waitFor(() => received.length >= 100, 30000, '100 messages');
    log(`consumed 100 messages in ${Math.round(performance.now() - c1Start)} ms (incl. group join)`);
    const keys = new Set(received.map((m) => m.key));
    assert(keys.size === 100 && [...sent.keys()].every((k) => keys.has(k)), 'every key received exactly once');
    for (const key of keys) {
      const parts = new Set(received.filter((m) => m.key === key).map((m) => m.partition));
      assert(parts.size === 1, `key ${key} stays on one partition`);
    }
    assert(new Set(received.map((m) => m.partition)).size === 3, 'keys spread over all 3 partitions');

    const committed = await admin.fetchOffsets({ groupId, topics: [topic] });
    const committedTotal = committed[0].partitions.reduce((sum, p) => sum + Number(p.offset), 0);
    assert(committedTotal === 100, `committed offsets add up to 100 (got ${committedTotal})`);
    const d0 = performance.now();
    await c1.consumer.disconnect();
    log(`offsets committed; consumer disconnected in ${Math.round(performance.now() - d0)} ms`);

    // ---- restart: nothing must come again, but new messages must
    const redelivered = [];
    const c2Start = performance.now();
    const c2 = await startConsumer((m) => redelivered.push(m));
    await waitFor(c2.joined, 30000, 'restarted consumer to join');
    log(`restarted consumer joined in ${Math.round(performance.now() - c2Start)} ms`);
    await sleep(2000);
    assert(redelivered.length === 0, `no redelivery after restart (got ${redelivered.length})`);
    await producer.send({ topic, acks: -1, messages: [{ key: 'after-restart', value: 'x' }] });
    await waitFor(() => redelivered.length === 1, 10000, 'the message produced after the restart');
    assert(redelivered[0].key === 'after-restart', 'only the new message arrives');
    log('restarted consumer got nothing old and the one new message');
    await c2.consumer.disconnect();

    // ---- latency: 200 sequential produce -> consume round trips
    const latConsumer = kafka.consumer({ groupId: `smoke-latency-${run}`, ...settings.consumer });
    consumers.push(latConsumer);
    let joined = false;
    latConsumer.on(latConsumer.events.GROUP_JOIN, () => (joined = true));
    const arrived = new Map(); // key -> performance.now()
    await latConsumer.connect();
    await latConsumer.subscribe({ topics: [latencyTopic], fromBeginning: false });
    await latConsumer.run({
      eachMessage: async ({ message }) => arrived.set(message.key.toString(), performance.now()),
    });
    await waitFor(() => joined, 30000, 'latency consumer to join');
    // With fromBeginning=false a new group starts at the end of the log, and
    // it only knows where that is after its first fetch: warm up until a
    // message makes it through.
    for (let i = 0; arrived.size === 0; i++) {
      if (i === 200) throw new Error('latency consumer never received a warm-up message');
      await producer.send({ topic: latencyTopic, acks: -1, messages: [{ key: `warmup-${i}`, value: 'w' }] });
      await sleep(50);
    }
    await sleep(200);

    const roundTrips = [];
    const acks = [];
    for (let i = 0; i < 200; i++) {
      const key = `lat-${i}`;
      const start = performance.now();
      await producer.send({ topic: latencyTopic, acks: -1, messages: [{ key, value: String(start) }] });
      acks.push(performance.now() - start);
      await waitFor(() => arrived.has(key), 10000, `message ${key}`);
      roundTrips.push(arrived.get(key) - start);
    }
    const fmt = (xs) => {
      const s = [...xs].sort((a, b) => a - b);
      return `p50 ${percentile(s, 50).toFixed(1)} ms, p99 ${percentile(s, 99).toFixed(1)} ms, max ${s.at(-1).toFixed(1)} ms`;
    };
    log(`produce ack (acks=-1), 200 sequential: ${fmt(acks)}`);
    log(`produce -> consume, 200 sequential:  ${fmt(roundTrips)}`);
    const d1 = performance.now();
    await latConsumer.disconnect();
    log(`latency consumer disconnected in ${Math.round(performance.now() - d1)} ms`);

    await admin.deleteTopics({ topics: [topic, latencyTopic] });
    log('PASS');
  } finally {
    for (const c of consumers) await c.disconnect().catch(() => {});
    await producer?.disconnect().catch(() => {});
    await admin.disconnect().catch(() => {});
    const s0 = performance.now();
    await kafkaProc.stop();
    log(`broker stopped in ${Math.round(performance.now() - s0)} ms`);
  }
}

main().catch((err) => {
  console.error(`[smoke] FAIL: ${err.stack ?? err}`);
  process.exit(1);
});
