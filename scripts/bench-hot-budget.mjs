#!/usr/bin/env node
// `npm run bench:hot-budget`: many concurrent admissions against one workload budget row, through
// AdmissionRepository directly (bench/hot-budget.ts; see bench/README.md, "One hot budget").
// `npm run bench:withdrawal` runs bench/withdrawal.ts the same way (the argument: a bench that
// needs only a migrated database).
// Its own database (BENCH_DB + "_hot", default gateway_bench_hot), dropped, recreated and migrated.
// No Kafka, no services. Not a test: nothing asserts a speed.
import { spawn } from 'node:child_process';
import { ensurePostgres, recreateDatabase, withDatabase } from './postgres.mjs';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { ROOT, runTs } from './services.mjs';

const log = (msg) => console.log(`[hot-budget] ${msg}`);
const database = `${process.env.BENCH_DB || 'gateway_bench'}_hot`;

async function main() {
  await ensurePrismaClient({ quiet: true });
  if (process.env.DATABASE_URL) process.env.DATABASE_URL = withDatabase(process.env.DATABASE_URL, database);
  const pg = await ensurePostgres({ database, log });
  try {
    await recreateDatabase(pg.url);
    const env = { ...process.env, DATABASE_URL: pg.url };
    log(`migrating ${database}`);
    await runTs('libs/db/src/migrations/migrate.cli.ts', env);
    const code = await new Promise((resolve) => {
      const child = spawn(process.execPath, ['-r', '@swc-node/register', process.argv[2] ?? 'bench/hot-budget.ts'], {
        cwd: ROOT,
        env,
        stdio: 'inherit',
      });
      child.on('exit', (c) => resolve(c ?? 1));
    });
    process.exitCode = code;
  } finally {
    await pg.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
