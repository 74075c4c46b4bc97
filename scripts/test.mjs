#!/usr/bin/env node
// `npm test`: every tier, starting what it needs.
//   1. unit        jest.unit.config.js   (pure logic, fakes) + the OpenAPI documents are current
//   2. integration jest.int.config.js    (real Postgres + Kafka)
//   3. e2e         jest.e2e.config.js    (official SDKs against the running services; the console in headless Chromium)
//   4. chaos       scripts/chaos.mjs --short (faults injected into a stack of its own; invariants)
// The checks that start a stack of their own (the short chaos run, the simulated-day e2e spec) run
// beside the integration tier, which mostly waits on the broker and Postgres; the e2e tier starts
// once they are done, so it has the box to itself (its hedging experiment is judged on latency).
// Options: --only=unit,int,e2e,chaos   (default: all). Exit code is non-zero when anything failed.
//          any other argument is handed to jest as a test path pattern, e.g.
//          `npm test -- --only=int,e2e probe` runs only the int and e2e specs whose path matches "probe".
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startKafka } from './kafka.mjs';
import { ensurePostgres, recreateDatabase } from './postgres.mjs';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { contentKey, ROOT, runTs, stackPorts, startServices } from './services.mjs';

const only = (process.argv.find((a) => a.startsWith('--only='))?.slice(7) ?? 'unit,int,e2e,chaos').split(',');
const patterns = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const E2E_PORT_BASE = Number(process.env.E2E_PORT_BASE ?? 13000);
const log = (msg) => console.log(`[test] ${msg}`);
const totals = { passed: 0, failed: 0 };
const stops = [];
/** The side lane while it runs (see `sideLane`): awaited before the e2e tier, and before exiting on an error. */
let side = null;

/**
 * Runs `node <args>` from the repository root and resolves to its exit code. `output`, when given,
 * takes its stdout and stderr instead of the terminal (the side lane prints them in one block).
 */
function runNode(args, env, output) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: output ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
    if (output) for (const s of [child.stdout, child.stderr]) s.on('data', (d) => output.push(d));
    child.on('exit', (code) => resolve(code ?? 1));
  });
}

/** Runs one jest tier and counts its tests; `opts.name` names its result file, `opts.output` as in `runNode`. */
async function jest(config, env, opts = {}) {
  const out = path.join(ROOT, '.local', `jest-${opts.name ?? path.basename(config, '.js')}.json`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.rmSync(out, { force: true });
  const jestBin = path.join(ROOT, 'node_modules/jest/bin/jest.js');
  const args = [jestBin, '-c', config, '--json', `--outputFile=${out}`, `--passWithNoTests=${patterns.length > 0}`, ...patterns];
  const code = await runNode(args, env, opts.output);
  if (fs.existsSync(out)) {
    const r = JSON.parse(fs.readFileSync(out, 'utf8'));
    totals.passed += r.numPassedTests;
    totals.failed += r.numFailedTests + (r.numRuntimeErrorTestSuites ?? 0);
  } else if (code !== 0) totals.failed += 1;
  return code;
}

/** Counts a check that is one process as one test: passed when it exits 0. */
function countCheck(code) {
  if (code === 0) totals.passed += 1;
  else totals.failed += 1;
  return code === 0;
}

async function main() {
  await ensurePrismaClient({ quiet: true });
  let failed = false;
  // The provider simulator and the tests' fake upstreams listen on loopback, which must be allowlisted.
  const baseEnv = {
    ...process.env,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    GATEWAY_UPSTREAM_ALLOWLIST: process.env.GATEWAY_UPSTREAM_ALLOWLIST ?? '127.0.0.1',
  };

  if (only.includes('unit')) {
    log('unit tests');
    failed = (await jest('jest.unit.config.js', baseEnv)) !== 0 || failed;
    log('OpenAPI documents (docs/openapi) against the services');
    failed = !(await checkOpenApi(baseEnv)) || failed;
  }
  if (!only.includes('int') && !only.includes('e2e')) return finish((await chaos()) || failed);

  // GATEWAY_TEST_DB / KAFKA_PORT / E2E_PORT_BASE let several checkouts run their suites side by side.
  const pg = await ensurePostgres({ database: process.env.GATEWAY_TEST_DB ?? 'gateway_test', log });
  stops.push(pg.stop);
  // The simulated day uses the same server (a database of its own): a second ensurePostgres could
  // start a second embedded server, or stop the one the tiers use.
  side = sideLane({ ...baseEnv, DATABASE_URL: pg.url });
  await recreateDatabase(pg.url);
  const kafkaPort = Number(process.env.KAFKA_PORT ?? 9092);
  // The database is recreated, so the broker starts empty too: events a previous run left on the
  // topics would otherwise be consumed into the fresh database (stale workloads in daily controls).
  const kafka = await startKafka({ port: kafkaPort, log, fresh: true });
  stops.push(kafka.stop);
  const env = { ...baseEnv, DATABASE_URL: pg.url, KAFKA_BROKERS: kafka.brokers, GATEWAY_CONTENT_KEY: contentKey() };
  log('migrating the test database');
  await runTs('libs/db/src/migrations/migrate.cli.ts', env);

  if (only.includes('int')) {
    log('integration tests (real Postgres and Kafka)');
    failed = (await jest('jest.int.config.js', env)) !== 0 || failed;
  }

  failed = (await side) || failed;
  side = null;

  if (only.includes('e2e')) {
    const logDir = path.join(ROOT, '.local', 'e2e-logs');
    fs.rmSync(logDir, { recursive: true, force: true });
    // Ports of their own, so a running `npm start` does not collide with the test stack.
    const e2eEnv = {
      ...env,
      ...stackPorts(E2E_PORT_BASE),
      GATEWAY_INSTANCE_ID: `e2e-${process.pid}`,
      RECONCILIATION_SWEEP_MS: '1000',
      RECONCILIATION_ORPHAN_GRACE_MS: '2000',
      ...e2eCredentials(),
    };
    log('starting the stack for e2e tests');
    const services = await startServices({ env: e2eEnv, logDir, timeoutMs: 240_000, withConsole: true, stops }); // six services starting at once on a loaded 2-core box
    failed =
      (await jest('jest.e2e.config.js', {
        ...e2eEnv,
        E2E_STACK: 'shared',
        E2E_ADMISSION_URL: `http://127.0.0.1:${E2E_PORT_BASE}`,
        E2E_POLICY_URL: `http://127.0.0.1:${E2E_PORT_BASE + 1}`,
        E2E_SETTLEMENT_URL: `http://127.0.0.1:${E2E_PORT_BASE + 3}`,
        E2E_RECONCILIATION_URL: `http://127.0.0.1:${E2E_PORT_BASE + 4}`,
        E2E_PROVIDER_SIM_URL: `http://127.0.0.1:${E2E_PORT_BASE + 10}`,
        // the web console (issue 13); e2e/console.e2e-spec.ts drives it in headless Chromium
        E2E_CONSOLE_URL: `http://127.0.0.1:${E2E_PORT_BASE + 5}`,
        E2E_LOG_DIR: logDir,
        // the compiled tree the stack runs, for specs that start an instance of their own
        ...(services.build ? { GATEWAY_SERVICE_BUILD: services.build } : {}),
      })) !== 0 || failed;
  }
  return finish(failed);
}

/**
 * The side lane (see the top): the short chaos run, then the e2e specs with a stack of their own,
 * one after the other, beside the integration tier. Their output is kept and printed in one block
 * when the last is done, so it does not interleave line by line with the tier's. Resolves to "something failed".
 */
async function sideLane(env) {
  const started = Date.now();
  const jobs = [];
  if (only.includes('chaos')) jobs.push(['chaos (short)', (output) => chaos(output)]);
  if (only.includes('e2e') && ownStackSpecsMatch())
    jobs.push([
      'e2e specs with a stack of their own',
      (output) => jest('jest.e2e.config.js', { ...env, E2E_STACK: 'own' }, { name: 'e2e-own-stack', output }).then((c) => c !== 0),
    ]);
  if (jobs.length === 0) return false;
  log(`beside the integration tier: ${jobs.map(([name]) => name).join(', then ')} (output when done)`);
  const results = [];
  for (const [name, run] of jobs) {
    const output = [];
    const t0 = Date.now();
    const jobFailed = await run(output);
    results.push({ name, jobFailed, output, s: (Date.now() - t0) / 1000 });
  }
  for (const r of results) {
    log(`${r.name}, beside the integration tier: ${r.jobFailed ? 'FAILED' : 'passed'} in ${r.s.toFixed(1)} s`);
    process.stdout.write(Buffer.concat(r.output.map((d) => (typeof d === 'string' ? Buffer.from(d) : d))));
  }
  log(`the side lane took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return results.some((r) => r.jobFailed);
}

/** Whether the test path patterns (if any) leave one of the e2e specs that start a stack of their own. */
function ownStackSpecsMatch() {
  if (patterns.length === 0) return true;
  const ownStack = JSON.parse(fs.readFileSync(path.join(ROOT, 'e2e', 'own-stack.json'), 'utf8'));
  return ownStack.some((f) => patterns.some((p) => new RegExp(p).test(path.join(ROOT, 'e2e', f))));
}

/**
 * Upstream keys for e2e/upstream-credentials: one in the environment, one in a secrets file (which
 * the spec rewrites to show rotation). Fresh random values every run: they are the canaries the
 * spec then searches every table, log and topic for.
 */
function e2eCredentials() {
  const file = path.join(ROOT, '.local', `e2e-credentials-${process.pid}.json`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify({ E2E_FILE: `AIza-canary-file-${randomBytes(16).toString('hex')}` }), { mode: 0o600 });
  stops.push(async () => fs.rmSync(file, { force: true }));
  return { GATEWAY_CREDENTIAL_E2E_ENV: `sk-canary-env-${randomBytes(16).toString('hex')}`, GATEWAY_CREDENTIALS_FILE: file };
}

/** The short chaos run: a stack of its own (its own Postgres server, broker, ports and database). */
async function chaos(output) {
  if (!only.includes('chaos')) return false;
  if (!output) log('chaos (short): faults against a stack of its own');
  const env = {
    ...process.env,
    CHAOS_DB: `${process.env.GATEWAY_TEST_DB ?? 'gateway_test'}_chaos`,
    CHAOS_KAFKA_PORT: String(Number(process.env.KAFKA_PORT ?? 9092) + 20000),
    CHAOS_PORT_BASE: String(E2E_PORT_BASE + 10000),
  };
  return !countCheck(await runNode(['scripts/chaos.mjs', '--short'], env, output));
}

/**
 * The committed OpenAPI documents (docs/openapi/<service>.json) must match what each service's
 * Nest module describes (scripts/openapi.cjs builds them without Postgres or Kafka).
 * UPDATE_OPENAPI=1 rewrites them instead of failing (or: npm run openapi).
 */
async function checkOpenApi(env) {
  const args = ['-r', '@swc-node/register', 'scripts/openapi.cjs', ...(process.env.UPDATE_OPENAPI === '1' ? ['--write'] : [])];
  return countCheck(await runNode(args, env));
}

async function finish(failed) {
  if (side) failed = (await side) || failed;
  for (const stop of stops.reverse()) await stop().catch(() => undefined);
  console.log(`\ntests: ${totals.passed} passed, ${totals.failed} failed`);
  process.exit(failed || totals.failed > 0 ? 1 : 0);
}

main().catch(async (err) => {
  console.error(`[test] ${err.stack ?? err}`);
  totals.failed += 1;
  await finish(true);
});
