// The floor under the gateway's added latency at a fixed rate (bench/README.md, "Path floor"):
// on the bench's own broker and Postgres, with the stack running but no load, the two kinds of
// hop an action waits for in sequence, each paced at the phase's rate so that every message
// finds its peers asleep as the real load does:
//
//   Kafka:    a produce (idempotent, acks all, as the services send) and its consumption by a
//             consumer that waits on the broker for the next record (minBytes 1, as the services);
//   Postgres: a one-row insert in its own transaction, committed (the WAL flush of a commit).
//
// The gateway's path has two Kafka hops (dispatch command, reply) and three commits in sequence
// (admission's reservation, dispatch's claim, the attempt's evidence) beside the HTTP hop to the
// provider that the direct call also makes.
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { round } from './machine.mjs';

const TOPIC = 'bench.path-floor';

/** Both probes at `rate` per second for `seconds` each: p50/p99 ms of each hop. */
export async function measurePathFloor({ brokers, pgUrl, rate, seconds }) {
  const n = Math.max(20, Math.round(rate * seconds));
  const gapMs = 1000 / rate;
  return { rate, n, kafka: await kafkaHop(brokers, n, gapMs), postgres: await pgCommit(pgUrl, n, gapMs) };
}

async function kafkaHop(brokers, n, gapMs) {
  const kafka = new Kafka({ clientId: 'bench-path-floor', brokers: brokers.split(','), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: TOPIC, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  const consumer = kafka.consumer({ groupId: `bench-path-floor-${process.pid}`, maxWaitTimeInMs: 1000, minBytes: 1 });
  await Promise.all([producer.connect(), consumer.connect()]);
  try {
    await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
    const sentAt = new Map();
    const hop = [];
    let joined;
    const ready = new Promise((resolve) => (joined = resolve));
    let last;
    const allSeen = new Promise((resolve) => (last = resolve));
    consumer.on(consumer.events.GROUP_JOIN, () => joined());
    await consumer.run({
      eachMessage: async ({ message }) => {
        const t = sentAt.get(message.key.toString());
        if (t === undefined) return;
        hop.push(msSince(t));
        if (hop.length === n) last();
      },
    });
    // a broker that never assigns the partition must not hang the bench: the probe is skipped
    await within(ready, 30_000, 'the probe consumer did not join its group in 30 s');
    // the first records after a join wait for the fetch loop to start: not measured
    for (let i = 0; i < 5; i++) await producer.send({ topic: TOPIC, acks: -1, messages: [{ key: `warm-${i}`, value: 'x' }] });
    await sleep(500);
    const acks = [];
    for (let i = 0; i < n; i++) {
      const key = String(i);
      const t = process.hrtime.bigint();
      sentAt.set(key, t);
      await producer.send({ topic: TOPIC, acks: -1, messages: [{ key, value: 'x'.repeat(200) }] });
      acks.push(msSince(t));
      await sleep(Math.max(0, gapMs - msSince(t)));
    }
    await Promise.race([allSeen, sleep(5000)]);
    if (hop.length < n) throw new Error(`the probe consumer saw ${hop.length} of ${n} records within 5 s of the last send`);
    return { produceToConsume: percentiles(hop), produceAck: percentiles(acks), consumed: hop.length };
  } finally {
    await Promise.allSettled([consumer.disconnect(), producer.disconnect()]);
  }
}

async function pgCommit(url, n, gapMs) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CREATE TABLE IF NOT EXISTS bench_path_floor (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())');
    const insert = { name: 'bench_path_floor_insert', text: 'INSERT INTO bench_path_floor DEFAULT VALUES' };
    for (let i = 0; i < 5; i++) await client.query(insert);
    const ms = [];
    for (let i = 0; i < n; i++) {
      const t = process.hrtime.bigint();
      await client.query(insert);
      ms.push(msSince(t));
      await sleep(Math.max(0, gapMs - msSince(t)));
    }
    await client.query('DROP TABLE bench_path_floor');
    return { commit: percentiles(ms) };
  } finally {
    await client.end();
  }
}

/** The floor table and the sum the path waits for in sequence (null parts are skipped). */
export function reportPathFloor(floor, addedP50Ms, table) {
  if (!floor) return;
  const { kafka, postgres } = floor;
  console.log(
    `\nPath floor on the quiet stack (the bench's broker and Postgres, ${floor.rate} messages/s, ${floor.n} each, before the phases)`,
  );
  console.log(
    table(
      [
        ['hop', 'p50 ms', 'p99 ms'],
        ['Kafka produce → consumed (acks all, consumer waiting on the broker)', kafka.produceToConsume.p50, kafka.produceToConsume.p99],
        ['Kafka produce acknowledged', kafka.produceAck.p50, kafka.produceAck.p99],
        ['Postgres one-row insert committed (round trip)', postgres.commit.p50, postgres.commit.p99],
      ],
      1,
    ),
  );
  const sum = round(2 * kafka.produceToConsume.p50 + 3 * postgres.commit.p50, 1);
  console.log(
    `the gateway's path waits for 2 Kafka hops and 3 commits in sequence: ${sum} ms at p50` +
      (addedP50Ms == null
        ? ''
        : ` of the +${addedP50Ms} ms added p50 at ${floor.rate} req/s (the rest: the services' own work, and waiting for a CPU)`),
  );
}

function percentiles(ms) {
  if (ms.length === 0) return { p50: null, p99: null };
  const s = [...ms].sort((a, b) => a - b);
  const at = (p) => round(s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)], 2);
  return { p50: at(0.5), p99: at(0.99) };
}

/** `promise`, or an error once `ms` have passed (the timer is cleared either way). */
async function within(promise, ms, message) {
  let timer;
  try {
    return await Promise.race([promise, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

const msSince = (t) => Number(process.hrtime.bigint() - t) / 1e6;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
