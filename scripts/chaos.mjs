#!/usr/bin/env node
// `npm run chaos`: fault injection against a whole stack of its own (own database, broker and
// ports; loopback only; bounded in time; stops by itself).
//
// A mixed load (OpenAI and Gemini dialects, whole and streamed, some routes that withhold usage or
// cut their streams, one workload with a tight budget) runs while faults are injected: kill -9 of
// every service in turn (the supervisor restarts them), a broker stop and start, Postgres
// connections terminated (pg_terminate_backend). After the load, consumer offsets of settlement and
// dispatch are reset to earliest (a full replay of two topics). Then the invariants are checked
// with SQL and the public topics:
//   - pending + unresolved + settled <= budget for every account, at every sample
//   - one ledger row per settled attempt, none duplicated, none for an unsettled attempt
//   - every attempt without usage has a reconciliation case
//   - no action non-terminal past its deadline + grace
//   - the ledger is unchanged by the replay
//   - the settled topic's sum equals the ledger's
//   - no client waited longer than its deadline + 2 s; every service healthy again at the end
// It prints a table and exits non-zero on any violation.
//
//   node scripts/chaos.mjs [--short] [--seconds=N] [--rate=N] [--seed=N] [--report=FILE]
//
// `--short` is the version `npm test` runs (fewer faults, ~30 s of load).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { startKafka } from './kafka.mjs';
import { ensurePostgres, recreateDatabase } from './postgres.mjs';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { contentKey, ROOT, runTs, sleep, startServices } from './services.mjs';

const args = Object.fromEntries(
  process.argv
    .slice(2)
    .filter((a) => a.startsWith('--'))
    .map((a) => {
      const [k, v] = a.slice(2).split('=');
      return [k, v ?? 'true'];
    }),
);
const SHORT = args.short === 'true';
const LOAD_SECONDS = Number(args.seconds ?? (SHORT ? 30 : 120));
const RATE = Number(args.rate ?? (SHORT ? 8 : 20));
const SEED = Number(args.seed ?? 42);
const PORT_BASE = Number(process.env.CHAOS_PORT_BASE ?? 23000);
const KAFKA_PORT = Number(process.env.CHAOS_KAFKA_PORT ?? 29092);
const DEADLINE_MS = 4000;
const CLIENT_SLACK_MS = 2000;
const ORPHAN_GRACE_MS = 2000;

const require = createRequire(import.meta.url);
process.env.SWC_NODE_PROJECT = path.join(ROOT, 'tsconfig.json');
require('@swc-node/register');
const { Topics } = require('@gateway/contracts');
const { Kafka, logLevel } = require('kafkajs');

const t0 = Date.now();
const log = (msg) => console.log(`[chaos ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${msg}`);

/** Deterministic pseudo-random numbers (mulberry32), so a seed reproduces the same load mix. */
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const violations = [];
const violate = (what) => {
  violations.push(what);
  log(`VIOLATION: ${what}`);
};

async function main() {
  await ensurePrismaClient({ quiet: true });
  const stops = [];
  const cleanup = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  };
  process.on('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    return await run(stops);
  } finally {
    await cleanup();
  }
}

async function run(stops) {
  const pgServer = await ensurePostgres({ database: process.env.CHAOS_DB ?? 'gateway_chaos', log });
  stops.push(pgServer.stop);
  await recreateDatabase(pgServer.url);
  const dataDir = path.join(ROOT, '.local', 'kafka', `chaos-${KAFKA_PORT}`);
  let kafka = await startKafka({ port: KAFKA_PORT, dataDir, fresh: true, log });
  stops.push(() => kafka.stop());
  const logDir = path.join(ROOT, '.local', 'chaos-logs');
  fs.rmSync(logDir, { recursive: true, force: true });
  const env = {
    ...process.env,
    DATABASE_URL: pgServer.url,
    KAFKA_BROKERS: kafka.brokers,
    GATEWAY_CONTENT_KEY: contentKey(),
    ADMISSION_PORT: String(PORT_BASE),
    POLICY_PORT: String(PORT_BASE + 1),
    DISPATCH_PORT: String(PORT_BASE + 2),
    SETTLEMENT_PORT: String(PORT_BASE + 3),
    RECONCILIATION_PORT: String(PORT_BASE + 4),
    PROVIDER_SIM_PORT: String(PORT_BASE + 10),
    GATEWAY_INSTANCE_ID: '',
    RECONCILIATION_SWEEP_MS: '1000',
    RECONCILIATION_ORPHAN_GRACE_MS: String(ORPHAN_GRACE_MS),
    LOG_LEVEL: 'warn',
    GATEWAY_UPSTREAM_ALLOWLIST: '127.0.0.1',
  };
  delete env.GATEWAY_INSTANCE_ID;
  log('migrating');
  await runTs('libs/db/src/migrations/migrate.cli.ts', env);
  const seeded = JSON.parse(
    (await runTs('libs/testing/src/seed-chaos.cli.ts', { ...env, PROVIDER_SIM_URL: `http://127.0.0.1:${PORT_BASE + 10}` }))
      .trim()
      .split('\n')
      .pop(),
  );
  log('starting services under the supervisor');
  const services = await startServices({ env, logDir, supervise: true, log: (m) => log(`supervisor: ${m}`) });
  stops.push(services.stop);
  const db = new pg.Pool({ connectionString: pgServer.url, max: 3 });
  stops.push(() => db.end());

  // ------------------------------------------------------------ load, faults, budget samples
  const admission = `http://127.0.0.1:${PORT_BASE}`;
  const outcomes = new Map();
  const count = (k) => outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
  let maxWaitMs = 0;
  const random = rng(SEED);
  const inFlight = new Set();
  const loadUntil = Date.now() + LOAD_SECONDS * 1000;
  const faults = [];
  let sampling = true;
  let samples = 0;
  const sampler = (async () => {
    while (sampling) {
      samples += 1;
      await checkBudgets(db, 'sample').catch((err) => count(`sampler_error:${err.code ?? err.message.slice(0, 40)}`));
      await sleep(1000);
    }
  })();

  const schedule = faultSchedule(LOAD_SECONDS);
  const t0Load = Date.now();
  const faultRunner = (async () => {
    for (const f of schedule) {
      const wait = t0Load + f.at * 1000 - Date.now();
      if (wait > 0) await sleep(wait);
      log(`fault: ${f.name}`);
      try {
        kafka = (await f.run({ services, logDir, kafka, dataDir, db, dbName: new URL(pgServer.url).pathname.slice(1) })) ?? kafka;
        faults.push({ name: f.name, ok: true });
      } catch (err) {
        faults.push({ name: f.name, ok: false, error: err.message });
        violate(`fault ${f.name} could not be injected: ${err.message}`);
      }
    }
  })();

  log(`load: ${RATE} req/s for ${LOAD_SECONDS} s`);
  let sent = 0;
  while (Date.now() < loadUntil) {
    const due = t0Load + (sent * 1000) / RATE;
    if (due > Date.now()) await sleep(due - Date.now());
    sent += 1;
    const p = oneRequest(admission, pick(random, seeded), count).then((ms) => {
      maxWaitMs = Math.max(maxWaitMs, ms);
    });
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }
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
  const topic = await settledTopicSum(kafka.brokers);
  if (topic.sum !== after.sum || topic.attempts !== after.rows) {
    violate(`settled topic (${topic.attempts} attempts, ${topic.sum} micro-USD) differs from the ledger (${after.rows}, ${after.sum})`);
  }
  if (maxWaitMs > DEADLINE_MS + CLIENT_SLACK_MS) violate(`a client waited ${maxWaitMs} ms (deadline ${DEADLINE_MS} + ${CLIENT_SLACK_MS})`);
  const restarts = services.children.map((c) => `${c.service.name}:${c.restarts}`).join(' ');

  // ------------------------------------------------------------ report
  const table = [
    ['load', `${sent} requests at ${RATE}/s for ${LOAD_SECONDS} s, seed ${SEED}`],
    ['faults', faults.map((f) => `${f.name}${f.ok ? '' : ' (FAILED)'}`).join(', ')],
    ['supervisor restarts', restarts],
    ...[...outcomes.entries()].sort().map(([k, v]) => [`  ${k}`, String(v)]),
    ['max client wait', `${maxWaitMs} ms (limit ${DEADLINE_MS + CLIENT_SLACK_MS})`],
    ['budget samples', `${samples} (every account, pending + unresolved + settled <= budget)`],
    ['ledger', `${after.rows} rows, ${after.sum} micro-USD; replay ${before.digest === after.digest ? 'changed nothing' : 'CHANGED IT'}`],
    ['settled topic', `${topic.attempts} attempts, ${topic.sum} micro-USD, ${topic.duplicates} duplicate deliveries`],
    ['cases', String((await db.query(`SELECT count(*)::int AS n FROM reconciliation_case`)).rows[0].n)],
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
    name: `kill -9 ${name}`,
    run: async ({ logDir }) => {
      const pid = Number(fs.readFileSync(path.join(logDir, `${name}.pid`), 'utf8'));
      process.kill(pid, 'SIGKILL');
    },
  });
  const brokerRestart = {
    name: 'broker stop/start',
    run: async ({ kafka, dataDir }) => {
      await kafka.stop();
      await sleep(4000);
      return startKafka({ port: KAFKA_PORT, dataDir, log: () => undefined });
    },
  };
  const pgKill = {
    name: 'pg_terminate_backend',
    run: async ({ db, dbName }) => {
      const r = await db.query(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
        [dbName],
      );
      log(`terminated ${r.rows[0].n} backends`);
    },
  };
  const list = SHORT
    ? [kill('dispatch'), kill('settlement'), brokerRestart, pgKill]
    : [
        kill('dispatch'),
        kill('settlement'),
        kill('admission'),
        kill('reconciliation'),
        kill('policy'),
        brokerRestart,
        pgKill,
        kill('dispatch'),
      ];
  const step = seconds / (list.length + 1);
  return list.map((f, i) => ({ ...f, at: Math.round(step * (i + 1)) }));
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

/** One client request; returns how long the client waited. Outcomes are counted by class. */
async function oneRequest(base, r, count) {
  const started = Date.now();
  const signal = AbortSignal.timeout(DEADLINE_MS + CLIENT_SLACK_MS + 500);
  const label = `${r.kind}${r.stream ? ' stream' : ''}`;
  try {
    const res =
      r.kind === 'openai'
        ? await fetch(`${base}/v1/chat/completions`, {
            method: 'POST',
            signal,
            headers: { authorization: `Bearer ${r.key}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: r.model, stream: r.stream, messages: [{ role: 'user', content: 'chaos says hello' }] }),
          })
        : await fetch(`${base}/v1beta/models/${r.model}:${r.stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`, {
            method: 'POST',
            signal,
            headers: { 'x-goog-api-key': r.key, 'content-type': 'application/json' },
            body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'chaos says hello' }] }] }),
          });
    const body = await res.text();
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
  } catch (err) {
    count(`${label} ${err.name === 'TimeoutError' ? 'client timeout' : `connection error (${err.cause?.code ?? err.name})`}`);
  }
  return Date.now() - started;
}

async function checkBudgets(db, when) {
  const { rows } = await db.query(
    `SELECT id, budget_microusd::text AS b, pending_microusd::text AS p, unresolved_microusd::text AS u, settled_microusd::text AS s
     FROM budget_account
     WHERE pending_microusd + unresolved_microusd + settled_microusd > budget_microusd
        OR pending_microusd < 0 OR unresolved_microusd < 0 OR settled_microusd < 0`,
  );
  for (const r of rows) violate(`${when}: account ${r.id} pending ${r.p} + unresolved ${r.u} + settled ${r.s} vs budget ${r.b}`);
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
  const until = Date.now() + DEADLINE_MS + ORPHAN_GRACE_MS + 40_000;
  while (Date.now() < until) {
    const { rows } = await db.query(`SELECT
      (SELECT count(*) FROM attempt WHERE status IN ('claimed', 'in_flight', 'succeeded', 'failed', 'cancelled', 'usage_missing'))::int AS a,
      (SELECT count(*) FROM action WHERE status IN ('received', 'admitted', 'dispatched'))::int AS b,
      (SELECT count(*) FROM outbox_message WHERE published_at IS NULL)::int AS c`);
    if (rows[0].a === 0 && rows[0].b === 0 && rows[0].c === 0) return;
    await sleep(500);
  }
  log('quiesce: still busy at the limit; checking anyway');
}

async function ledgerSnapshot(db) {
  const { rows } = await db.query(`SELECT count(*)::int AS rows, COALESCE(sum(cost_microusd), 0)::text AS sum,
    md5(COALESCE(string_agg(attempt_id || ':' || cost_microusd || ':' || usage_source, ',' ORDER BY attempt_id), '')) AS digest
    FROM ledger_entry`);
  return { rows: rows[0].rows, sum: rows[0].sum, digest: rows[0].digest };
}

/** Offsets of the groups reset to earliest while their services are down: every event is delivered again. */
async function replay(services, brokers, groups) {
  const owners = { 'gateway-settlement': 'settlement', 'gateway-dispatch': 'dispatch' };
  const topics = { 'gateway-settlement': Topics.attemptCompleted.name, 'gateway-dispatch': Topics.dispatchCommands.name };
  for (const g of groups) await services.stopOne(owners[g]);
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
  for (const g of groups) await services.startOne(owners[g]);
}

async function waitForLag(brokers, groupId, topic) {
  const admin = new Kafka({ clientId: 'chaos', brokers: [brokers], logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const until = Date.now() + 60_000;
    while (Date.now() < until) {
      const ends = await admin.fetchTopicOffsets(topic);
      const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
      const lag = ends.reduce((sum, e) => {
        const c = committed.partitions.find((p) => p.partition === e.partition);
        const at = c && Number(c.offset) >= 0 ? Number(c.offset) : 0;
        return sum + (Number(e.high) - at);
      }, 0);
      if (lag === 0) return;
      await sleep(500);
    }
    violate(`${groupId} did not catch up on ${topic} within 60 s`);
  } finally {
    await admin.disconnect();
  }
}

/** Reads the whole settled topic; finance counts each attempt once. */
async function settledTopicSum(brokers) {
  const kafka = new Kafka({ clientId: 'chaos-finance', brokers: [brokers], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(Topics.usageSettled.name);
  await admin.disconnect();
  const target = new Map(ends.map((e) => [e.partition, Number(e.high)]));
  const byAttempt = new Map();
  let deliveries = 0;
  if ([...target.values()].every((h) => h === 0)) return { attempts: 0, sum: '0', duplicates: 0 };
  const consumer = kafka.consumer({ groupId: `chaos-finance-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic: Topics.usageSettled.name, fromBeginning: true });
  const seen = new Map();
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('settled topic not read within 60 s')), 60_000);
    consumer
      .run({
        eachMessage: async ({ partition, message }) => {
          deliveries += 1;
          const e = JSON.parse(message.value.toString('utf8'));
          byAttempt.set(e.attempt_id, BigInt(e.cost_microusd));
          seen.set(partition, Number(message.offset) + 1);
          if ([...target.entries()].every(([p, h]) => h === 0 || (seen.get(p) ?? 0) >= h)) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  const sum = [...byAttempt.values()].reduce((a, b) => a + b, 0n);
  return { attempts: byAttempt.size, sum: sum.toString(), duplicates: deliveries - byAttempt.size };
}

async function waitHealthy(services, env, when) {
  const until = Date.now() + 60_000;
  for (const c of services.children) {
    const port = Number(env[c.service.portEnv]);
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) })
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) break;
      if (Date.now() > until) {
        violate(`${c.service.name} not healthy ${when}`);
        break;
      }
      await sleep(500);
    }
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[chaos] ${err.stack ?? err}`);
    console.log('chaos: 0 passed, 1 failed');
    process.exit(1);
  },
);
