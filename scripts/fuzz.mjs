#!/usr/bin/env node
// `npm run fuzz`: the hostile-input suite in full (issue 8 "Must hold") against a stack of its own
// (own database, broker and ports; loopback only; bounded; stops by itself).
//
// Sends N seeded fast-check-generated bad requests (default 10,000) to admission, policy,
// settlement and reconciliation (generators and judge: e2e/hostile-input.ts), then checks:
//   - no answer ≥ 500, no connection reset, every 4xx with a stable code of the error registry
//   - every service healthy afterwards
//   - a phase of unauthenticated requests only writes no row in any table
// It prints a table (category × status) and closes with `fuzz: N passed, M failed`; exit code 1 on
// any failure. `npm test` runs a 300-request version (e2e/hostile-input.e2e-spec.ts).
//
//   node scripts/fuzz.mjs [--count=N] [--seed=N] [--concurrency=N]
import pg from 'pg';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { numberArg, scriptArgs, startOwnInfra, startServices, tsRequire, withStops } from './services.mjs';

const args = scriptArgs();
const COUNT = numberArg(args, 'count', 10_000, 1);
const SEED = numberArg(args, 'seed', 1);
const CONCURRENCY = numberArg(args, 'concurrency', 8, 1);
const UNAUTHENTICATED = Math.max(100, Math.floor(COUNT / 10));
const PORT_BASE = Number(process.env.FUZZ_PORT_BASE ?? 24000);
const KAFKA_PORT = Number(process.env.FUZZ_KAFKA_PORT ?? 24092);

const require = tsRequire();
const hostile = require('../e2e/hostile-input.ts');
const { Database } = require('@gateway/db');
const { Seeder } = require('@gateway/testing');

const t0 = Date.now();
const log = (msg) => console.log(`[fuzz ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${msg}`);

async function main() {
  await ensurePrismaClient({ quiet: true });
  return withStops(run);
}

async function run(stops) {
  const { pgServer, kafka, logDir, env } = await startOwnInfra({
    name: 'fuzz',
    database: process.env.FUZZ_DB ?? 'gateway_fuzz',
    kafkaPort: KAFKA_PORT,
    portBase: PORT_BASE,
    extraEnv: { LOG_LEVEL: 'warn' },
    stops,
    log,
  });
  stops.push(() => kafka.stop());
  const url = (offset) => `http://127.0.0.1:${PORT_BASE + offset}`;
  const db = new Database(pgServer.url);
  let creds;
  try {
    creds = await hostile.seedHostile(new Seeder(db), url(10), 'fuzz');
  } finally {
    await db.close();
  }
  log('starting services');
  const services = await startServices({ env, logDir, stops });
  const targets = { admission: url(0), policy: url(1), settlement: url(3), reconciliation: url(4) };
  const failures = [];

  // ------------------------------------------------------------ every kind of bad request
  log(`sending ${COUNT} generated bad requests (seed ${SEED}, ${CONCURRENCY} in flight)`);
  const cases = hostile.sample(hostile.hostileRequests(creds, targets), COUNT, SEED);
  const step = Math.max(1, Math.floor(COUNT / 10));
  const report = await hostile.sendHostile(targets, cases, {
    concurrency: CONCURRENCY,
    sources: 500,
    onProgress: (n) => n % step === 0 && log(`${n}/${COUNT}`),
  });
  for (const f of report.failures) failures.push(`${f.why}: ${JSON.stringify(f.hostileCase).slice(0, 400)}`);

  // ------------------------------------------------------------ unauthenticated: no row anywhere
  const pool = new pg.Pool({ connectionString: pgServer.url, max: 2 });
  stops.push(() => pool.end());
  const before = await quietRowCounts(pool);
  log(`sending ${UNAUTHENTICATED} unauthenticated bad requests; row counts before: ${summary(before)}`);
  const unauth = hostile.sample(hostile.unauthenticatedRequests(creds, targets), UNAUTHENTICATED, SEED + 1);
  const unauthReport = await hostile.sendHostile(targets, unauth, { concurrency: CONCURRENCY, sources: 200 });
  for (const f of unauthReport.failures) failures.push(`${f.why}: ${JSON.stringify(f.hostileCase).slice(0, 400)}`);
  const after = await rowCounts(pool);
  for (const [table, n] of Object.entries(after)) {
    if (n !== before[table]) failures.push(`unauthenticated requests changed ${table}: ${before[table]} → ${n} rows`);
  }

  // ------------------------------------------------------------ every service healthy
  const health = {};
  for (const [name, base] of Object.entries(targets)) {
    health[name] = await fetch(`${base}/health`, { signal: AbortSignal.timeout(5000) })
      .then((r) => r.status)
      .catch((err) => err.cause?.code ?? err.name);
    if (health[name] !== 200) failures.push(`${name} is not healthy afterwards (${health[name]})`);
  }
  const exited = services.children.filter((c) => c.exited).map((c) => c.service.name);
  if (exited.length > 0) failures.push(`services exited: ${exited.join(', ')}`);

  // ------------------------------------------------------------ report
  const statuses = new Map();
  for (const [k, v] of report.table) {
    const status = k.split(' ').pop();
    statuses.set(status, (statuses.get(status) ?? 0) + v);
  }
  const table = [
    ['requests', `${report.sent} generated (seed ${SEED}) + ${unauthReport.sent} unauthenticated`],
    [
      'by status',
      [...statuses.entries()]
        .sort()
        .map(([s, n]) => `${s}: ${n}`)
        .join(', '),
    ],
    ['rows written by the unauthenticated', Object.keys(after).some((t) => after[t] !== before[t]) ? 'SOME' : 'none'],
    [
      'health afterwards',
      Object.entries(health)
        .map(([k, v]) => `${k} ${v}`)
        .join(', '),
    ],
    ['failures', failures.length === 0 ? 'none' : String(failures.length)],
  ];
  const width = Math.max(...table.map(([k]) => k.length));
  console.log(`\n${hostile.reportTable(report)}\n`);
  console.log(table.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n'));
  for (const f of failures.slice(0, 20)) console.log(`FAILED ${f}`);
  const passed = report.sent + unauthReport.sent - report.failures.length - unauthReport.failures.length;
  console.log(`\nfuzz: ${passed} passed, ${failures.length} failed`);
  return failures.length === 0 ? 0 : 1;
}

/** Row counts once the stack has finished the work of the first phase (settlement, sweeps): two equal snapshots 2 s apart. */
async function quietRowCounts(pool) {
  let last = await rowCounts(pool);
  for (let i = 0; i < 30; i++) {
    await new Promise((r) => setTimeout(r, 2000));
    const now = await rowCounts(pool);
    if (JSON.stringify(now) === JSON.stringify(last)) return now;
    last = now;
  }
  return last;
}

/** Exact row counts of every table of the public schema. */
async function rowCounts(pool) {
  const { rows } = await pool.query(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`,
  );
  const out = {};
  for (const { table_name } of rows) {
    out[table_name] = (await pool.query(`SELECT count(*)::int AS n FROM "${table_name}"`)).rows[0].n;
  }
  return out;
}

function summary(counts) {
  return `${Object.values(counts).reduce((a, b) => a + b, 0)} rows in ${Object.keys(counts).length} tables`;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[fuzz] ${err.stack ?? err}`);
    console.log('fuzz: 0 passed, 1 failed');
    process.exit(1);
  },
);
