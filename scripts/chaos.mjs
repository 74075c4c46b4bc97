#!/usr/bin/env node
// `npm run chaos`: fault injection against a whole stack of its own (own database, broker and
// ports; loopback only; bounded in time; stops by itself).
//
// A mixed load (OpenAI and Gemini dialects, whole and streamed, some routes that withhold usage or
// cut their streams, one workload with a tight budget) runs while faults are injected: kill -9 of
// every service in turn (the supervisor restarts them), a broker stop and start, Postgres
// connections terminated (pg_terminate_backend), Postgres itself crashed (an immediate
// shutdown: the chaos run's own durable server, `startPrivatePostgres`) and started again, which
// runs crash recovery, and Postgres stalled (every process of the server stopped with SIGSTOP,
// then continued: connections stay open and nothing answers, as when its disk or host hangs), and
// Postgres refusing every write (all transactions read-only, as a managed database makes them when
// its storage is full), and the services' connections to Postgres silently dropped (a relay in
// front of it freezes the connections it carries; the services must find them dead within two of
// their answer bounds, DATABASE_ANSWER_TIMEOUT_MS = 12 s here, and answer 200 again within a client
// deadline after that, before anything closes them); the full run also stalls the broker (SIGSTOP, 10 s) and cuts Postgres off without
// a reset (every connection, live or new, unanswered for 50 s: a host gone, a route blackholed),
// and stops settlement and dispatch in turn (SIGSTOP, 25 s: a frozen VM or container, a process
// held in a debugger), then lets them go on.
// The load goes on until the last fault is over.
// After the load, consumer offsets of settlement and
// dispatch are reset to earliest (a full replay of two topics). Then the invariants are checked
// with SQL and the public topics:
//   - pending + unresolved + settled <= budget for every account, at every sample
//   - one ledger row per settled attempt, none duplicated, none for an unsettled attempt
//   - every attempt without usage has a reconciliation case
//   - no action non-terminal past its deadline + grace
//   - the ledger is unchanged by the replay
//   - the settled topic's sum equals the ledger's
//   - every admission announced on the decisions topic names an action Postgres has (an admission
//     the crash undid was never announced)
//   - no consumer parked a message on the dead-letter topic: every fault here passes, and a parked
//     message waits for an operator to re-publish it
//   - no client waited longer than its deadline + 2 s; every service healthy again at the end
//   - no orphan case still holds evidence dispatch offered late (reconciliation settles it)
//   - no running service exited but by the run's own kill -9 (a start that fails while a fault
//     lasts is retried by the supervisor and listed as a failed start)
//   - no session sat idle inside a transaction past the services' bound (15 s) + 3 s in two samples
//     in a row: a stopped process or a dropped flow must not keep its row locks
// It prints a table and exits non-zero on any violation.
//
//   node scripts/chaos.mjs [--short] [--scale=N] [--faults=KEY,…] [--seconds=N] [--rate=N] [--seed=N] [--pg-down-s=N] [--pg-stall-s=N] [--pg-read-only-s=N] [--pg-blackhole-s=N] [--broker-stall-s=N] [--service-stall-s=N] [--report=FILE]
//
// `--pg-down-s` is how long the crashed Postgres stays down before it is started again (default 15,
// longer than a consumer's transient retries; 1 with `--short`). `--pg-stall-s` is how long it
// stays stopped in the stall (default 15; 8 with `--short`: longer than a client's deadline + 2 s,
// so a request that waited on it would fail the client check). `--pg-read-only-s` is how long every
// write is refused (default 15; 12 with `--short`: longer than a consumer's transient retries, ~11 s,
// so a consumer that took it for a passing error would park messages and fail the dead-letter check).
// `--pg-blackhole-s` is how long every connection to Postgres goes unanswered, live or new (default
// 50; 0, left out, with `--short`). `--broker-stall-s` is how long the full run stops the broker
// (default 10). `--service-stall-s` is how long the full run stops settlement, then dispatch (default
// 25, above the idle-in-transaction bound; 0 leaves the faults out).
//
// `--scale=N` (or GATEWAY_SCALE) runs N instances of admission, dispatch and settlement; the load
// goes to each admission instance in turn, and the full run also kills each one's second instance
// after the first instances' kills (keys `kill-dispatch-2`, `stall-dispatch-2`, … for `--faults`).
//
// `--faults=KEY,…` runs only those faults, in that order (a key may repeat), e.g.
// `--faults=kill-settlement,broker-restart`; an unknown key lists the keys there are.
//
// `--short` is the version `npm test` runs (fewer faults, ~30 s of load).
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { startKafka } from './kafka.mjs';
import { ensurePrismaClient } from './prisma-generate.mjs';
import {
  numberArg,
  runTs,
  scaleFrom,
  SCALABLE,
  sleep,
  scriptArgs,
  startOwnInfra,
  startServices,
  tsRequire,
  withStops,
} from './services.mjs';
import {
  announcedAdmissionsWithoutAction,
  ledgerSnapshot,
  parkedMessages,
  overBudgetAccounts,
  quiesce as quiesceStack,
  rng,
  settledTopicSum,
  unhealthyServices,
  waitForLag as lagZero,
} from './stack-checks.mjs';

const args = scriptArgs();
const SHORT = args.short === 'true';
const LOAD_SECONDS = numberArg(args, 'seconds', SHORT ? 30 : 120, 1);
const RATE = numberArg(args, 'rate', SHORT ? 8 : 20, 1);
const SEED = numberArg(args, 'seed', 42);
const PG_DOWN_MS = numberArg(args, 'pg-down-s', SHORT ? 1 : 15) * 1000;
const PG_STALL_MS = numberArg(args, 'pg-stall-s', SHORT ? 8 : 15) * 1000;
const PG_READ_ONLY_MS = numberArg(args, 'pg-read-only-s', SHORT ? 12 : 15) * 1000;
// A blackhole (full run): every connection to Postgres, live or new, goes unanswered. Longer than
// a consumer's transient retries (six, ~40 s with 5 s waits for a pool connection), so a consumer
// that took its waits for a busy pool parks messages and fails the dead-letter check.
const PG_BLACKHOLE_MS = numberArg(args, 'pg-blackhole-s', SHORT ? 0 : 50) * 1000;
const BROKER_STALL_MS = numberArg(args, 'broker-stall-s', 10) * 1000;
const SERVICE_STALL_MS = numberArg(args, 'service-stall-s', 25) * 1000;
// Instances of each scalable service (admission, dispatch, settlement); the load goes to every
// admission instance in turn, and the full run also kills each one's second instance.
const SCALE = scaleFrom(args);
// Only these faults, in this order (keys: chooseFaults); the run's other settings stay.
const FAULTS =
  args.faults === undefined
    ? null
    : args.faults
        .split(',')
        .map((k) => k.trim())
        .filter(Boolean);
// The services' bound on a session idle inside a transaction (DATABASE_IDLE_IN_TRANSACTION_MS, its default).
const IDLE_IN_TRANSACTION_MS = 15_000;
// The services' bound on an unanswered statement in this run (DATABASE_ANSWER_TIMEOUT_MS; 30 s by
// default): above the transaction time (10 s), so the stalls still test what they tested, and short
// enough that the dropped connections are found within the run.
const ANSWER_TIMEOUT_MS = 12_000;
const DEADLINE_MS = 4000;
// A connection first drawn just before the first one is found dead waits its own whole bound: up
// to two bounds. Then a request admitted as it is let go needs up to its deadline to be answered.
// (With two bounds alone, a clean-clone run of 2026-12-07 failed: dispatch's claim drew a frozen
// idle connection 12.0 s after the drop, was let go at 24.06 s, and the first 200 came after.)
const PG_DROPPED_MS = 2 * ANSWER_TIMEOUT_MS + DEADLINE_MS;
const PORT_BASE = Number(process.env.CHAOS_PORT_BASE ?? 23000);
const KAFKA_PORT = Number(process.env.CHAOS_KAFKA_PORT ?? 29092);
const CLIENT_SLACK_MS = 2000;
const ORPHAN_GRACE_MS = 2000;

const require = tsRequire();
const { Topics } = require('@gateway/contracts');
const { Kafka, logLevel } = require('kafkajs');
const { startPrivatePostgres, startTcpRelay } = require('@gateway/testing');

const t0 = Date.now();
const log = (msg) => console.log(`[chaos ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${msg}`);

const violations = [];
const violate = (what) => {
  violations.push(what);
  log(`VIOLATION: ${what}`);
};

async function main() {
  faultSchedule(LOAD_SECONDS); // an unknown --faults key stops the run here, before anything starts
  await ensurePrismaClient({ quiet: true });
  return withStops(run);
}

async function run(stops) {
  // A server of the run's own, durable like production's, so that a fault can crash it.
  log('starting a Postgres server of its own');
  const postgres = await startPrivatePostgres({ max_connections: '200' });
  stops.push(() => postgres.dispose());
  // The services reach it through a relay that can drop their connections silently (the fault
  // "connections silently dropped"); the run's own checks connect directly.
  const relay = await startTcpRelay({ host: '127.0.0.1', port: Number(new URL(postgres.url).port) });
  stops.push(() => relay.close());
  const infra = await startOwnInfra({
    postgresUrl: relay.via(postgres.url),
    name: 'chaos',
    database: process.env.CHAOS_DB ?? 'gateway_chaos',
    kafkaPort: KAFKA_PORT,
    portBase: PORT_BASE,
    extraEnv: {
      RECONCILIATION_SWEEP_MS: '1000',
      RECONCILIATION_ORPHAN_GRACE_MS: String(ORPHAN_GRACE_MS),
      DATABASE_ANSWER_TIMEOUT_MS: String(ANSWER_TIMEOUT_MS),
      DATABASE_IDLE_IN_TRANSACTION_MS: String(IDLE_IN_TRANSACTION_MS),
      LOG_LEVEL: 'warn',
    },
    stops,
    log,
  });
  const { pgServer, dataDir, logDir, env } = infra;
  let kafka = infra.kafka;
  stops.push(() => kafka.stop());
  const seeded = JSON.parse(
    (await runTs('libs/testing/src/seed-chaos.cli.ts', { ...env, PROVIDER_SIM_URL: `http://127.0.0.1:${PORT_BASE + 10}` }))
      .trim()
      .split('\n')
      .pop(),
  );
  log('starting services under the supervisor');
  const services = await startServices({ env, logDir, supervise: true, scale: SCALE, log: (m) => log(`supervisor: ${m}`), stops });
  const direct = new URL(pgServer.url);
  direct.port = new URL(postgres.url).port;
  const db = new pg.Pool({ connectionString: direct.href, max: 3 });
  db.on('error', () => undefined); // an idle connection the Postgres crash closed
  stops.push(() => db.end());

  // ------------------------------------------------------------ load, faults, budget samples
  const admissions = services.children.filter((c) => c.service.name === 'admission').map((c) => `http://127.0.0.1:${c.port}`);
  const outcomes = new Map();
  const okTimes = []; // when each 200 came (a whole answer or a stream that ended well)
  const count = (k) => {
    outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
    if (/ 200$/.test(k)) okTimes.push(Date.now());
  };
  let maxWaitMs = 0;
  /** Idempotency-Key → the workload key it was sent with and the action ids the answers named */
  const keyedActions = new Map();
  const random = rng(SEED);
  const inFlight = new Set();
  const loadUntil = Date.now() + LOAD_SECONDS * 1000;
  const faults = [];
  let sampling = true;
  let samples = 0;
  const dbName = new URL(pgServer.url).pathname.slice(1);
  let idleInTransaction = new Set(); // sessions past the bound in the last sample
  const sampler = (async () => {
    while (sampling) {
      samples += 1;
      await checkBudgets(db, 'sample').catch((err) => count(`sampler_error:${err.code ?? err.message.slice(0, 40)}`));
      idleInTransaction = await checkIdleInTransaction(db, dbName, idleInTransaction).catch(() => new Set());
      await sleep(1000);
    }
  })();

  const schedule = faultSchedule(LOAD_SECONDS);
  const t0Load = Date.now();
  let faultsDone = false;
  const faultRunner = (async () => {
    for (const f of schedule) {
      const wait = t0Load + f.at * 1000 - Date.now();
      if (wait > 0) await sleep(wait);
      log(`fault: ${f.name}`);
      try {
        kafka =
          (await f.run({
            services,
            logDir,
            kafka,
            dataDir,
            db,
            dbName,
            postgres,
            relay,
            okTimes,
          })) ?? kafka;
        faults.push({ name: f.name, ok: true });
      } catch (err) {
        faults.push({ name: f.name, ok: false, error: err.message });
        violate(`fault ${f.name} could not be injected: ${err.message}`);
      }
    }
  })().finally(() => {
    faultsDone = true;
  });

  // The load goes on until the last fault is over (faults run one after another and can outlast the
  // planned seconds), so every fault meets live traffic.
  log(`load: ${RATE} req/s for ${LOAD_SECONDS} s, and until the last fault is over`);
  let sent = 0;
  while (Date.now() < loadUntil || !faultsDone) {
    const due = t0Load + (sent * 1000) / RATE;
    if (due > Date.now()) await sleep(due - Date.now());
    sent += 1;
    const r = pick(random, seeded);
    // every fourth whole chat request carries an Idempotency-Key, and is retried once with it if
    // its answer is not a 200 (the random sequence, and so the mix, stays the seed's)
    if (r.kind === 'openai' && !r.stream && r.model === 'chaos-openai' && sent % 4 === 0) r.idempotencyKey = `chaos-${SEED}-${sent}`;
    const p = oneRequest(admissions[sent % admissions.length], r, count, keyedActions).then((ms) => {
      maxWaitMs = Math.max(maxWaitMs, ms);
    });
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }
  const loadSeconds = Math.round((Date.now() - t0Load) / 1000);
  await Promise.allSettled([...inFlight]);
  await faultRunner;
  log(`load done: ${sent} requests`);

  // ------------------------------------------------------------ quiesce, replay, invariants
  await waitHealthy(services, env, 'after the faults');
  await quiesce(db);
  sampling = false;
  await sampler;
  await checkBudgets(db, 'final');
  const before = await ledgerSnapshot(db);
  log(`ledger before replay: ${before.rows} rows, ${before.sum} micro-USD`);
  await replay(services, kafka.brokers, ['gateway-settlement', 'gateway-dispatch']);
  await waitHealthy(services, env, 'after the replay');
  await waitForLag(kafka.brokers, 'gateway-settlement', Topics.attemptCompleted.name);
  await quiesce(db);
  const after = await ledgerSnapshot(db);
  log(`ledger after replay:  ${after.rows} rows, ${after.sum} micro-USD`);
  if (before.digest !== after.digest)
    violate(`the replay changed the ledger (${before.rows}→${after.rows} rows, ${before.sum}→${after.sum})`);
  await checkLedger(db);
  const keysSent = await checkKeysDispatchedOnce(db, keyedActions);
  const topic = await settledTopicSum(kafka.brokers);
  if (topic.sum !== after.sum || topic.attempts !== after.rows) {
    violate(`settled topic (${topic.attempts} attempts, ${topic.sum} micro-USD) differs from the ledger (${after.rows}, ${after.sum})`);
  }
  const decisions = await announcedAdmissionsWithoutAction(db, kafka.brokers);
  if (decisions.missing.length > 0)
    violate(
      `${decisions.missing.length} admissions announced on the decisions topic have no action (${decisions.missing.slice(0, 3).join(', ')})`,
    );
  const parked = await parkedMessages(kafka.brokers);
  if (parked.length > 0) violate(`messages parked on the dead-letter topic: ${parked.join('; ')}`);
  if (maxWaitMs > DEADLINE_MS + CLIENT_SLACK_MS) violate(`a client waited ${maxWaitMs} ms (deadline ${DEADLINE_MS} + ${CLIENT_SLACK_MS})`);
  const restarts = services.children.map((c) => `${c.name}:${c.restarts}`).join(' ');
  // Only the run's own kills (SIGKILL) may end a running service: any other exit of one that had
  // answered /health is a crash the supervisor hid. A start that fails (the broker or Postgres down
  // while a killed service comes back) is retried by the supervisor and listed, not a violation.
  for (const c of services.children) {
    const crashes = c.exits.filter((e) => e.afterHealthy && e.signal !== 'SIGKILL');
    if (crashes.length > 0)
      violate(`${c.name} exited while running, ${crashes.map((e) => e.signal ?? `code ${e.code}`).join(', ')} (its log: ${c.name}.log)`);
  }
  const failedStarts = services.children.flatMap((c) =>
    c.exits.filter((e) => !e.afterHealthy).map((e) => `${c.name} (${e.signal ?? `code ${e.code}`})`),
  );

  // Evidence dispatch offered to orphan cases (it came after the sweep) is settled or set aside by
  // reconciliation's next sweep: none may still wait once the stack is quiet.
  const cases = (
    await db.query(`SELECT count(*)::int AS n,
      count(*) FILTER (WHERE resolved_by = 'gateway:late-evidence')::int AS late,
      count(*) FILTER (WHERE details ? 'late_evidence_not_used')::int AS aside,
      count(*) FILTER (WHERE status = 'open' AND late_evidence IS NOT NULL)::int AS waiting
      FROM reconciliation_case`)
  ).rows[0];
  if (cases.waiting > 0) violate(`${cases.waiting} orphan cases still hold late evidence that reconciliation did not settle`);
  const casesLine = `${cases.n} (${cases.late} settled from late evidence, ${cases.aside} with late evidence set aside)`;

  // ------------------------------------------------------------ report
  const table = [
    [
      'load',
      `${sent} requests at ${RATE}/s for ${loadSeconds} s, seed ${SEED}${SCALE > 1 ? `, ${SCALE} instances of ${SCALABLE.join(', ')}` : ''}`,
    ],
    ['faults', faults.map((f) => `${f.name}${f.ok ? '' : ' (FAILED)'}`).join(', ')],
    ['supervisor restarts', restarts],
    ['failed starts', failedStarts.length === 0 ? 'none' : failedStarts.join(', ')],
    ...[...outcomes.entries()].sort().map(([k, v]) => [`  ${k}`, String(v)]),
    ['max client wait', `${maxWaitMs} ms (limit ${DEADLINE_MS + CLIENT_SLACK_MS})`],
    ['budget samples', `${samples} (every account, pending + unresolved + settled <= budget)`],
    ['ledger', `${after.rows} rows, ${after.sum} micro-USD; replay ${before.digest === after.digest ? 'changed nothing' : 'CHANGED IT'}`],
    ['settled topic', `${topic.attempts} attempts, ${topic.sum} micro-USD, ${topic.duplicates} duplicate deliveries`],
    ['decisions topic', `${decisions.announced} admissions announced, ${decisions.missing.length} without an action`],
    ['Idempotency-Keys', `${keysSent} sent (non-200 answers retried once with the key), none dispatched twice unless listed below`],
    ['dead-letter topic', parked.length === 0 ? 'nothing parked' : parked.join('; ')],
    ['cases', casesLine],
    ['violations', violations.length === 0 ? 'none' : violations.join('; ')],
  ];
  const width = Math.max(...table.map(([k]) => k.length));
  const text = table.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
  console.log(`\n${text}\n`);
  if (args.report) fs.writeFileSync(path.resolve(args.report), `# chaos run ${new Date().toISOString()}\n\n\`\`\`\n${text}\n\`\`\`\n`);
  console.log(`chaos: ${violations.length === 0 ? 1 : 0} passed, ${violations.length === 0 ? 0 : 1} failed`);
  return violations.length === 0 ? 0 : 1;
}

/** Which faults run when (seconds into the load). */
function faultSchedule(seconds) {
  const kill = (name) => ({
    key: `kill-${name}`,
    name: `kill -9 ${name}`,
    run: async ({ logDir }) => {
      const pid = Number(fs.readFileSync(path.join(logDir, `${name}.pid`), 'utf8'));
      process.kill(pid, 'SIGKILL');
    },
  });
  const brokerRestart = {
    key: 'broker-restart',
    name: 'broker stop/start',
    run: async ({ kafka, dataDir }) => {
      await kafka.stop();
      await sleep(4000);
      return startKafka({ port: KAFKA_PORT, dataDir, log: () => undefined });
    },
  };
  const pgKill = {
    key: 'pg-terminate',
    name: 'pg_terminate_backend',
    run: async ({ db, dbName }) => {
      const r = await db.query(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
        [dbName],
      );
      log(`terminated ${r.rows[0].n} backends`);
    },
  };
  const pgCrash = {
    key: 'pg-crash',
    name: `Postgres crash and restart (${PG_DOWN_MS / 1000} s down)`,
    run: async ({ postgres }) => {
      await postgres.crash();
      await sleep(PG_DOWN_MS);
      await postgres.restart();
      log('Postgres recovered and accepts connections');
    },
  };
  const pgStall = {
    key: 'pg-stall',
    name: `Postgres stalls (SIGSTOP, ${PG_STALL_MS / 1000} s)`,
    run: async ({ postgres }) => {
      postgres.freeze();
      await sleep(PG_STALL_MS);
      postgres.thaw();
      log('Postgres runs again');
    },
  };
  const pgReadOnly = {
    key: 'pg-read-only',
    name: `Postgres refuses writes (read-only, ${PG_READ_ONLY_MS / 1000} s)`,
    run: async ({ db }) => {
      await setReadOnly(db, true);
      try {
        await sleep(PG_READ_ONLY_MS);
      } finally {
        await setReadOnly(db, false);
      }
      log('Postgres takes writes again');
    },
  };
  const pgDropped = {
    key: 'pg-dropped',
    name: `Postgres connections silently dropped (${PG_DROPPED_MS / 1000} s)`,
    run: async ({ relay, okTimes }) => {
      const frozenAt = Date.now();
      log(`froze ${relay.freezeLive()} connections`);
      await sleep(PG_DROPPED_MS);
      // The stack must have let go of the frozen connections it drew (DATABASE_ANSWER_TIMEOUT_MS)
      // and answered on new ones before anything closes the frozen ones.
      const after = okTimes.filter((t) => t > frozenAt + ANSWER_TIMEOUT_MS);
      if (after.length === 0)
        violate(`no request was answered 200 between the bound on the dropped connections and ${PG_DROPPED_MS / 1000} s after the drop`);
      else log(`answered 200 again ${((after[0] - frozenAt) / 1000).toFixed(1)} s after the drop (${after.length} times before the close)`);
      // what the kernel would do after ~15 minutes of retransmissions
      log(`closed ${relay.releaseFrozen()} frozen connections`);
    },
  };
  const pgBlackhole = {
    key: 'pg-blackhole',
    name: `Postgres unreachable without a reset (every connection, live or new, unanswered, ${PG_BLACKHOLE_MS / 1000} s)`,
    run: async ({ relay, okTimes }) => {
      relay.freezeNew(true);
      log(`froze ${relay.freezeLive()} connections, and every new one`);
      await sleep(PG_BLACKHOLE_MS);
      // the route comes back: new connections pass, and the kernel would long since have reset the old ones
      relay.freezeNew(false);
      const backAt = Date.now();
      log(`closed ${relay.releaseFrozen()} frozen connections; new ones pass`);
      for (let waited = 0; waited < 2 * ANSWER_TIMEOUT_MS && !okTimes.some((t) => t > backAt); waited += 250) await sleep(250);
      const first = okTimes.find((t) => t > backAt);
      if (first === undefined)
        violate(`no request was answered 200 within ${(2 * ANSWER_TIMEOUT_MS) / 1000} s after the route to Postgres came back`);
      else log(`answered 200 again ${((first - backAt) / 1000).toFixed(1)} s after the route came back`);
    },
  };
  const stall = (name) => ({
    key: `stall-${name}`,
    name: `${name} stalls (SIGSTOP, ${SERVICE_STALL_MS / 1000} s)`,
    run: async ({ logDir }) => {
      const pid = Number(fs.readFileSync(path.join(logDir, `${name}.pid`), 'utf8'));
      process.kill(pid, 'SIGSTOP');
      try {
        await sleep(SERVICE_STALL_MS);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      log(`${name} runs again`);
    },
  });
  const brokerStall = {
    key: 'broker-stall',
    name: `broker stalls (SIGSTOP, ${BROKER_STALL_MS / 1000} s)`,
    run: async ({ kafka }) => {
      process.kill(kafka.pid, 'SIGSTOP');
      try {
        await sleep(BROKER_STALL_MS);
      } finally {
        process.kill(kafka.pid, 'SIGCONT');
      }
      log('broker runs again');
    },
  };
  const postgresFaults = [pgKill, pgCrash, pgStall, pgReadOnly, pgDropped, ...(PG_BLACKHOLE_MS > 0 ? [pgBlackhole] : [])];
  const list = SHORT
    ? [kill('dispatch'), kill('settlement'), brokerRestart, ...postgresFaults]
    : [
        kill('dispatch'),
        kill('settlement'),
        kill('admission'),
        kill('reconciliation'),
        kill('policy'),
        // a scaled stack: each scalable service's second instance too, while the first serves
        ...(SCALE > 1 ? SCALABLE.map((name) => kill(`${name}-2`)) : []),
        brokerRestart,
        brokerStall,
        ...postgresFaults,
        ...(SERVICE_STALL_MS > 0 ? [stall('settlement'), stall('dispatch')] : []),
        kill('dispatch'),
      ];
  const instances = SCALE > 1 ? SCALABLE.flatMap((name) => [kill(`${name}-2`), stall(`${name}-2`)]) : [];
  const known = [...list, pgBlackhole, brokerStall, stall('settlement'), stall('dispatch'), ...instances];
  const chosen = FAULTS === null ? list : chooseFaults(FAULTS, known);
  const step = seconds / (chosen.length + 1);
  return chosen.map((f, i) => ({ ...f, at: Math.round(step * (i + 1)) }));
}

/**
 * The faults `--faults=a,b,…` names, in that order (a key may repeat: `broker-restart,broker-restart`
 * injects it twice); any kill or stall of a service by its key. An unknown key stops the run with
 * the keys there are, before anything starts.
 */
function chooseFaults(keys, known) {
  const byKey = new Map(known.map((f) => [f.key, f]));
  return keys.map((k) => {
    const f = byKey.get(k);
    if (!f) throw new Error(`--faults: no fault "${k}"; there are ${[...byKey.keys()].sort().join(', ')}`);
    return f;
  });
}

function pick(random, seeded) {
  const r = random();
  const key = random() < 0.2 ? seeded.tightKey : seeded.loadKey;
  if (r < 0.3) return { kind: 'openai', stream: false, model: 'chaos-openai', key };
  if (r < 0.5) return { kind: 'openai', stream: true, model: 'chaos-openai', key };
  if (r < 0.7) return { kind: 'gemini', stream: false, model: 'chaos-gemini', key };
  if (r < 0.85) return { kind: 'gemini', stream: true, model: 'chaos-gemini', key };
  if (r < 0.93) return { kind: 'openai', stream: false, model: 'chaos-no-usage', key };
  return { kind: 'openai', stream: true, model: 'chaos-cut-stream', key };
}

/**
 * One client request; returns how long the client waited. Outcomes are counted by class. A request
 * with an Idempotency-Key whose answer is not a 200 is sent again once with the same key (counted
 * as `… keyed retry`), and the action ids its answers name are kept in `keyed` for
 * `checkKeysDispatchedOnce`.
 */
async function oneRequest(base, r, count, keyed) {
  if (!r.idempotencyKey) return (await sendOne(base, r, count, null)).ms;
  const seen = keyed.get(r.idempotencyKey) ?? { workloadKey: r.key, actions: new Set() };
  keyed.set(r.idempotencyKey, seen);
  const first = await sendOne(base, r, count, seen.actions);
  if (first.status === 200) return first.ms;
  const again = await sendOne(base, { ...r, retry: true }, count, seen.actions);
  return Math.max(first.ms, again.ms); // each is one client request, bounded by the deadline on its own
}

/** One HTTP request; returns its status (0: no answer) and how long the client waited. */
async function sendOne(base, r, count, actions) {
  const started = Date.now();
  const signal = AbortSignal.timeout(DEADLINE_MS + CLIENT_SLACK_MS + 500);
  const label = `${r.kind}${r.stream ? ' stream' : ''}${r.idempotencyKey ? (r.retry ? ' keyed retry' : ' keyed') : ''}`;
  try {
    const res =
      r.kind === 'openai'
        ? await fetch(`${base}/v1/chat/completions`, {
            method: 'POST',
            signal,
            headers: {
              authorization: `Bearer ${r.key}`,
              'content-type': 'application/json',
              ...(r.idempotencyKey ? { 'idempotency-key': r.idempotencyKey } : {}),
            },
            body: JSON.stringify({ model: r.model, stream: r.stream, messages: [{ role: 'user', content: 'chaos says hello' }] }),
          })
        : await fetch(`${base}/v1beta/models/${r.model}:${r.stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`, {
            method: 'POST',
            signal,
            headers: { 'x-goog-api-key': r.key, 'content-type': 'application/json' },
            body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'chaos says hello' }] }] }),
          });
    const body = await res.text();
    const actionId = res.headers.get('x-gateway-action-id');
    if (actions && actionId) actions.add(actionId);
    let outcome = `${label} ${res.status}`;
    if (res.status === 200 && r.stream) {
      const errored = /"error"\s*:/.test(body);
      const done = r.kind === 'openai' ? body.includes('data: [DONE]') : !errored;
      outcome += errored ? ' (error event)' : done ? '' : ' (ended without [DONE])';
    } else if (res.status >= 400) {
      outcome += ` ${/"(?:code|status)"\s*:\s*"([a-z_]+)"/.exec(body)?.[1] ?? ''}`;
    }
    count(outcome.trim());
    // A 5xx that is not the gateway's stated upstream/deadline/unavailable answer is an outage.
    if (res.status >= 500 && ![502, 503, 504].includes(res.status)) violate(`${label} answered ${res.status}: ${body.slice(0, 160)}`);
    // A stream the client did not receive to the end must say so (an error event), never end quietly.
    if (outcome.endsWith('(ended without [DONE])')) violate(`${label} on ${r.model} ended without [DONE] and without an error event`);
    return { status: res.status, ms: Date.now() - started };
  } catch (err) {
    count(`${label} ${err.name === 'TimeoutError' ? 'client timeout' : `connection error (${err.cause?.code ?? err.name})`}`);
    return { status: 0, ms: Date.now() - started };
  }
}

/**
 * An Idempotency-Key never dispatches twice: of the actions its answers named, and the one that
 * holds it now (a key released by an undispatched void moves to the retry's new action), at most
 * one was ever claimed by a dispatcher. Returns how many keys were sent and how many were retried.
 */
async function checkKeysDispatchedOnce(db, keyed) {
  let twice = 0;
  for (const [key, seen] of keyed) {
    const { rows } = await db.query(
      `SELECT count(DISTINCT a.id)::int AS n FROM action a
        WHERE (a.id = ANY($1::text[]) OR a.idempotency_key = $2)
          AND EXISTS (SELECT 1 FROM dispatch_claim c WHERE c.action_id = a.id)`,
      [[...seen.actions], key],
    );
    if (rows[0].n > 1) {
      twice += 1;
      if (twice <= 3) violate(`Idempotency-Key ${key} was dispatched as ${rows[0].n} actions`);
    }
  }
  if (twice > 3) violate(`${twice} Idempotency-Keys in all were dispatched more than once`);
  return keyed.size;
}

async function checkBudgets(db, when) {
  for (const v of await overBudgetAccounts(db)) violate(`${when}: ${v}`);
}

/**
 * Sessions of the services idle inside a transaction for longer than their bound + 3 s, in this
 * sample and the one before (`previous`): once would also catch a session the server had no
 * chance to end yet, right after the Postgres stall. Returns this sample's.
 */
const reportedIdle = new Set();
async function checkIdleInTransaction(db, dbName, previous) {
  const { rows } = await db.query(
    `SELECT pid, round(extract(epoch FROM now() - state_change))::int AS s, left(query, 60) AS q FROM pg_stat_activity
      WHERE datname = $1 AND state = 'idle in transaction' AND now() - state_change > $2 * interval '1 millisecond'`,
    [dbName, IDLE_IN_TRANSACTION_MS + 3000],
  );
  for (const r of rows)
    if (previous.has(r.pid) && !reportedIdle.has(r.pid) && reportedIdle.add(r.pid))
      violate(`session ${r.pid} idle in a transaction for ${r.s} s, past the bound (last statement: ${r.q})`);
  return new Set(rows.map((r) => r.pid));
}

async function checkLedger(db) {
  const q = async (sql) => (await db.query(sql)).rows[0].n;
  const missing = await q(`SELECT count(*)::int AS n FROM attempt t WHERE t.status = 'settled'
    AND NOT EXISTS (SELECT 1 FROM ledger_entry l WHERE l.attempt_id = t.id)`);
  if (missing > 0) violate(`${missing} settled attempts have no ledger row`);
  const stray = await q(`SELECT count(*)::int AS n FROM ledger_entry l JOIN attempt t ON t.id = l.attempt_id WHERE t.status <> 'settled'`);
  if (stray > 0) violate(`${stray} ledger rows belong to attempts that are not settled`);
  const noCase = await q(`SELECT count(*)::int AS n FROM attempt t
    WHERE t.status <> 'settled' AND NOT EXISTS (SELECT 1 FROM reconciliation_case c WHERE c.attempt_id = t.id)`);
  if (noCase > 0) violate(`${noCase} attempts without usage have no reconciliation case`);
  const stuck = await q(`SELECT count(*)::int AS n FROM action
    WHERE status IN ('received', 'admitted', 'dispatched') AND deadline_at < now() - interval '${ORPHAN_GRACE_MS + 15000} milliseconds'`);
  if (stuck > 0) violate(`${stuck} actions are not terminal past their deadline + grace`);
}

/** Waits until no attempt is in flight and no action is open (bounded). */
async function quiesce(db) {
  if (!(await quiesceStack(db, DEADLINE_MS + ORPHAN_GRACE_MS + 40_000))) log('quiesce: still busy at the limit; checking anyway');
}

/** Offsets of the groups reset to earliest while their services are down: every event is delivered again. */
async function replay(services, brokers, groups) {
  const owners = { 'gateway-settlement': 'settlement', 'gateway-dispatch': 'dispatch' };
  const topics = { 'gateway-settlement': Topics.attemptCompleted.name, 'gateway-dispatch': Topics.dispatchCommands.name };
  // every instance of the owner leaves the group, or the reset is refused while it has members
  const instancesOf = (g) => services.children.filter((c) => c.service.name === owners[g]).map((c) => c.name);
  for (const g of groups) for (const name of instancesOf(g)) await services.stopOne(name);
  const admin = new Kafka({ clientId: 'chaos', brokers: [brokers], logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    for (const g of groups) {
      for (let i = 0; ; i++) {
        try {
          await admin.resetOffsets({ groupId: g, topic: topics[g], earliest: true });
          break;
        } catch (err) {
          // The group needs a moment to notice its member left.
          if (i > 40) throw err;
          await sleep(500);
        }
      }
      log(`replay: ${g} reset to earliest on ${topics[g]}`);
    }
  } finally {
    await admin.disconnect();
  }
  for (const g of groups) for (const name of instancesOf(g)) await services.startOne(name);
}

async function waitForLag(brokers, groupId, topic) {
  if (!(await lagZero(brokers, groupId, topic))) violate(`${groupId} did not catch up on ${topic} within 60 s`);
}

async function waitHealthy(services, env, when) {
  for (const name of await unhealthyServices(services, env)) violate(`${name} not healthy ${when}`);
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[chaos] ${err.stack ?? err}`);
    console.log('chaos: 0 passed, 1 failed');
    process.exit(1);
  },
);

/**
 * Every new transaction read-only, server-wide (`default_transaction_read_only`, reloaded): what a
 * managed database does when its storage is full, or a failover onto a standby. Each write fails
 * with 25006; reads go on. The session that turns it off first sets its own value back, since
 * ALTER SYSTEM is refused inside a read-only transaction.
 */
async function setReadOnly(db, on) {
  const c = await db.connect();
  try {
    await c.query('SET default_transaction_read_only = off');
    await c.query(on ? 'ALTER SYSTEM SET default_transaction_read_only = on' : 'ALTER SYSTEM RESET default_transaction_read_only');
    await c.query('SELECT pg_reload_conf()');
  } finally {
    c.release();
  }
}
