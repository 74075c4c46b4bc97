#!/usr/bin/env node
// `npm run bench:produce` (and `bench:replies`): starts a Kafka broker of its own
// (BENCH_KAFKA_PORT, default BENCH_PORT_BASE + 92, fresh data dir) and runs a Kafka bench against
// it (the argument; default bench/produce-path.ts), with the broker's pid so the bench can read
// its CPU. See that file for what it measures.
import path from 'node:path';
import { startKafka } from './kafka.mjs';
import { ROOT } from './services.mjs';
import { spawn } from 'node:child_process';

const port = Number(process.env.BENCH_KAFKA_PORT || Number(process.env.BENCH_PORT_BASE || 14000) + 92);
const env = { ...process.env };
delete process.env.KAFKA_BROKERS; // a broker of its own: its CPU is this bench's alone
const kafka = await startKafka({ port, dataDir: path.join(ROOT, '.local/kafka', `bench-produce-${port}`), fresh: true });
let code = 1;
try {
  const bench = process.argv[2] ?? 'bench/produce-path.ts';
  const child = spawn(process.execPath, ['-r', '@swc-node/register', bench], {
    cwd: ROOT,
    env: { ...env, KAFKA_BROKERS: kafka.brokers, BENCH_BROKER_PID: String(kafka.pid) },
    stdio: 'inherit',
  });
  code = await new Promise((resolve) => child.once('exit', (c) => resolve(c ?? 1)));
} finally {
  await kafka.stop();
}
process.exit(code);
