/**
 * `npm run bench:produce`: the Kafka produce path of an action, alone (issue 12, "Kafka produce
 * path" in docs/decisions.md). Against the broker scripts/bench-produce.mjs started for it, drives, at a fixed rate of actions, the publishes one action makes,
 * each service with a bus (producer) of its own as in the stack:
 *   admission   decision (outbox row -> relay) + dispatch command (direct)
 *   dispatch    attempt.completed (outbox row -> relay) + reply (direct)
 *   settlement  usage.settled (outbox row -> relay)
 * Modes, alternated in one run: `single` (every publish its own produce request, as before the
 * coalescer: maxProduceRequestBytes 1) and `coalesced` (the default bus). Prints, per action,
 * produce requests, deletePublished calls, CPU of this process and of the broker (from /proc).
 * Nothing is asserted: compare the modes of one run, not numbers across machines.
 * Knobs: BENCH_PRODUCE_RATE (actions/s, default 300), BENCH_PRODUCE_SECONDS (per round, default
 * 8), BENCH_PRODUCE_ROUNDS (default 2), BENCH_LATENCY_MS (between command and reply, default 20).
 */
import { randomUUID } from 'node:crypto';
import { Topics } from '@gateway/contracts';
import { KafkaBus, OutboxRelay, OutboxRow, OutboxStore } from '@gateway/messaging';
import { cpuMs } from './bench-env';

const num = (name: string, fallback: number) => Number(process.env[name] || fallback);
const RATE = num('BENCH_PRODUCE_RATE', 300);
const SECONDS = num('BENCH_PRODUCE_SECONDS', 8);
const ROUNDS = num('BENCH_PRODUCE_ROUNDS', 2);
const LATENCY_MS = num('BENCH_LATENCY_MS', 20);
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A JSON value of about `bytes` bytes (what the real events weigh; content does not matter here). */
const blob = (bytes: number) => ({ event_id: randomUUID(), pad: 'x'.repeat(bytes) });

type Mode = 'single' | 'coalesced';

/** One service's messaging: its bus, and a relay over an in-memory store that counts its deletes of published rows (`marks`). */
function service(brokers: string, mode: Mode, counts: { requests: number; marks: number }) {
  const bus = new KafkaBus({
    brokers: [brokers],
    clientId: `bench-produce-${mode}`,
    logger: quiet,
    requestCounter: { inc: ({ api }) => (api === 'Produce' ? (counts.requests += 1) : undefined) },
    ...(mode === 'single' ? { maxProduceRequestBytes: 1 } : {}),
  });
  const store: OutboxStore = {
    drainBatch: async () => ({ claimed: 0, published: [], quarantined: [] }),
    deletePublished: async () => {
      counts.marks += 1;
    },
  };
  return { bus, relay: new OutboxRelay(store, bus, quiet) };
}

let nextRowId = 1n;
const row = (topic: string, key: string, bytes: number): OutboxRow => ({ id: nextRowId++, topic, key, payload: blob(bytes) });

async function round(brokers: string, brokerPid: number, mode: Mode, seconds = SECONDS) {
  const counts = { requests: 0, marks: 0 };
  const [admission, dispatch, settlement] = [0, 1, 2].map(() => service(brokers, mode, counts));
  for (const s of [admission, dispatch, settlement]) await s.bus.connect();
  const commandLatencies: number[] = [];
  const action = async () => {
    const id = randomUUID();
    admission.relay.publishCommitted([row(Topics.admissionDecisions.name, id, 500)]);
    const t0 = performance.now();
    await admission.bus.publishRaw(Topics.dispatchCommands.name, [{ key: id, value: JSON.stringify(blob(1500)) }]);
    commandLatencies.push(performance.now() - t0);
    await sleep(LATENCY_MS);
    dispatch.relay.publishCommitted([row(Topics.attemptCompleted.name, id, 800)]);
    await dispatch.bus.publishRaw(Topics.dispatchReplies.name, [{ key: id, value: JSON.stringify(blob(1500)) }]);
    settlement.relay.publishCommitted([row(Topics.usageSettled.name, id, 700)]);
  };

  const cpu0 = process.cpuUsage();
  const broker0 = cpuMs(brokerPid);
  const started = performance.now();
  const actions: Array<Promise<void>> = [];
  const total = RATE * seconds;
  // Open loop: actions start on schedule whether or not earlier ones finished.
  while (actions.length < total) {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * RATE));
    while (actions.length < due) actions.push(action());
    await sleep(5);
  }
  await Promise.all(actions);
  const elapsedS = (performance.now() - started) / 1000;
  for (const s of [admission, dispatch, settlement]) await s.relay.stop();
  const cpu = process.cpuUsage(cpu0);
  const brokerMs = cpuMs(brokerPid) - broker0;
  for (const s of [admission, dispatch, settlement]) await s.bus.disconnect();
  commandLatencies.sort((a, b) => a - b);
  return {
    mode,
    actions: total,
    /** below the offered rate when the produce path cannot keep up */
    achievedPerS: total / elapsedS,
    requestsPerAction: counts.requests / total,
    marksPerAction: counts.marks / total,
    nodeCpuMsPerAction: (cpu.user + cpu.system) / 1000 / total,
    brokerCpuMsPerAction: brokerMs / total,
    commandP50Ms: commandLatencies[Math.floor(total / 2)],
  };
}

async function main() {
  const brokers = process.env.KAFKA_BROKERS;
  const pid = Number(process.env.BENCH_BROKER_PID);
  if (!brokers || !pid) throw new Error('run through `npm run bench:produce` (a broker of its own, whose CPU is measured)');
  const setup = new KafkaBus({ brokers: [brokers], clientId: 'bench-produce-setup', logger: quiet });
  await setup.ensureTopics();
  await setup.disconnect();
  // A short warm-up of each mode (JIT, metadata, broker segments), not reported.
  for (const mode of ['single', 'coalesced'] as const) await round(brokers, pid, mode, 2);
  const metrics = [
    'achievedPerS',
    'requestsPerAction',
    'marksPerAction',
    'nodeCpuMsPerAction',
    'brokerCpuMsPerAction',
    'commandP50Ms',
  ] as const;
  const results: Array<Awaited<ReturnType<typeof round>>> = [];
  for (let i = 0; i < ROUNDS; i++) {
    for (const mode of ['single', 'coalesced'] as const) {
      const r = await round(brokers, pid, mode);
      results.push(r);
      console.log(JSON.stringify(r));
    }
  }
  const mean = (mode: Mode, k: (typeof metrics)[number]) => {
    const rs = results.filter((r) => r.mode === mode);
    return rs.reduce((a, r) => a + r[k], 0) / rs.length;
  };
  console.log(`\n${RATE} actions/s, ${SECONDS} s x ${ROUNDS} rounds per mode (5 publishes per action)`);
  console.log('metric                       single  coalesced  ratio');
  for (const k of metrics) {
    const a = mean('single', k);
    const b = mean('coalesced', k);
    console.log(`${k.padEnd(28)} ${a.toFixed(2).padStart(6)} ${b.toFixed(2).padStart(10)} ${(b / a).toFixed(2).padStart(6)}`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
