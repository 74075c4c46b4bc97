#!/usr/bin/env node
// `npm run bench:settlement`: settlement throughput from a pre-filled topic, batched against one
// event at a time (bench/settlement.ts; see bench/README.md, "Settlement").
// Its own database (BENCH_DB + "_settlement", recreated) and broker (BENCH_PORT_BASE + 93).
// `--profile` runs bench/settlement-profile.ts instead: where a batch's time goes, in-process.
// The instance under test is started as `npm start` starts it (scripts/services.mjs
// `serviceCommand`: the compiled tree and SERVICE_NODE_FLAGS, or GATEWAY_RUN_TS=1 / GATEWAY_NODE_FLAGS
// as there), handed to bench/settlement.ts in BENCH_SETTLE_INSTANCE.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { ROOT, SERVICES, serviceBuild, serviceCommand, startOwnInfra, withStops } from './services.mjs';

const log = (msg) => console.log(`[bench:settlement] ${msg}`);
const portBase = Number(process.env.BENCH_PORT_BASE || 14000);
const database = `${process.env.BENCH_DB || 'gateway_bench'}_settlement`;

await withStops(async (stops) => {
  await ensurePrismaClient({ quiet: true });
  delete process.env.KAFKA_BROKERS;
  // Its database is dropped: a DATABASE_URL only lends its server, never its database.
  if (process.env.DATABASE_URL) {
    const u = new URL(process.env.DATABASE_URL);
    u.pathname = `/${database}`;
    process.env.DATABASE_URL = u.toString();
  }
  const { env, kafka } = await startOwnInfra({
    name: 'bench-settlement',
    database,
    kafkaPort: portBase + 93,
    portBase,
    stops,
    log,
  });
  const settlement = SERVICES.find((s) => s.name === 'settlement');
  const instance = serviceCommand(settlement, await serviceBuild({ log }));
  process.exitCode = await new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['-r', '@swc-node/register', path.join('bench', process.argv.includes('--profile') ? 'settlement-profile.ts' : 'settlement.ts')],
      {
        cwd: ROOT,
        env: {
          ...env,
          SWC_NODE_PROJECT: path.join(ROOT, 'tsconfig.json'),
          BENCH_SETTLE_INSTANCE: JSON.stringify(instance),
          ...(kafka.pid ? { BENCH_BROKER_PID: String(kafka.pid) } : {}),
        },
        stdio: 'inherit',
      },
    );
    child.on('exit', (c) => resolve(c ?? 1));
  });
});
