#!/usr/bin/env node
// `npm run simulate-day`: one simulated day with faults, then the provider's export for it imported
// and reconciled to the micro-dollar (issue 15). A stack of its own (own database, broker and ports;
// loopback only; seeded; stops by itself).
//
// The day: N actions (default 10,000) at a fixed rate through the official `openai` and
// `@google/genai` SDKs, across three workloads and nine provider-sim routes:
//   10 %   a heavy-tailed route with a hedge policy (hedges fire, losers are aborted)
//    2 %   a route that withholds usage (`no-usage`)
//    1 %   streams the provider cuts before usage (`cut-stream`)
//    0.5 % answers with one candidate more than asked (`extra=1`)
//    1 %   a flaky route whose first answer per body is a 503 (the gateway retries)
//    0.5 % a route that is down (the gateway falls back to the workload's fallback chain)
//   10 %   Gemini (`@google/genai`, some streamed), 3 % a workload whose budget runs out, the rest
//          plain chat completions (a fifth streamed)
// and one `kill -9` of dispatch half-way (the supervisor restarts it, as `npm run chaos` does).
// Every second the budget accounts are sampled: settled / unresolved / reserved, never summed into
// one figure, and pending + unresolved + settled <= budget must hold at every sample.
//
// Then: settlement drains, the sim's export for the day (`GET /_sim/export`) is imported through
// `npm run report -- import`, reconciliation sweeps, and the day's report is printed. Must hold
// (exit code 1 otherwise):
//   - no export line is unmatched; every attempt the provider billed has exactly one ledger row
//   - ledger total = the export's total priced at each attempt's price revision, to the micro-USD
//   - no unresolved exposure remains, or each remaining item is listed with its reason
//   - importing the export again changes nothing (ledger digest, cases)
//   - the finance consumer's totals (examples/finance-consumer, from the topic) equal the ledger's
//
//   node scripts/simulate-day.mjs [--actions=N] [--rate=N] [--seed=N] [--report=FILE.json]
// Environment: SIMDAY_ACTIONS, SIMDAY_RATE, SIMDAY_SEED; SIMDAY_PORT_BASE, SIMDAY_KAFKA_PORT,
// SIMDAY_DB to keep it apart from other stacks on the machine.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { ROOT, numberArg, runTs, scriptArgs, sleep, startOwnInfra, startServices, tsRequire, withStops } from './services.mjs';
import {
  ledgerSnapshot,
  overBudgetAccounts,
  quiesce,
  rng,
  settledTopicSum,
  sweptOutboxRows,
  unhealthyServices,
  waitForLag,
} from './stack-checks.mjs';

const args = scriptArgs();
const ACTIONS = numberArg(args, 'actions', process.env.SIMDAY_ACTIONS ?? 10_000, 1);
const RATE = numberArg(args, 'rate', process.env.SIMDAY_RATE ?? 40, 1);
const SEED = numberArg(args, 'seed', process.env.SIMDAY_SEED ?? 15);
const PORT_BASE = Number(process.env.SIMDAY_PORT_BASE ?? 24500);
const KAFKA_PORT = Number(process.env.SIMDAY_KAFKA_PORT ?? 29392);
const SWEEP_MS = 1000;
const ORPHAN_GRACE_MS = 2000;

const require = tsRequire();
const { Topics } = require('@gateway/contracts');
const { default: OpenAI } = await import('openai');
const { GoogleGenAI } = await import('@google/genai');

const t0 = Date.now();
const log = (msg) => console.log(`[simday ${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${msg}`);
const violations = [];
const violate = (what) => {
  violations.push(what);
  log(`VIOLATION: ${what}`);
};

async function main() {
  if (!Number.isInteger(ACTIONS) || ACTIONS < 1) throw new Error(`actions must be a positive integer, not ${ACTIONS}`);
  await ensurePrismaClient({ quiet: true });
  return withStops(run);
}

async function run(stops) {
  const database = process.env.SIMDAY_DB ?? 'gateway_simday';
  // The day owns its database and broker. A DATABASE_URL from the environment (the e2e tier sets
  // its stack's) names only the server to use, never the database, or the day would drop that
  // stack's; a KAFKA_BROKERS is not reused, or that stack's dispatch and settlement (same consumer
  // groups) would take part of the day's commands and attempts into their own database.
  delete process.env.KAFKA_BROKERS;
  if (process.env.DATABASE_URL) {
    const url = new URL(process.env.DATABASE_URL);
    url.pathname = `/${database}`;
    process.env.DATABASE_URL = url.toString();
  }
  const infra = await startOwnInfra({
    name: 'simday',
    database,
    kafkaPort: KAFKA_PORT,
    portBase: PORT_BASE,
    extraEnv: {
      RECONCILIATION_SWEEP_MS: String(SWEEP_MS),
      RECONCILIATION_ORPHAN_GRACE_MS: String(ORPHAN_GRACE_MS),
      // the day is over once the stack is quiet: an attempt whose case is 2 s old has ended
      RECONCILIATION_EXPORT_COMPLETE_GRACE_MS: String(ORPHAN_GRACE_MS),
      LOG_LEVEL: 'warn',
      PROVIDER_SIM_SEED: String(SEED),
    },
    stops,
    log,
  });
  const { pgServer, logDir, env, kafka } = infra;
  stops.push(() => kafka.stop());
  const simUrl = `http://127.0.0.1:${PORT_BASE + 10}`;
  const admission = `http://127.0.0.1:${PORT_BASE}`;
  const reconciliation = `http://127.0.0.1:${PORT_BASE + 4}`;
  const seeded = JSON.parse(
    (await runTs('libs/testing/src/seed-simday.cli.ts', { ...env, PROVIDER_SIM_URL: simUrl })).trim().split('\n').pop(),
  );
  log('starting services under the supervisor');
  const services = await startServices({ env, logDir, supervise: true, log: (m) => log(`supervisor: ${m}`), stops });
  const db = new pg.Pool({ connectionString: pgServer.url, max: 3 });
  stops.push(() => db.end());

  // ------------------------------------------------------------ the day: load, one kill, samples
  const clients = {
    apps: new OpenAI({ apiKey: seeded.appsKey, baseURL: `${admission}/v1`, maxRetries: 0, timeout: 20_000 }),
    tight: new OpenAI({ apiKey: seeded.tightKey, baseURL: `${admission}/v1`, maxRetries: 0, timeout: 20_000 }),
    gemini: new GoogleGenAI({ apiKey: seeded.geminiKey, httpOptions: { baseUrl: admission, timeout: 20_000 } }),
  };
  const days = new Set([utcDay(new Date())]);
  const outcomes = new Map();
  const count = (k) => outcomes.set(k, (outcomes.get(k) ?? 0) + 1);
  const random = rng(SEED);
  const samples = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        samples.push(await exposureSample(db));
        for (const v of await overBudgetAccounts(db)) violate(`sample ${samples.length}: ${v}`);
        if (samples.length % 15 === 1) log(`exposure ${formatExposure(samples[samples.length - 1])}`);
      } catch (err) {
        count(`sampler error ${err.code ?? err.message.slice(0, 40)}`);
      }
      await sleep(1000);
    }
  })();

  // warm-up: the day starts once every client has had one answer (consumer groups joined)
  for (const a of [
    { kind: 'warm-up', client: 'apps', model: 'day-chat' },
    { kind: 'warm-up', client: 'gemini', model: 'day-gemini' },
  ]) {
    const until = Date.now() + 60_000;
    while ((await oneAction(clients, { ...a, i: -1, stream: false }, () => undefined)) !== 'ok' && Date.now() < until) await sleep(500);
  }
  log(`the day: ${ACTIONS} actions at ${RATE}/s (seed ${SEED})`);
  const inFlight = new Set();
  const t0Load = Date.now();
  let killed = null;
  for (let i = 0; i < ACTIONS; i++) {
    const due = t0Load + (i * 1000) / RATE;
    if (due > Date.now()) await sleep(due - Date.now());
    if (i === Math.floor(ACTIONS / 2)) {
      const pid = Number(fs.readFileSync(path.join(logDir, 'dispatch.pid'), 'utf8'));
      process.kill(pid, 'SIGKILL');
      killed = { at: i, pid };
      log(`kill -9 dispatch (pid ${pid}) after ${i} actions`);
    }
    const p = oneAction(clients, pick(random, i), count);
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
  }
  await Promise.allSettled([...inFlight]);
  const loadSeconds = (Date.now() - t0Load) / 1000;
  days.add(utcDay(new Date()));
  log(
    `load done: ${ACTIONS} actions in ${loadSeconds.toFixed(0)} s (load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')})`,
  );

  // ------------------------------------------------------------ settlement drains
  for (const name of await unhealthyServices(services, env)) violate(`${name} not healthy after the day`);
  if (!(await waitForLag(kafka.brokers, 'gateway-settlement', Topics.attemptCompleted.name))) violate('settlement did not catch up');
  if (!(await settled(db))) violate('the stack did not quiesce within 180 s after the day');
  sampling = false;
  await sampler;
  for (const v of await overBudgetAccounts(db)) violate(`final: ${v}`);
  const beforeImport = await dayState(db);
  log(
    `before the import: ledger ${beforeImport.ledger.rows} rows, ${beforeImport.ledger.sum} micro-USD; open cases ${beforeImport.openCases.length}`,
  );

  // ------------------------------------------------------------ the provider's export, imported
  const exportFile = path.join(ROOT, '.local', `simday-export-${SEED}.jsonl`);
  let exportText = '';
  for (const day of [...days].sort()) {
    const res = await fetch(`${simUrl}/_sim/export?day=${day}&format=jsonl`);
    if (!res.ok) throw new Error(`GET /_sim/export?day=${day} answered ${res.status}`);
    exportText += await res.text();
  }
  fs.writeFileSync(exportFile, exportText);
  const lines = exportText
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  log(`the sim's export: ${lines.length} billed requests (${exportFile})`);
  const importEnv = { ...process.env, GATEWAY_OPERATOR_TOKEN: seeded.operatorToken, RECONCILIATION_URL: reconciliation };
  // The sim's export is its whole log for the day, for every route of the day (one provider
  // account): the import states it complete, so attempts it has no line for are settled at zero.
  const complete = { days: [...days].sort(), routes: seeded.routes };
  const first = await importExport(exportFile, importEnv, complete);
  log(`import 1: ${JSON.stringify(first.counts)}`);
  // reconciliation sweeps; the import's settlements are published through the outbox
  await sleep(3 * SWEEP_MS);
  if (!(await quiesce(db, 60_000))) violate('the stack did not quiesce after the import');
  const afterFirst = await dayState(db);
  const second = await importExport(exportFile, importEnv, complete);
  log(`import 2: ${JSON.stringify(second.counts)}`);
  await sleep(3 * SWEEP_MS);
  await quiesce(db, 30_000);
  const afterSecond = await dayState(db);

  // ------------------------------------------------------------ what must hold
  const simSaw = await simRequestsByAttempt(simUrl);
  const unmatched = first.results.filter((r) => r.outcome === 'unmatched');
  for (const r of unmatched.slice(0, 20)) violate(`export line ${r.line} (${r.provider_request_id}) matches no attempt`);
  if (unmatched.length > 20) violate(`… and ${unmatched.length - 20} more unmatched lines`);
  for (const r of first.results.filter((x) => x.outcome === 'mismatch' || x.outcome === 'refused' || x.outcome === 'pending').slice(0, 20))
    violate(`export line ${r.line} (${r.provider_request_id}): ${r.outcome}${r.detail ? ` (${r.detail})` : ''}`);
  for (const i of first.invalid) violate(`export line ${i.line} invalid: ${i.message}`);

  const billing = await billedAttempts(db, lines);
  for (const m of billing.problems.slice(0, 20)) violate(m);
  if (billing.problems.length > 20) violate(`… and ${billing.problems.length - 20} more billed attempts without exactly one ledger row`);
  const ledgerTotal = BigInt(afterSecond.ledger.sum);
  const exportTotal = BigInt(second.export_cost_microusd);
  if (ledgerTotal !== exportTotal) {
    violate(
      `ledger total ${ledgerTotal} micro-USD ≠ provider export total ${exportTotal} micro-USD (difference ${ledgerTotal - exportTotal})`,
    );
    for (const r of billing.unbilledWithCost.slice(0, 10))
      violate(`ledger row for attempt ${r.attempt_id} (${r.usage_source}) costs ${r.cost} but the provider billed nothing for it`);
  }
  for (const c of afterSecond.openCases) {
    c.provider_side = providerSide(simSaw.get(c.attempt_id));
    log(`remaining unresolved: case ${c.id} (${c.reason}) attempt ${c.attempt_id}: ${c.exposure} micro-USD; provider: ${c.provider_side}`);
  }
  if (afterSecond.unresolvedMicrousd !== 0n && afterSecond.openCases.length === 0)
    violate(`unresolved exposure ${afterSecond.unresolvedMicrousd} micro-USD remains with no open case naming it`);
  for (const c of afterSecond.openCases.filter((x) => !x.reason)) violate(`case ${c.id} is open without a reason`);
  if (second.counts.resolved) violate(`the second import resolved ${second.counts.resolved} lines again`);
  const zeroFirst = first.completions.flatMap((c) => c.settled_at_zero);
  const zeroSecond = second.completions.flatMap((c) => c.settled_at_zero);
  if (zeroSecond.length > 0) violate(`stating the export complete again settled ${zeroSecond.length} more attempts at zero`);
  if (afterSecond.unresolvedMicrousd !== 0n)
    violate(`unresolved exposure ${afterSecond.unresolvedMicrousd} micro-USD remains after the export was stated complete`);
  for (const c of first.completions.filter((x) => x.within_grace > 0 || x.refused.length > 0))
    violate(`export stated complete for ${c.day}: ${c.within_grace} attempts within the grace period, ${c.refused.length} refused`);
  // each attempt settled at zero, with what the provider's side says about it (why it has no line)
  const settledAtZero = zeroFirst.map((z) => ({ ...z, provider_side: providerSide(simSaw.get(z.attempt_id)) }));
  for (const z of settledAtZero) {
    log(
      `settled at zero (export complete, no line): attempt ${z.attempt_id} case ${z.case_id} (${z.case_reason}); provider: ${z.provider_side}`,
    );
    if (billedBySim(simSaw.get(z.attempt_id))) violate(`attempt ${z.attempt_id} settled at zero but the sim billed it`);
  }
  if (afterFirst.ledger.digest !== afterSecond.ledger.digest)
    violate(`the second import changed the ledger (${afterFirst.ledger.rows}→${afterSecond.ledger.rows} rows)`);
  if (afterFirst.casesDigest !== afterSecond.casesDigest) violate('the second import changed the reconciliation cases');

  const topic = await settledTopicSum(kafka.brokers);
  const swept = await sweptOutboxRows(services, env);
  const atTopic = await ledgerSnapshot(db);
  if (atTopic.digest !== afterSecond.ledger.digest)
    violate(
      `the ledger moved after the second import (${afterSecond.ledger.rows}→${atTopic.rows} rows, ${afterSecond.ledger.sum}→${atTopic.sum})`,
    );
  if (topic.sum !== afterSecond.ledger.sum || topic.attempts !== afterSecond.ledger.rows)
    violate(
      `settled topic (${topic.attempts} attempts, ${topic.sum} micro-USD) differs from the ledger (${afterSecond.ledger.rows}, ${afterSecond.ledger.sum})`,
    );
  const finance = await financeConsumerTotals({ env, logDir, days: [...days], ledger: afterSecond.ledger, db, stops });
  if (finance.sum !== afterSecond.ledger.sum || finance.attempts !== afterSecond.ledger.rows)
    violate(
      `finance consumer (${finance.attempts} attempts, ${finance.sum} micro-USD) differs from the ledger (${afterSecond.ledger.rows}, ${afterSecond.ledger.sum})`,
    );

  // ------------------------------------------------------------ the day's report
  const last = samples[samples.length - 1];
  const attempts = await attemptMix(db);
  const table = [
    ['the day', `${ACTIONS} actions at ${RATE}/s in ${loadSeconds.toFixed(0)} s, seed ${SEED}; load average ${os.loadavg()[0].toFixed(1)}`],
    [
      'fault',
      killed
        ? `kill -9 dispatch after ${killed.at} actions; restarts ${services.children.find((c) => c.name === 'dispatch').restarts}`
        : 'none',
    ],
    ...[...outcomes.entries()].sort().map(([k, v]) => [`  ${k}`, String(v)]),
    ['attempts', attempts],
    [
      'exposure samples',
      `${samples.length}, pending + unresolved + settled <= budget at each (violations: ${violations.filter((v) => v.startsWith('sample')).length})`,
    ],
    ['  last sample', last ? formatExposure(last) : '-'],
    ['  before import', formatExposure(beforeImport.exposure)],
    ['  after import', formatExposure(afterSecond.exposure)],
    ['provider export', `${lines.length} lines, ${exportTotal} micro-USD priced at each attempt's revision`],
    ['import 1', formatCounts(first)],
    [
      'import 2',
      `${formatCounts(second)}; ledger ${afterFirst.ledger.digest === afterSecond.ledger.digest ? 'unchanged' : 'CHANGED'}, cases ${afterFirst.casesDigest === afterSecond.casesDigest ? 'unchanged' : 'CHANGED'}`,
    ],
    [
      'ledger',
      `${afterSecond.ledger.rows} rows, ${afterSecond.ledger.sum} micro-USD (${ledgerTotal === exportTotal ? '= export' : `export ${exportTotal}`})`,
    ],
    [
      'billed attempts',
      `${billing.billed} billed, ${billing.withOneRow} with exactly one ledger row; ${billing.unbilledRows} ledger rows the provider did not bill (${billing.unbilledWithCost.length} with a cost)`,
    ],
    [
      'settled at zero',
      `${settledAtZero.length} attempts with no line in the export stated complete (${complete.days.join(', ')}): ${remainingSummary(settledAtZero.map((z) => ({ reason: z.case_reason, provider_side: z.provider_side, exposure: z.released_microusd })))}`,
    ],
    ['unresolved remaining', `${afterSecond.unresolvedMicrousd} micro-USD; ${remainingSummary(afterSecond.openCases)}`],
    ['settled topic', `${topic.attempts} attempts, ${topic.sum} micro-USD`],
    ['  duplicate deliveries', `${topic.duplicates} (an event id read again; ${topic.events} distinct events)`],
    [
      'outbox sweep',
      `${swept[Topics.usageSettled.name] ?? 0} settled events published by the sweep, ${Object.values(swept).reduce((a, b) => a + b, 0)} messages of all topics (recoveries after a lost mark or send)`,
    ],
    ['finance consumer', `${finance.attempts} attempts, ${finance.sum} micro-USD`],
    ['violations', violations.length === 0 ? 'none' : String(violations.length)],
  ];
  const width = Math.max(...table.map(([k]) => k.length));
  console.log(`\n${table.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n')}\n`);
  for (const v of violations) console.log(`  ${v}`);
  if (args.report) {
    const summary = {
      actions: ACTIONS,
      seed: SEED,
      export_lines: lines.length,
      export_total_microusd: exportTotal.toString(),
      ledger: afterSecond.ledger,
      first_import: first.counts,
      second_import: second.counts,
      second_import_changed_ledger: afterFirst.ledger.digest !== afterSecond.ledger.digest,
      billed_attempts: billing.billed,
      billed_with_one_row: billing.withOneRow,
      open_cases: afterSecond.openCases,
      unresolved_microusd: afterSecond.unresolvedMicrousd.toString(),
      settled_at_zero: settledAtZero,
      duplicate_deliveries: topic.duplicates,
      outbox_swept: swept,
      samples: samples.length,
      topic,
      finance,
      outcomes: Object.fromEntries(outcomes),
      violations,
    };
    fs.writeFileSync(
      path.resolve(args.report),
      JSON.stringify(summary, (_k, v) => (typeof v === 'bigint' ? v.toString() : v), 2),
    );
  }
  console.log(`simulate-day: ${violations.length === 0 ? 1 : 0} passed, ${violations.length === 0 ? 0 : 1} failed`);
  return violations.length === 0 ? 0 : 1;
}

const utcDay = (d) => d.toISOString().slice(0, 10);

/**
 * Quiet, and no new action for 5 s: a request whose client gave up (the SDK's timeout) while it
 * waited in admission's queue on a saturated machine is still admitted and dispatched afterwards,
 * and the export must not be fetched before the provider has seen it.
 */
async function settled(db) {
  const until = Date.now() + 180_000;
  const newest = async () => (await db.query(`SELECT count(*)::int AS n FROM action`)).rows[0].n;
  while (Date.now() < until) {
    if (!(await quiesce(db, until - Date.now()))) return false;
    const before = await newest();
    await sleep(5000);
    if ((await newest()) === before && (await quiesce(db, 1))) return true;
  }
  return false;
}

/** Which client, route and mode one action of the day uses (the issue's mix). */
function pick(random, i) {
  const r = random();
  const stream = random() < 0.2;
  const base = { i, stream: false, client: 'apps' };
  if (r < 0.1) return { ...base, kind: 'hedge-eligible', model: 'day-tail' };
  if (r < 0.12) return { ...base, kind: 'no-usage', model: 'day-no-usage' };
  if (r < 0.13) return { ...base, kind: 'cut stream', model: 'day-cut', stream: true };
  if (r < 0.135) return { ...base, kind: 'extra candidate', model: 'day-extra' };
  if (r < 0.145) return { ...base, kind: 'retry', model: 'day-flaky' };
  if (r < 0.15) return { ...base, kind: 'fallback', model: 'day-down' };
  if (r < 0.25) return { ...base, kind: 'gemini', client: 'gemini', model: 'day-gemini', stream };
  if (r < 0.28) return { ...base, kind: 'tight budget', client: 'tight', model: 'day-chat' };
  return { ...base, kind: 'chat', model: 'day-chat', stream };
}

/** One action through the official SDK; its outcome is counted by kind. */
async function oneAction(clients, a, count) {
  const text = `simulated day action ${a.i}: summarise the ledger in one line`;
  const label = `${a.kind}${a.stream ? ' (stream)' : ''}`;
  try {
    if (a.client === 'gemini') {
      const req = { model: a.model, contents: text };
      if (a.stream) {
        for await (const _chunk of await clients.gemini.models.generateContentStream(req));
      } else await clients.gemini.models.generateContent(req);
    } else {
      const client = clients[a.client];
      const body = { model: a.model, messages: [{ role: 'user', content: text }] };
      if (a.stream) {
        const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
        for await (const _chunk of stream);
      } else await client.chat.completions.create(body);
    }
    count(`${label}: ok`);
    return 'ok';
  } catch (err) {
    // the gateway's stable code (OpenAI SDK), else the HTTP status (Gemini SDK), else the error class
    const code = err.code ?? err.error?.code ?? err.status ?? err.constructor?.name ?? err.name;
    count(`${label}: ${code}`);
    return code;
  }
}

/** The budget accounts of the workloads, summed per part: settled, unresolved and reserved, never blended. */
async function exposureSample(db) {
  const { rows } = await db.query(`SELECT COALESCE(sum(settled_microusd), 0)::text AS settled,
    COALESCE(sum(unresolved_microusd), 0)::text AS unresolved, COALESCE(sum(pending_microusd), 0)::text AS reserved
    FROM budget_account WHERE scope = 'workload'`);
  return { at: new Date().toISOString(), ...rows[0] };
}

const formatExposure = (s) => `settled ${s.settled} / unresolved ${s.unresolved} / reserved ${s.reserved} micro-USD`;

const formatCounts = (r) =>
  `${r.lines} lines: ${['resolved', 'confirmed', 'mismatch', 'pending', 'unmatched', 'refused', 'invalid']
    .map((k) => `${k} ${r.counts[k] ?? 0}`)
    .join(', ')}`;

/** The ledger, the open cases, the cases' digest and the exposure, as one reading. */
async function dayState(db) {
  const ledger = await ledgerSnapshot(db);
  const open = await db.query(`SELECT id, reason, attempt_id, exposure_microusd::text AS exposure
    FROM reconciliation_case WHERE status = 'open' ORDER BY opened_at`);
  const cases = await db.query(`SELECT md5(COALESCE(string_agg(id || ':' || status || ':' || exposure_microusd, ',' ORDER BY id), '')) AS d
    FROM reconciliation_case`);
  const exposure = await exposureSample(db);
  return { ledger, openCases: open.rows, casesDigest: cases.rows[0].d, exposure, unresolvedMicrousd: BigInt(exposure.unresolved) };
}

/**
 * `npm run report -- import <file> --json --complete=DAY --routes=…` (the CLI finance uses), its
 * merged report, with the statement's outcome for each day in `completions`. A day that crossed
 * UTC midnight is stated for each day (the file imported again for the second: lines confirmed).
 */
async function importExport(file, env, complete) {
  const [firstDay, ...more] = complete.days;
  const report = await importOnce(file, env, [`--complete=${firstDay}`, `--routes=${complete.routes.join(',')}`]);
  const completions = [report.completion];
  for (const day of more)
    completions.push((await importOnce(file, env, [`--complete=${day}`, `--routes=${complete.routes.join(',')}`])).completion);
  return { ...report, completions };
}

function importOnce(file, env, extra) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['scripts/report.mjs', 'import', file, '--json', ...extra], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => {
      try {
        resolve(JSON.parse(out));
      } catch {
        reject(new Error(`report import exited ${code}: ${err}${out}`.slice(0, 2000)));
      }
    });
  });
}

/**
 * Each export line's attempt (by provider request id, else by the attempt id the request carried
 * as `x-client-request-id`) and its ledger rows: every billed attempt must have exactly one. Also
 * the ledger rows of attempts the provider did not bill (error answers: they must cost nothing).
 */
async function billedAttempts(db, lines) {
  const { rows: attempts } = await db.query(`SELECT id, provider_request_id FROM attempt`);
  const byRequest = new Map(attempts.filter((a) => a.provider_request_id).map((a) => [a.provider_request_id, a.id]));
  const ids = new Set(attempts.map((a) => a.id));
  const { rows: ledger } = await db.query(`SELECT attempt_id, usage_source, cost_microusd::text AS cost FROM ledger_entry`);
  const rowsOf = new Map();
  for (const r of ledger) rowsOf.set(r.attempt_id, (rowsOf.get(r.attempt_id) ?? 0) + 1);
  const problems = [];
  const billed = new Map();
  for (const l of lines) {
    const attempt =
      byRequest.get(l.provider_request_id) ?? (l.client_request_id && ids.has(l.client_request_id) ? l.client_request_id : null);
    if (!attempt) continue; // an unmatched line: reported by the import
    if (billed.has(attempt))
      problems.push(`attempt ${attempt} is billed by two export lines (${billed.get(attempt)}, ${l.provider_request_id})`);
    billed.set(attempt, l.provider_request_id);
  }
  let withOneRow = 0;
  for (const [attempt, requestId] of billed) {
    const n = rowsOf.get(attempt) ?? 0;
    if (n === 1) withOneRow += 1;
    else problems.push(`attempt ${attempt} (${requestId}) billed by the provider has ${n} ledger rows`);
  }
  const unbilled = ledger.filter((r) => !billed.has(r.attempt_id));
  return {
    billed: billed.size,
    withOneRow,
    problems,
    unbilledRows: unbilled.length,
    unbilledWithCost: unbilled.filter((r) => r.cost !== '0'),
  };
}

/** The sim's request log (its newest 10,000 requests) by the attempt id each request carried. */
async function simRequestsByAttempt(simUrl) {
  const body = await (await fetch(`${simUrl}/_sim/requests?since=0`)).json();
  return new Map(body.requests.filter((r) => r.clientRequestId).map((r) => [r.clientRequestId, r]));
}

/** What the provider did with an attempt whose case remains open (why no export line resolves it). */
function providerSide(entry) {
  if (!entry) return 'never received it (or beyond the sim log window): nothing billed, nothing to import';
  if (entry.aborted)
    return `received it, aborted ${entry.abortedAt ?? ''} after ${entry.abortedAfterMs} ms before generating anything: billed nothing`;
  return `received it (status ${entry.status}) and billed nothing`;
}

/** The sim answered the request whole (a 2xx it finished): then it is on the export, and no line means a bug. */
const billedBySim = (entry) => Boolean(entry && entry.status >= 200 && entry.status < 300 && !entry.aborted);

function remainingSummary(cases) {
  if (cases.length === 0) return 'none';
  const by = new Map();
  for (const c of cases) {
    const k = `${c.reason}: ${c.provider_side.split(':')[0]}`;
    const v = by.get(k) ?? { n: 0, microusd: 0n };
    by.set(k, { n: v.n + 1, microusd: v.microusd + BigInt(c.exposure) });
  }
  return [...by.entries()].map(([k, v]) => `${v.n} × ${k} (${v.microusd} micro-USD)`).join('; ');
}

async function attemptMix(db) {
  const { rows } = await db.query(`SELECT role, status, count(*)::int AS n FROM attempt GROUP BY role, status ORDER BY role, status`);
  return rows.map((r) => `${r.role}/${r.status} ${r.n}`).join(', ');
}

/**
 * The finance consumer example (examples/finance-consumer) started as a child process on the
 * settled topic, as finance would run it; its totals for the day(s), once they stop moving.
 */
async function financeConsumerTotals({ env, logDir, days, ledger, stops }) {
  const port = PORT_BASE + 20;
  const child = spawn(process.execPath, ['-r', '@swc-node/register', 'examples/finance-consumer/src/main.ts'], {
    cwd: ROOT,
    env: {
      ...env,
      SWC_NODE_PROJECT: path.join(ROOT, 'tsconfig.json'),
      FINANCE_DATABASE_URL: env.DATABASE_URL,
      FINANCE_DB_SCHEMA: 'finance_simday',
      FINANCE_CONSUMER_GROUP: `finance-simday-${Date.now()}`,
      FINANCE_CONSUMER_PORT: String(port),
      LOG_LEVEL: 'warn',
    },
    stdio: [
      'ignore',
      fs.openSync(path.join(logDir, 'finance-consumer.log'), 'a'),
      fs.openSync(path.join(logDir, 'finance-consumer.log'), 'a'),
    ],
  });
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
  };
  stops.push(stop);
  const read = async () => {
    let sum = 0n;
    let attempts = 0;
    for (const day of days) {
      const body = await (await fetch(`http://127.0.0.1:${port}/spend?day=${day}`)).json();
      sum += BigInt(body.total_microusd);
      attempts += body.workloads.reduce((n, w) => n + w.attempts, 0);
    }
    return { sum: sum.toString(), attempts };
  };
  const until = Date.now() + 120_000;
  let last = { sum: '0', attempts: 0 };
  while (Date.now() < until) {
    try {
      last = await read();
      if (last.sum === ledger.sum && last.attempts === ledger.rows) break;
    } catch {
      // not listening yet
    }
    await sleep(1000);
  }
  await stop();
  return last;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[simday] ${err.stack ?? err}`);
    console.log('simulate-day: 0 passed, 1 failed');
    process.exit(1);
  },
);
