#!/usr/bin/env node
// `npm run bench`: what the gateway costs on top of a direct provider call (see bench/README.md).
//
// Starts its own Postgres database (gateway_bench, recreated), its own Kafka broker, migrates,
// seeds a bench route + workloads (bench/seed-bench.ts), starts every service on ports of its
// own, then measures with autocannon the same OpenAI chat-completions request sent
//   baseline: straight to provider-sim          POST /v1/chat/completions
//   gateway:  through admission with a workload key  POST /v1/chat/completions
// in two phases (fixed rate, saturation), after an idle phase (no traffic) that measures what
// the stack costs doing nothing. Prints tables, writes .local/bench-result.json.
// `npm run bench -- --idle` (or BENCH_ONLY=idle) measures the idle phase only.
// Not a test: nothing here asserts on timings. Ctrl-C stops everything it started.
//
// Knobs (environment): BENCH_LATENCY_MS (provider-sim latency directive, default 20),
// BENCH_RATE (req/s of the fixed-rate phase, default 100), BENCH_RATE_LANES (see load(); default
// one per req/s),
// BENCH_CONNECTIONS (saturation, default 32), BENCH_DURATION_S (per run, default 10), BENCH_ROUNDS
// (rounds of baseline + gateway per load phase, default 3; tables from the median round),
// BENCH_WARMUP_S (per target, default 3), BENCH_RATE_WARMUP_MAX_S / BENCH_RATE_WARMUP_TOLERANCE
// (before the fixed-rate rounds, the gateway alone at that rate until two runs in a row cost the
// same CPU per answer within the tolerance, default 0.08, with the helper threads at most
// BENCH_RATE_WARMUP_HELPER_SHARE of it, default 0.1, at least BENCH_RATE_WARMUP_MIN_S,
// default 40, and at most this many seconds, default 90; 0 = off), BENCH_KAFKA_PORT (default
// 14092), LOG_LEVEL (services, default info, as `npm start`), BENCH_SERVICES (comma-separated service names, or "all"; default
// all, as `npm start`), BENCH_GATEWAY_WORKLOADS (spread the gateway load over this many workloads,
// default 1), BENCH_IDLE_SETTLE_S / BENCH_IDLE_S (the idle phase: seconds of quiet before it is
// measured, default 10, and measured, default 20), BENCH_ONLY=idle (= --idle), BENCH_FLOOR_S
// (the path floor before the phases: seconds per probe at BENCH_RATE, default 3; scripts/path-floor.mjs).
// The hedged phase (issue 10; BENCH_ONLY=hedged or --hedged runs it alone): the gateway on a
// heavy-tailed route (BENCH_TAIL, default `latency=20-40;latency-tail=50:1500-2500`) at
// BENCH_HEDGE_RATE req/s (default 5), once for a workload without a hedge policy and once for
// one with a hedge after BENCH_HEDGE_DELAY_MS (default 300): p99 and the extra spend side by side.
// Before anything starts, a machine calibration of 4–5 s (scripts/machine.mjs: compute, and the
// cost of a cross-process wake-up over loopback); `--machine` (BENCH_ONLY=machine) prints only that.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { brokerGcPauses, startKafka } from './kafka.mjs';
import {
  boxCpu,
  boxCpuShares,
  calibrateMachine,
  platform,
  processMemoryMb,
  procStatFields,
  reportMachine,
  round,
  shares,
} from './machine.mjs';
import { measurePathFloor, reportPathFloor } from './path-floor.mjs';
import { hotShares, updateCounts, walByRelation, walLines, walPosition, walSince } from './pg-write-work.mjs';
import { ensurePostgres, recreateDatabase } from './postgres.mjs';
import { ensurePrismaClient } from './prisma-generate.mjs';
import { contentKey, ROOT, runTs, sleep, startServices } from './services.mjs';
import { fullGcGrowth, heapAfterFullGc, troughs } from './soak.mjs';

const num = (name, fallback) => {
  const raw = process.env[name];
  const n = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, got ${raw}`);
  return n;
};

const CFG = {
  latencyMs: num('BENCH_LATENCY_MS', 20),
  rate: num('BENCH_RATE', 100),
  rateLanes: process.env.BENCH_RATE_LANES ? num('BENCH_RATE_LANES', 1) : 0, // 0: one lane per req/s
  connections: num('BENCH_CONNECTIONS', 32),
  durationS: num('BENCH_DURATION_S', 10),
  // each load phase runs this many rounds (baseline then gateway), reported per round and by the median round
  rounds: Math.round(num('BENCH_ROUNDS', 3)),
  warmupS: num('BENCH_WARMUP_S', 3),
  // before the fixed-rate rounds: the gateway alone at that rate until its CPU per answer settles (0 = off)
  rateWarmupMaxS: process.env.BENCH_RATE_WARMUP_MAX_S === '0' ? 0 : num('BENCH_RATE_WARMUP_MAX_S', 90),
  rateWarmupMinS: num('BENCH_RATE_WARMUP_MIN_S', 40),
  rateWarmupTolerance: num('BENCH_RATE_WARMUP_TOLERANCE', 0.08),
  // ... and the helper threads (compilers, GC) at most this share of that CPU: the JIT is done
  rateWarmupHelperShare: num('BENCH_RATE_WARMUP_HELPER_SHARE', 0.1),
  portBase: num('BENCH_PORT_BASE', 14000),
  kafkaPort: num('BENCH_KAFKA_PORT', num('BENCH_PORT_BASE', 14000) + 92),
  database: process.env.BENCH_DB || 'gateway_bench',
  drainTimeoutMs: 20_000,
  gatewayWorkloads: Math.round(num('BENCH_GATEWAY_WORKLOADS', 1)),
  idleSettleS: num('BENCH_IDLE_SETTLE_S', 10),
  idleS: num('BENCH_IDLE_S', 20),
  floorS: num('BENCH_FLOOR_S', 3),
  idleOnly: process.env.BENCH_ONLY === 'idle' || process.argv.slice(2).includes('--idle'),
  // which measured phases run, in this order: idle, rate, saturation (default all three)
  phases: (process.env.BENCH_PHASES || 'idle,rate,saturation')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
  hedgedOnly: process.env.BENCH_ONLY === 'hedged' || process.argv.slice(2).includes('--hedged'),
  // `--soak`: the gateway alone at BENCH_RATE for BENCH_SOAK_S, in windows of BENCH_SOAK_WINDOW_S,
  // each service's heap sampled every BENCH_SOAK_SAMPLE_S: does memory grow with the answers served?
  soakOnly: process.env.BENCH_ONLY === 'soak' || process.argv.slice(2).includes('--soak'),
  soakS: num('BENCH_SOAK_S', 600),
  soakWindowS: num('BENCH_SOAK_WINDOW_S', 30),
  soakSampleS: num('BENCH_SOAK_SAMPLE_S', 3),
  soakWarmupS: num('BENCH_SOAK_WARMUP_S', 60),
  machineOnly: process.env.BENCH_ONLY === 'machine' || process.argv.slice(2).includes('--machine'),
  // `--overload`: more impatient clients than the gateway can answer in time (closed loop,
  // BENCH_OVERLOAD_CONNECTIONS, default 256, each giving up after BENCH_CLIENT_TIMEOUT_S, default 1)
  // for BENCH_OVERLOAD_S (default 20): how many answers arrive in time, and what the provider and
  // the workload paid for answers nobody was left to read.
  overloadOnly: process.env.BENCH_ONLY === 'overload' || process.argv.slice(2).includes('--overload'),
  overloadConnections: num('BENCH_OVERLOAD_CONNECTIONS', 256),
  clientTimeoutS: num('BENCH_CLIENT_TIMEOUT_S', 1),
  overloadS: num('BENCH_OVERLOAD_S', 20),
  // `naive`: autocannon, every client sends its next request at once, whatever the answer;
  // `sdk`: a client waits out a 429/503's Retry-After before its next request, as the official SDKs do
  overloadClient: process.env.BENCH_OVERLOAD_CLIENT === 'sdk' ? 'sdk' : 'naive',
  // `--abandoned`: streams whose client reads the first chunk and leaves, BENCH_ABANDON_RATE a
  // second (default 10) for BENCH_DURATION_S, on a long answer held mid-way (BENCH_ABANDON_MODEL):
  // what each process spends per stream until every attempt has settled.
  abandonedOnly: process.env.BENCH_ONLY === 'abandoned' || process.argv.slice(2).includes('--abandoned'),
  abandonRate: num('BENCH_ABANDON_RATE', 10),
  abandonModel: process.env.BENCH_ABANDON_MODEL || 'sim-gpt;words=400;stall=300',
  tail: process.env.BENCH_TAIL || 'latency=20-40;latency-tail=50:1500-2500',
  hedgeRate: num('BENCH_HEDGE_RATE', 5),
  hedgeDelayMs: num('BENCH_HEDGE_DELAY_MS', 300),
  services: (process.env.BENCH_SERVICES || 'all')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
};

const PORTS = {
  ADMISSION_PORT: CFG.portBase,
  POLICY_PORT: CFG.portBase + 1,
  DISPATCH_PORT: CFG.portBase + 2,
  SETTLEMENT_PORT: CFG.portBase + 3,
  RECONCILIATION_PORT: CFG.portBase + 4,
  PROVIDER_SIM_PORT: CFG.portBase + 10,
};
const ADMISSION = `http://127.0.0.1:${PORTS.ADMISSION_PORT}`;
const SIM = `http://127.0.0.1:${PORTS.PROVIDER_SIM_PORT}`;
const ALIAS = 'bench';
const UPSTREAM_MODEL = `sim-gpt;latency=${CFG.latencyMs}`;
/** the abandoned-streams mode's route and workload (bench/seed-bench.ts) */
const STREAM_ALIAS = 'bench-stream';
const TAIL = { alias: 'bench-tail', model: `sim-gpt;${CFG.tail}`, plain: 'bench-tail-plain', hedged: 'bench-tail-hedged' };
// Gateway load goes to one workload per phase, or is spread over BENCH_GATEWAY_WORKLOADS of them.
const workloadsFor = (name) =>
  CFG.gatewayWorkloads === 1 ? [name] : Array.from({ length: CFG.gatewayWorkloads }, (_, i) => `${name}-${i + 1}`);
const WORKLOADS = { warmup: ['bench-warmup'], rate: workloadsFor('bench-rate'), saturation: workloadsFor('bench-saturation') };
const LOG_DIR = path.join(ROOT, '.local', 'bench-logs');
const RESULT_FILE = path.join(ROOT, '.local', 'bench-result.json');
const PROMPT = [{ role: 'user', content: 'Summarise the benefits of unit tests in one sentence.' }];

const log = (msg) => console.log(`[bench] ${msg}`);
const stops = [];
const running = new Set(); // autocannon runs in progress, stopped on Ctrl-C
let shuttingDown = false;

async function main() {
  process.on('SIGINT', () => void shutdown(130, 'interrupted'));
  process.on('SIGTERM', () => void shutdown(143, 'terminated'));
  const t0 = Date.now();

  // Measured first, in this process, while nothing else of the bench runs.
  log('machine calibration (compute, cross-process wake-ups over loopback)');
  const calibration = await calibrateMachine({ dir: path.join(ROOT, '.local') });
  const machine = () => ({
    cpus: os.cpus().length,
    model: os.cpus()[0]?.model ?? null,
    node: process.version,
    loadavg: os.loadavg().map((l) => round(l, 2)),
    platform: platform(),
    calibration,
  });
  reportMachine(machine(), table);
  if (CFG.machineOnly) {
    writeResult({ finishedAt: new Date().toISOString(), mode: 'machine', machine: machine(), config: CFG });
    log(`wrote ${path.relative(ROOT, RESULT_FILE)}`);
    return shutdown(0);
  }

  await ensurePrismaClient({ quiet: true });

  // Our own database and broker, always: a shared broker would put the bench services in the
  // same consumer groups as another running stack, and a shared database would be dropped below.
  if (process.env.DATABASE_URL) process.env.DATABASE_URL = withDatabase(process.env.DATABASE_URL, CFG.database);
  const pgServer = await ensurePostgres({ database: CFG.database, log });
  stops.push(pgServer.stop);
  await recreateDatabase(pgServer.url);
  delete process.env.KAFKA_BROKERS;
  const kafka = await startKafka({ port: CFG.kafkaPort, log, fresh: true, gcLog: true });
  stops.push(kafka.stop);

  const env = {
    ...process.env,
    ...Object.fromEntries(Object.entries(PORTS).map(([k, v]) => [k, String(v)])),
    DATABASE_URL: pgServer.url,
    KAFKA_BROKERS: kafka.brokers,
    GATEWAY_CONTENT_KEY: contentKey(),
    GATEWAY_INSTANCE_ID: `bench-${process.pid}`,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
    PROVIDER_SIM_URL: SIM,
    GATEWAY_UPSTREAM_ALLOWLIST: '127.0.0.1',
  };
  log(`migrating ${CFG.database}`);
  await runTs('libs/db/src/migrations/migrate.cli.ts', env);
  const allWorkloads = Object.values(WORKLOADS).flat();
  log(`seeding route '${ALIAS}' → ${UPSTREAM_MODEL} and ${allWorkloads.length} workloads`);
  const seeded = JSON.parse(
    (
      await runTs('bench/seed-bench.ts', {
        ...env,
        BENCH_ALIAS: ALIAS,
        BENCH_UPSTREAM_MODEL: UPSTREAM_MODEL,
        BENCH_WORKLOADS: allWorkloads.join(','),
        BENCH_TAIL_UPSTREAM_MODEL: TAIL.model,
        BENCH_HEDGE_DELAY_MS: String(CFG.hedgeDelayMs),
        ...(CFG.abandonedOnly ? { BENCH_STREAM_UPSTREAM_MODEL: CFG.abandonModel } : {}),
      })
    )
      .trim()
      .split('\n')
      .pop(),
  );

  fs.rmSync(LOG_DIR, { recursive: true, force: true });
  log(`starting services (logs in ${path.relative(ROOT, LOG_DIR)}/)`);
  const only = CFG.services.includes('all') ? undefined : CFG.services;
  // A generous start-up allowance: on a loaded 2-core box six services compiling at once take a while.
  const services = await startServices({ env, logDir: LOG_DIR, only, timeoutMs: 240_000, stops });
  log(`running: ${services.children.map((c) => c.service.name).join(', ')}`);
  const pool = new pg.Pool({ connectionString: pgServer.url, max: 2 });
  stops.push(() => pool.end());
  log(`stack up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  const memoryMb = { start: await memory(services, kafka.pid) };
  const startupMs = Object.fromEntries(services.children.map((c) => [c.name, c.healthyAfterMs]));

  const targets = {
    baseline: { url: `${SIM}/v1/chat/completions`, model: UPSTREAM_MODEL, key: null },
    gateway: { url: `${ADMISSION}/v1/chat/completions`, model: ALIAS, key: (wl) => seeded.keys[wl] },
  };
  // The same body everywhere but the model (alias vs upstream model). With several workloads,
  // each connection cycles through their keys.
  const requestFor = (target, workloads) => {
    const one = (workload) => ({
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(target.key ? { authorization: `Bearer ${target.key(workload)}` } : {}) },
      body: JSON.stringify({ model: target.model, messages: PROMPT }),
    });
    const keyed = target.key ? workloads : workloads.slice(0, 1);
    return { url: target.url, ...one(keyed[0]), ...(keyed.length > 1 ? { requests: keyed.map(one) } : {}) };
  };

  // One request each, checked by hand: a 2xx that is not a chat completion would make the
  // numbers meaningless.
  for (const [name, target] of Object.entries(targets)) await sanityCheck(name, requestFor(target, WORKLOADS.warmup));

  const cpu = cpuProbe({ services, kafka, pool, pgUrl: pgServer.url });
  const loop = eventLoopProbe(services);
  const counters = metricsCounterProbe(services, { kafkaRequests: kafkaRequestKey, gc: gcKey });

  /** A run of one mode only (`--idle`, `--hedged`, `--soak`): its result written, its reports printed, the stack stopped. */
  const finishMode = (mode, fields, reports, code = 0) => {
    writeResult({ finishedAt: new Date().toISOString(), mode, machine: machine(), config: CFG, ...fields });
    for (const report of reports) report();
    log(`wrote ${path.relative(ROOT, RESULT_FILE)}; total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return shutdown(code);
  };

  if (CFG.idleOnly) {
    const idle = await idlePhase(cpu, loop);
    memoryMb.idle = await memory(services, kafka.pid);
    return finishMode('idle', { idle, memoryMb, startupMs }, [() => reportIdle(idle), () => reportMemory(memoryMb, startupMs)]);
  }

  if (CFG.hedgedOnly) {
    const hedged = await hedgedPhase(pool, seeded.keys);
    return finishMode('hedged', { hedged }, [() => reportHedged(hedged)]);
  }

  if (CFG.abandonedOnly) {
    const abandoned = await abandonedPhase(cpu, pool, seeded.keys[STREAM_ALIAS]);
    return finishMode('abandoned', { abandoned }, [() => reportAbandoned(abandoned)]);
  }

  if (CFG.overloadOnly) {
    log(`warm-up: ${CFG.warmupS} s, ${CFG.connections} connections (not reported)`);
    await load(requestFor(targets.gateway, WORKLOADS.warmup), { connections: CFG.connections, duration: CFG.warmupS });
    const overload = await overloadPhase(
      { cpu, loop },
      pool,
      requestFor(targets.gateway, WORKLOADS.saturation.slice(0, 1)),
      WORKLOADS.saturation[0],
    );
    return finishMode('overload', { overload }, [() => reportOverload(overload)]);
  }

  if (CFG.soakOnly) {
    const rate = { name: 'rate', workloads: WORKLOADS.rate };
    const requests = { warmup: requestFor(targets.gateway, WORKLOADS.warmup), soak: requestFor(targets.gateway, rate.workloads) };
    const soak = await soakPhase(requests, services, kafka.pid, cpu);
    soak.settlement = await waitForSettlement(pool, Date.now(), { rate: soak.windows.map((w) => ({ gateway: w.run })) }, [rate]);
    soak.fullGcMb.end = await fullGcHeaps(services);
    // by half: a heap that gains in the first half only filled caches and compiled code; a leak gains in both
    const { start, mid, end } = soak.fullGcMb;
    for (const [n, g] of Object.entries(soak.growth))
      g.fullGc = {
        firstHalf: fullGcGrowth(start[n], mid?.[n], soak.answersAtMid, CFG.rate),
        secondHalf: fullGcGrowth(mid?.[n], end[n], soak.answers - soak.answersAtMid, CFG.rate),
      };
    memoryMb.end = await memory(services, kafka.pid);
    return finishMode(
      'soak',
      { soak, memoryMb, startupMs },
      [() => reportSoak(soak), () => reportMemory(memoryMb, startupMs)],
      soak.windows.some((w) => w.run.non2xx + w.run.errors + w.run.timeouts > 0) ? 1 : 0,
    );
  }

  log(`warm-up: ${CFG.warmupS} s per target, ${CFG.connections} connections (not reported)`);
  for (const target of Object.values(targets)) {
    await load(requestFor(target, WORKLOADS.warmup), { connections: CFG.connections, duration: CFG.warmupS });
  }
  await resetSim();
  const pathFloor = CFG.phases.includes('rate') ? await pathFloorProbe(kafka.brokers, pgServer.url) : null;
  const idle = CFG.phases.includes('idle') ? await idlePhase(cpu, loop) : null;
  memoryMb.idle = await memory(services, kafka.pid);

  const phases = [
    {
      name: 'rate',
      label: `fixed rate ${CFG.rate} req/s`,
      workloads: WORKLOADS.rate,
      opts: { lanes: CFG.rateLanes, overallRate: CFG.rate },
    },
    {
      name: 'saturation',
      label: `saturation ${CFG.connections} conns`,
      workloads: WORKLOADS.saturation,
      opts: { connections: CFG.connections },
    },
  ].filter((p) => CFG.phases.includes(p.name));
  if (phases.length === 0) throw new Error(`BENCH_PHASES names no load phase (rate, saturation): ${CFG.phases.join(',')}`);
  const runs = {};
  const rounds = {};
  const warmup = {};
  const loadavgBefore = os.loadavg().map((l) => round(l, 2));
  for (const phase of phases) {
    if (phase.name === 'rate' && CFG.rateWarmupMaxS > 0) warmup.rate = await settleAtRate(phase);
    rounds[phase.name] = [];
    for (let n = 1; n <= CFG.rounds; n++) {
      const pair = {};
      for (const [name, target] of Object.entries(targets)) {
        log(`${phase.label}: ${name} for ${CFG.durationS} s${CFG.rounds > 1 ? ` (round ${n} of ${CFG.rounds})` : ''}`);
        pair[name] = await measuredRun(phase, name, target);
      }
      rounds[phase.name].push(pair);
    }
    runs[phase.name] = medianRound(phase.name, rounds[phase.name]);
  }

  /** One load run against `target` with every probe around it. */
  async function measuredRun(phase, name, target) {
    await loop.reset();
    const before = await cpu.snapshot();
    const pgBefore = await pgActivity(pool);
    const writesBefore = await pgWrites(pool);
    const countersBefore = await counters.scrape();
    const sampler = pgWaitSampler(pool);
    const loadStart = Date.now();
    const r = await load(requestFor(target, phase.workloads), { ...phase.opts, duration: CFG.durationS });
    const brokerGc = kafka.gcLogFile ? brokerGcPauses(kafka.gcLogFile, loadStart, Date.now()) : null;
    const pgWaits = await sampler.stop();
    const after = await cpu.snapshot();
    const eventLoopDelayMs = await loop.read();
    const cpuSeconds = cpu.seconds(before, after);
    const helperCpuMsPerOk = cpuMsPer(cpu.helperSeconds(before, after), r.ok);
    const pgAfter = await pgActivity(pool);
    const pgTransactionsPerOk = r.ok > 0 ? round((pgAfter.transactions - pgBefore.transactions) / r.ok, 2) : null;
    const pgSessionsOpened = Number.isFinite(pgAfter.sessions - pgBefore.sessions) ? pgAfter.sessions - pgBefore.sessions : null;
    const pgWritesPerOk = await pgWritesPer(pool, writesBefore, r.ok);
    const countersAfter = await counters.scrape();
    const kafkaRequestsPerOk = counters.perOk(countersBefore.kafkaRequests, countersAfter.kafkaRequests, r.ok);
    const gcPer1000Ok = counters.perOk(countersBefore.gc, countersAfter.gc, r.ok / 1000, 4);
    if (gcPer1000Ok && brokerGc) gcPer1000Ok.kafka = brokerGcPer1000Ok(brokerGc, r.ok);
    const run = {
      ...r,
      cpuCores: perSecond(cpuSeconds, r.durationS),
      cpuMsPerOk: cpuMsPer(cpuSeconds, r.ok),
      helperCpuMsPerOk,
      syscallsPerOk: cpu.counts(before, after, r.ok),
      pgTransactionsPerOk,
      pgSessionsOpened,
      pgWritesPerOk,
      kafkaRequestsPerOk,
      gcPer1000Ok,
      brokerGc,
      eventLoopDelayMs,
      pgWaits,
      loadavg: os.loadavg().map((l) => round(l, 2)),
    };
    if (phase.name === 'saturation' && name === 'gateway') run.rssMb = memoryMb.saturation = await memory(services, kafka.pid);
    await resetSim();
    return run;
  }

  /**
   * The gateway alone at the fixed rate, on the warm-up workload, in runs of BENCH_DURATION_S,
   * until two runs in a row cost the stack the same CPU per answer (within
   * BENCH_RATE_WARMUP_TOLERANCE) and the helper threads take at most
   * BENCH_RATE_WARMUP_HELPER_SHARE of it (warm runs here: 6–9 %; a first run 25–30 %), at least
   * BENCH_RATE_WARMUP_MIN_S and at most
   * BENCH_RATE_WARMUP_MAX_S. The minimum because the criterion alone stopped too early once
   * (9.60 → 9.02 ms after 30 s, while the helper threads still fell 0.98 → 0.63 ms per answer
   * over the rounds after it). The 3 s warm-up at saturation does not warm what a moderate rate
   * runs: one action per group statement, one message per fetch. On 2026-12-05's box seven rounds in a row cost 14.4, 11.0, 9.4, 8.4,
   * 8.9, 8.3, 9.0 ms of stack CPU per answer (added p50 +14.9 → +7.4 ms), while V8's optimizing
   * compiler took up to 28 % of admission's CPU in the first: the median of three rounds was the
   * second, half warm. Each warm-up run is printed with its helper threads' share.
   */
  async function settleAtRate(phase) {
    const list = [];
    let settled = false;
    log(`${phase.label}: warming the gateway at this rate until its CPU per answer settles (at most ${CFG.rateWarmupMaxS} s)`);
    while (!settled && (list.length + 1) * CFG.durationS <= CFG.rateWarmupMaxS) {
      const before = await cpu.snapshot();
      const r = await load(requestFor(targets.gateway, WORKLOADS.warmup), { ...phase.opts, duration: CFG.durationS });
      const after = await cpu.snapshot();
      const stack = cpuMsPer(cpu.seconds(before, after), r.ok)?.total ?? null;
      const helpers = cpuMsPer(cpu.helperSeconds(before, after), r.ok)?.total ?? null;
      list.push({ okPerSec: r.okPerSec, p50Ms: r.p50Ms, p99Ms: r.p99Ms, stackCpuMsPerOk: stack, helperCpuMsPerOk: helpers });
      const prev = list.at(-2)?.stackCpuMsPerOk;
      settled =
        list.length * CFG.durationS >= CFG.rateWarmupMinS &&
        prev != null &&
        stack != null &&
        Math.abs(stack - prev) <= CFG.rateWarmupTolerance * prev &&
        (helpers == null || helpers <= CFG.rateWarmupHelperShare * stack);
      log(
        `  warm-up run ${list.length}: ${r.okPerSec} ok/s, p50 ${r.p50Ms} ms, p99 ${r.p99Ms} ms, stack CPU ${stack} ms/answer (helper threads ${helpers})${settled ? ': settled' : ''}`,
      );
    }
    await resetSim();
    return { runs: list, settled, seconds: list.length * CFG.durationS };
  }

  const hedged = await hedgedPhase(pool, seeded.keys);
  const loadEnded = Date.now();
  const settlement = await waitForSettlement(pool, loadEnded, rounds, phases);
  const stages = {};
  for (const phase of phases) stages[phase.name] = await stageBreakdown(pool, phase.workloads);
  const metrics = await scrapeMetrics();

  const comparison = {};
  for (const phase of phases) comparison[phase.name] = compare(runs[phase.name]);

  const result = {
    finishedAt: new Date().toISOString(),
    machine: { ...machine(), loadavgBefore, loadavgAfter: machine().loadavg },
    config: { ...CFG, upstreamModel: UPSTREAM_MODEL, logLevel: env.LOG_LEVEL, prompt: PROMPT },
    idle,
    warmup,
    runs,
    comparison,
    rounds: Object.fromEntries(
      Object.entries(rounds).map(([name, list]) => [name, list.map((pair) => ({ ...roundSummary(pair), median: pair === runs[name] }))]),
    ),
    settlement,
    gatewayStagesMs: stages,
    pathFloor,
    admissionMetrics: metrics,
    memoryMb,
    startupMs,
    hedged,
  };
  writeResult(result);

  report(result, phases);
  reportHedged(hedged);
  log(`wrote ${path.relative(ROOT, RESULT_FILE)}; total ${((Date.now() - t0) / 1000).toFixed(1)} s`);

  const failures = Object.values(rounds)
    .flatMap((list) => list.flatMap((pair) => Object.values(pair)))
    .filter((r) => r.non2xx + r.errors + r.timeouts > 0);
  await shutdown(failures.length > 0 ? 1 : 0);
}

// ---------------------------------------------------------------- rounds

/** The path floor (scripts/path-floor.mjs) at the fixed rate, on the quiet stack; null when it fails. */
async function pathFloorProbe(brokers, pgUrl) {
  log(`path floor: a Kafka hop and a Postgres commit at ${CFG.rate}/s for ${CFG.floorS} s each`);
  try {
    return await measurePathFloor({ brokers, pgUrl, rate: CFG.rate, seconds: CFG.floorS });
  } catch (err) {
    log(`path floor not measured: ${err.message}`);
    return null;
  }
}

/** The gateway run against the baseline run of the same round. */
function compare({ baseline, gateway }) {
  return {
    addedP50Ms: round(gateway.p50Ms - baseline.p50Ms, 1),
    addedP99Ms: round(gateway.p99Ms - baseline.p99Ms, 1),
    throughputRatio: baseline.okPerSec > 0 ? round(gateway.okPerSec / baseline.okPerSec, 3) : null,
    ...directCallUnits(baseline.cpuMsPerOk, gateway.cpuMsPerOk),
  };
}

/**
 * The round every detailed table is printed from: the median by the phase's headline figure
 * (answers per second at saturation, added p50 at a fixed rate; the lower middle of an even count).
 */
function medianRound(phaseName, pairs) {
  const key = (pair) => (phaseName === 'saturation' ? pair.gateway.okPerSec : compare(pair).addedP50Ms);
  return lowerMiddle([...pairs].sort((a, b) => key(a) - key(b)));
}

/** The middle element of a sorted list, the lower one of an even count. */
const lowerMiddle = (sorted) => sorted[Math.floor((sorted.length - 1) / 2)];
const median = (values) => (values.length ? lowerMiddle([...values].sort((a, b) => a - b)) : null);

function roundSummary(pair) {
  const c = compare(pair);
  return {
    baselineOkPerSec: pair.baseline.okPerSec,
    gatewayOkPerSec: pair.gateway.okPerSec,
    addedP50Ms: c.addedP50Ms,
    addedP99Ms: c.addedP99Ms,
    stackCpuMsPerOk: pair.gateway.cpuMsPerOk?.total ?? null,
    stackHelperCpuMsPerOk: pair.gateway.helperCpuMsPerOk?.total ?? null,
    stackCpuPerOkInDirectCalls: c.stackCpuPerOkInDirectCalls ?? null,
    loadavg1: pair.gateway.loadavg?.[0] ?? null,
  };
}

// ---------------------------------------------------------------- load

/**
 * Runs autocannon and summarises it from its per-response events: latencies of 2xx answers
 * (exact percentiles, nearest rank), status codes, errors and timeouts.
 *
 * Without overallRate: one autocannon run, closed loop, `connections` requests in flight.
 * With overallRate: `lanes` autocannon runs, each with overallRate/lanes req/s, started
 * 1000/lanes ms apart. autocannon spends a connection's per-second quota as soon as each
 * second starts, and all its connections start together, so a single run at 50 req/s sends
 * bursts; staggered lanes spread the arrivals over the second (one lane per req/s sends one
 * request every 1000/rate ms). A lane is one connection, so it keeps its rate only while a
 * response takes under lanes/rate seconds; the achieved rate is what gets reported.
 * autocannon's own percentiles are not used: at a fixed rate it "corrects" coordinated omission
 * with an expected interval of ceil(1/rate-per-connection) ms = 1 ms, which back-fills a 20 ms
 * answer with 19 made-up faster ones.
 */
async function load(request, { connections = 1, overallRate, lanes = 0, duration, timeoutS = 30 }) {
  const laneCount = overallRate ? Math.max(1, Math.round(lanes || overallRate)) : 1;
  const latencies = [];
  const statusCodes = {};
  const runLane = async (i) => {
    if (i > 0) await sleep((i * 1000) / laneCount);
    if (shuttingDown) return null;
    const opts = { ...request, duration, timeout: timeoutS, pipelining: 1 };
    if (overallRate) {
      const laneRate = overallRate / laneCount;
      opts.overallRate = laneRate;
      opts.connections = Math.max(1, Math.floor(laneRate));
    } else {
      opts.connections = connections;
    }
    const run = autocannon(opts);
    running.add(run);
    run.on('response', (_client, status, _bytes, ms) => {
      statusCodes[status] = (statusCodes[status] ?? 0) + 1;
      if (status >= 200 && status < 300) latencies.push(ms);
    });
    try {
      return await run;
    } finally {
      running.delete(run);
    }
  };
  const results = (await Promise.all(Array.from({ length: laneCount }, (_, i) => runLane(i)))).filter(Boolean);
  latencies.sort((a, b) => a - b);
  const pct = (p) =>
    latencies.length ? round(latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)], 1) : null;
  const ok = Object.entries(statusCodes).reduce((n, [code, c]) => (Number(code) >= 200 && Number(code) < 300 ? n + c : n), 0);
  const completed = Object.values(statusCodes).reduce((a, b) => a + b, 0);
  const durationS = results.length ? results.reduce((a, r) => a + r.duration, 0) / results.length : duration;
  return {
    lanes: laneCount,
    connections: results.reduce((a, r) => a + r.connections, 0),
    durationS: round(durationS, 2),
    completed,
    ok,
    non2xx: completed - ok,
    errors: results.reduce((a, r) => a + r.errors, 0),
    timeouts: results.reduce((a, r) => a + r.timeouts, 0),
    statusCodes,
    // Σ over lanes of 2xx/lane duration: the steady rate, not diluted by the staggered start.
    okPerSec: round(
      results.reduce((a, r) => a + r['2xx'] / r.duration, 0),
      1,
    ),
    p50Ms: pct(50),
    p90Ms: pct(90),
    p99Ms: pct(99),
    maxMs: latencies.length ? round(latencies[latencies.length - 1], 1) : null,
    meanMs: latencies.length ? round(latencies.reduce((a, b) => a + b, 0) / latencies.length, 2) : null,
  };
}

/**
 * The overload's clients as the official SDKs behave (BENCH_OVERLOAD_CLIENT=sdk): each of
 * `connections` clients keeps one connection, gives up on a request after `timeoutS` (closing its
 * connection; the next request opens another) and sends the next at once, except after a 429 or
 * 503: then it first waits the answer's Retry-After (seconds, at most 10). Returns what `load`
 * returns for the fields the overload reads.
 */
async function sdkLoad(request, { connections, duration, timeoutS }) {
  const url = new URL(request.url);
  const latencies = [];
  const statusCodes = {};
  let timeouts = 0;
  let errors = 0;
  const ends = Date.now() + duration * 1000;
  const once = (agent) =>
    new Promise((resolve) => {
      const started = performance.now();
      const req = http.request(
        url,
        { method: request.method ?? 'POST', headers: request.headers, agent, timeout: timeoutS * 1000 },
        (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode, ms: performance.now() - started, retryAfter: Number(res.headers['retry-after']) }),
          );
          res.on('error', () => resolve({ error: true }));
        },
      );
      const timer = setTimeout(() => {
        req.destroy();
        resolve({ timeout: true });
      }, timeoutS * 1000);
      req.on('error', () => resolve({ error: true }));
      req.on('close', () => clearTimeout(timer));
      req.end(request.body);
    });
  const client = async () => {
    let agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    while (Date.now() < ends && !shuttingDown) {
      const r = await once(agent);
      if (r.timeout || r.error) {
        if (r.timeout) timeouts += 1;
        else errors += 1;
        agent.destroy();
        agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        continue;
      }
      statusCodes[r.status] = (statusCodes[r.status] ?? 0) + 1;
      if (r.status >= 200 && r.status < 300) latencies.push(r.ms);
      else if ((r.status === 429 || r.status === 503) && r.retryAfter > 0) await sleep(Math.min(10, r.retryAfter) * 1000);
    }
    agent.destroy();
  };
  const t0 = Date.now();
  await Promise.all(Array.from({ length: connections }, client));
  const durationS = (Date.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p) =>
    latencies.length ? round(latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)], 1) : null;
  const completed = Object.values(statusCodes).reduce((a, b) => a + b, 0);
  return {
    lanes: 1,
    connections,
    durationS: round(durationS, 2),
    completed,
    ok: latencies.length,
    non2xx: completed - latencies.length,
    errors,
    timeouts,
    statusCodes,
    okPerSec: round(latencies.length / durationS, 1),
    p50Ms: pct(50),
    p99Ms: pct(99),
  };
}

async function sanityCheck(name, req) {
  const res = await fetch(req.url, { method: 'POST', headers: req.headers, body: req.body });
  const text = await res.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {
    // reported below
  }
  const content = body?.choices?.[0]?.message?.content;
  if (!res.ok || typeof content !== 'string' || !body.usage) {
    throw new Error(`${name} sanity request failed: HTTP ${res.status} ${text.slice(0, 500)}`);
  }
  const action = res.headers.get('x-gateway-action-id');
  log(`${name} answers: HTTP ${res.status}, ${body.usage.total_tokens} tokens${action ? `, action ${action}` : ''}`);
}

async function resetSim() {
  await fetch(`${SIM}/_sim/requests`, { method: 'DELETE' }).catch(() => undefined);
}

// ---------------------------------------------------------------- overload (impatient clients)

/**
 * More clients than the gateway answers in time, each giving up (autocannon resets its connection)
 * after BENCH_CLIENT_TIMEOUT_S and sending its next request at once, as an app with a timeout and
 * a retry loop does. Then, once every attempt has ended, what the books say of the window: actions
 * admitted, withdrawn before dispatch (their client had gone), provider calls (attempts), and the
 * calls whose answer nobody read (attempts less the answers delivered), with what they cost.
 */
async function overloadPhase({ cpu, loop }, pool, request, workload) {
  const since = new Date();
  const metricsBefore = await admissionMetrics();
  await loop.reset();
  const cpuBefore = await cpu.snapshot();
  const tcpBefore = tcpCounters();
  const acceptQueue = listenQueueSampler(Number(new URL(ADMISSION).port));
  log(
    `overload: ${CFG.overloadConnections} connections for ${CFG.overloadS} s, each client giving up after ${CFG.clientTimeoutS} s (workload ${workload})`,
  );
  const run = {
    loadavg: null,
    ...(await (CFG.overloadClient === 'sdk' ? sdkLoad : load)(request, {
      connections: CFG.overloadConnections,
      duration: CFG.overloadS,
      timeoutS: CFG.clientTimeoutS,
    })),
  };
  run.loadavg = os.loadavg().map((l) => round(l, 2));
  const cores = perSecond(cpu.seconds(cpuBefore, await cpu.snapshot()), CFG.overloadS);
  const eventLoopMs = await loop.read();
  const metricsAfter = await admissionMetrics();
  const served = servedDelta(servedIn(metricsBefore), servedIn(metricsAfter));
  const tcp = { ...counterDelta(tcpBefore, tcpCounters()), acceptQueue: acceptQueue.stop() };
  const window = [workload, since];
  const deadline = Date.now() + CFG.drainTimeoutMs;
  const unended = async () =>
    Number(
      (
        await pool.query(
          `SELECT (SELECT count(*) FROM action a WHERE a.workload_id = $1 AND a.created_at >= $2 AND a.status = 'admitted')
                + (SELECT count(*) FROM attempt t JOIN action a ON a.id = t.action_id
                   WHERE a.workload_id = $1 AND a.created_at >= $2 AND t.status NOT IN ('settled', 'reconciliation_required')) AS n`,
          window,
        )
      ).rows[0].n,
    );
  while ((await unended()) > 0 && Date.now() < deadline) await sleep(500);
  const { rows } = await pool.query(
    `SELECT (SELECT count(*) FROM action a WHERE a.workload_id = $1 AND a.created_at >= $2)::int AS actions,
            (SELECT count(*) FROM action a WHERE a.workload_id = $1 AND a.created_at >= $2
               AND a.status = 'expired' AND a.status_reason LIKE 'expired: withdrawn by admission%')::int AS withdrawn,
            (SELECT count(*) FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.workload_id = $1 AND a.created_at >= $2)::int AS attempts,
            (SELECT coalesce(sum(l.cost_microusd), 0) FROM ledger_entry l JOIN action a ON a.id = l.action_id
               WHERE a.workload_id = $1 AND a.created_at >= $2)::bigint AS settled`,
    window,
  );
  const r = rows[0];
  const metricsEnd = await admissionMetrics();
  const stages = await stageBreakdown(pool, [workload]);
  const unread = Math.max(0, r.attempts - run.ok);
  const settled = Number(r.settled);
  return {
    connections: CFG.overloadConnections,
    clientTimeoutS: CFG.clientTimeoutS,
    client: CFG.overloadClient,
    run,
    drained: (await unended()) === 0,
    actions: r.actions,
    withdrawnBeforeDispatch: r.withdrawn,
    attempts: r.attempts,
    unreadAttempts: unread,
    unreadShare: r.attempts > 0 ? round(unread / r.attempts, 3) : null,
    settledMicrousd: String(r.settled),
    settledPerOnTimeAnswerMicrousd: run.ok > 0 ? round(settled / run.ok, 1) : null,
    stages,
    withdrawals: counterDelta(withdrawalsIn(metricsBefore), withdrawalsIn(metricsEnd)),
    shed: plainCounterIn(metricsEnd, 'gateway_admission_shed_total') - plainCounterIn(metricsBefore, 'gateway_admission_shed_total'),
    dispatchQueue: servedDelta(servedIn(metricsBefore, QUEUE_METRIC), servedIn(metricsEnd, QUEUE_METRIC)).all ?? null,
    cores,
    eventLoopMs,
    served,
    tcp,
  };
}

/**
 * The box's TCP counters that tell whether connections waited to be accepted (/proc/net/netstat,
 * TcpExt; {} off Linux): a full accept queue drops the SYN (ListenOverflows, ListenDrops) and the
 * client sends it again only a second later (TCPSynRetrans): as long as this bench's client timeout.
 */
function tcpCounters() {
  try {
    const lines = fs
      .readFileSync('/proc/net/netstat', 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('TcpExt:'));
    const names = lines[0].split(/\s+/).slice(1);
    const values = lines[1].split(/\s+/).slice(1).map(Number);
    const want = ['ListenOverflows', 'ListenDrops', 'TCPSynRetrans', 'TCPTimeouts'];
    return Object.fromEntries(want.filter((w) => names.includes(w)).map((w) => [w, values[names.indexOf(w)]]));
  } catch {
    return {};
  }
}

/**
 * Samples, every 100 ms, how many connections wait in the kernel to be accepted on `port` (the
 * LISTEN socket's rx_queue in /proc/net/tcp), against its backlog. libuv (since 1.45) accepts one
 * connection per event-loop turn, so a busy loop drains this queue slowly.
 */
function listenQueueSampler(port) {
  const hexPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const samples = [];
  const read = () => {
    try {
      for (const line of fs.readFileSync('/proc/net/tcp', 'utf8').split('\n')) {
        const f = line.trim().split(/\s+/);
        if (f[1]?.endsWith(hexPort) && f[3] === '0A') return samples.push(parseInt(f[4].split(':')[1], 16));
      }
    } catch {
      // not Linux: nothing sampled
    }
  };
  const timer = setInterval(read, 100);
  return {
    stop() {
      clearInterval(timer);
      if (samples.length === 0) return null;
      return { max: Math.max(...samples), mean: round(samples.reduce((a, b) => a + b, 0) / samples.length, 1), samples: samples.length };
    },
  };
}

/**
 * `gateway_admission_request_seconds` buckets by outcome in admission's /metrics text: its own
 * time for a request, from its handler to the end of its answer (what a client waited, less the
 * time before the handler)
 */
function servedIn(text, name = 'gateway_admission_request_seconds') {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}_bucket{`)) continue;
    const m = /\{([^}]*)\} (\d+)/.exec(line);
    const le = m && /le="([^"]+)"/.exec(m[1]);
    const outcome = m && /outcome="([^"]+)"/.exec(m[1]);
    if (le) (out[outcome?.[1] ?? 'all'] ??= {})[le[1]] = Number(m[2]);
  }
  return out;
}

/** A counter without labels (but `service`) in a /metrics text; 0 when absent. */
function plainCounterIn(text, name) {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

/** Per outcome: requests in the window and the bucket bounds (ms) under which half and 99 % of them fell. */
function servedDelta(before, after) {
  const out = {};
  for (const [outcome, buckets] of Object.entries(after)) {
    const les = Object.keys(buckets).sort((a, b) => (a === '+Inf' ? 1 : b === '+Inf' ? -1 : Number(a) - Number(b)));
    const cum = les.map((le) => buckets[le] - (before[outcome]?.[le] ?? 0));
    const n = cum[cum.length - 1];
    if (!n) continue;
    const under = (q) => {
      const le = les[cum.findIndex((c) => c >= q * n)];
      return le === '+Inf' ? '> 30 s' : `≤ ${round(Number(le) * 1000, 0)}`;
    };
    out[outcome] = { n, p50Ms: under(0.5), p99Ms: under(0.99) };
  }
  return out;
}

/** admission's histogram of each dispatched action's queue wait (load shedding reads it) */
const QUEUE_METRIC = 'gateway_admission_dispatch_queue_seconds';

/** admission's /metrics text ('' when it cannot be read) */
async function admissionMetrics() {
  try {
    return await (await fetch(`${ADMISSION}/metrics`)).text();
  } catch {
    return '';
  }
}

/** `gateway_admission_withdrawals_total` by `cause/outcome` in admission's /metrics text */
function withdrawalsIn(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^gateway_admission_withdrawals_total\{cause="([^"]+)",outcome="([^"]+)"[^}]*\} (\d+)/.exec(line);
    if (m) out[`${m[1]}/${m[2]}`] = Number(m[3]);
  }
  return out;
}

const counterDelta = (before, after) =>
  Object.fromEntries(Object.entries(after).flatMap(([k, v]) => (v - (before[k] ?? 0) > 0 ? [[k, v - (before[k] ?? 0)]] : [])));

function reportOverload(o) {
  console.log('');
  console.log(
    `Overload: ${o.connections} connections, closed loop, each client giving up after ${o.clientTimeoutS} s and sending its next request at once` +
      (o.client === 'sdk' ? ", except after a 429/503: then it waits the answer's Retry-After (BENCH_OVERLOAD_CLIENT=sdk)" : ''),
  );
  console.log('');
  const r = o.run;
  console.log(
    table(
      [
        [
          'answered in time, req/s',
          'p50 ms',
          'p99 ms',
          'client timeouts',
          'non-2xx',
          'actions',
          'withdrawn before dispatch',
          'provider calls',
          'calls nobody read',
          'settled µUSD per answer in time',
          'load avg',
        ],
        [
          r.okPerSec,
          r.p50Ms,
          r.p99Ms,
          r.timeouts,
          r.non2xx,
          o.actions,
          o.withdrawnBeforeDispatch,
          o.attempts,
          `${o.unreadAttempts} (${round((o.unreadShare ?? 0) * 100, 1)} %)`,
          o.settledPerOnTimeAnswerMicrousd,
          r.loadavg.join(' '),
        ],
      ],
      0,
    ),
  );
  if (!o.drained) console.log('(not every attempt had ended when the books were read: the counts are a lower bound)');
  const served = Object.entries(o.served ?? {});
  if (served.length)
    console.log(
      `admission's own time per request (handler → answer), by outcome: ${served.map(([k, v]) => `${k} ${v.n} (p50 ${v.p50Ms}, p99 ${v.p99Ms} ms)`).join(', ')}`,
    );
  if (o.cores)
    console.log(
      `cores busy in the window: ${Object.entries(o.cores)
        .map(([k, v]) => `${k} ${v}`)
        .join(
          ', ',
        )}; admission's event-loop delay p50/p99 ${o.eventLoopMs?.admission?.p50 ?? '?'}/${o.eventLoopMs?.admission?.p99 ?? '?'} ms`,
    );
  if (o.tcp)
    console.log(
      `connections waiting to be accepted by admission: mean ${o.tcp.acceptQueue?.mean ?? '?'}, max ${o.tcp.acceptQueue?.max ?? '?'}; ` +
        `box TCP in the window: ${Object.entries(o.tcp)
          .filter(([k]) => k !== 'acceptQueue')
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
    );
  if (o.dispatchQueue || o.shed)
    console.log(
      `dispatch queue (publish → first reply, less dispatch's own time): ${o.dispatchQueue ? `${o.dispatchQueue.n} actions, p50 ${o.dispatchQueue.p50Ms}, p99 ${o.dispatchQueue.p99Ms} ms` : 'none measured'}; ` +
        `refused 503 by load shedding (ADMISSION_SHED_QUEUE_MS): ${o.shed ?? 0}`,
    );
  const w = Object.entries(o.withdrawals ?? {});
  if (w.length) console.log(`admission's withdrawals by cause/outcome: ${w.map(([k, v]) => `${k} ${v}`).join(', ')}`);
  // where a dispatched action's time went (from the rows' timestamps; a request's wait before its
  // reservation statement is not in them: the client's latency less these)
  const st = [['dispatched actions', 'p50 ms', 'p99 ms']];
  for (const [k, label] of [
    ['admissionToDispatch', 'admitted → dispatch claimed'],
    ['dispatchToUpstreamDone', 'claimed → upstream answered'],
    ['upstreamDoneToLedger', 'upstream answered → ledger row'],
  ])
    st.push([label, o.stages[k]?.p50 ?? '', o.stages[k]?.p99 ?? '']);
  console.log('\n' + table(st, 1));
}

// ---------------------------------------------------------------- abandoned streams

/**
 * Streams whose client leaves once its answer is coming: each client reads its first chunk and
 * closes. The provider's stream runs on (its usage chunk settles the attempt), held mid-way by the
 * model's `stall`; what dispatch relays after the client left is work for nobody. The window runs
 * from the first stream to the last attempt settled, so every chunk of every stream is in it.
 */
async function abandonedPhase(cpu, pool, key) {
  const url = new URL('/v1/chat/completions', ADMISSION);
  const body = JSON.stringify({ model: STREAM_ALIAS, stream: true, messages: PROMPT });
  const open = () =>
    new Promise((resolve) => {
      const req = http.request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      });
      req.on('error', () => resolve(0));
      req.on('response', (res) => {
        res.on('error', () => undefined);
        res.once('data', () => {
          req.destroy(); // the client leaves after its first chunk
          resolve(res.statusCode);
        });
        res.once('end', () => resolve(res.statusCode));
      });
      req.end(body);
    });
  const withheld = async () => {
    const text = await (await fetch(`http://127.0.0.1:${PORTS.DISPATCH_PORT}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('gateway_dispatch_stream_chunks_withheld_total{'));
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };
  const streams = Math.round(CFG.abandonRate * CFG.durationS);
  log(`abandoned streams: ${streams} at ${CFG.abandonRate}/s on ${CFG.abandonModel}, each client leaving after its first chunk`);
  const withheldBefore = await withheld();
  const before = await cpu.snapshot();
  const t0 = Date.now();
  const opened = [];
  for (let i = 0; i < streams; i++) {
    opened.push(open());
    await sleep(Math.max(0, t0 + ((i + 1) * 1000) / CFG.abandonRate - Date.now()));
  }
  const statuses = await Promise.all(opened);
  const unsettled = async () =>
    Number(
      (
        await pool.query(
          `SELECT count(*) AS n FROM attempt t JOIN action a ON a.id = t.action_id
           WHERE a.workload_id = $1 AND t.status <> 'settled'`,
          [STREAM_ALIAS],
        )
      ).rows[0].n,
    );
  const deadline = Date.now() + CFG.drainTimeoutMs;
  while ((await unsettled()) > 0 && Date.now() < deadline) await sleep(100);
  const after = await cpu.snapshot();
  const { rows } = await pool.query(
    `SELECT count(*) AS attempts, count(*) FILTER (WHERE t.usage_source = 'stream_final_chunk') AS with_usage
     FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.workload_id = $1`,
    [STREAM_ALIAS],
  );
  const seconds = cpu.seconds(before, after);
  const perStream = Object.fromEntries(Object.entries(seconds).map(([k, v]) => [k, round((v * 1000) / streams, 2)]));
  const stack = Object.entries(seconds).reduce((n, [k, v]) => (k === 'loadGenerator' ? n : n + v), 0);
  return {
    model: CFG.abandonModel,
    rate: CFG.abandonRate,
    streams,
    ok: statuses.filter((c) => c === 200).length,
    attempts: Number(rows[0].attempts),
    settledWithUsage: Number(rows[0].with_usage),
    drained: (await unsettled()) === 0,
    windowS: round((Date.now() - t0) / 1000, 1),
    chunksWithheld: (await withheld()) - withheldBefore,
    cpuMsPerStream: { stack: round((stack * 1000) / streams, 2), ...perStream },
    loadavg: os.loadavg().map((l) => round(l, 2)),
  };
}

function reportAbandoned(a) {
  console.log(`\nAbandoned streams: ${a.streams} at ${a.rate}/s on ${a.model}, each client leaving after its first chunk`);
  console.log(
    `  ${a.ok} opened (200), ${a.attempts} attempts, ${a.settledWithUsage} settled from their usage chunk${a.drained ? '' : ' (NOT all settled in time)'}; ` +
      `window ${a.windowS} s; chunks dispatch withheld: ${a.chunksWithheld} (${round(a.chunksWithheld / a.streams, 1)} per stream); load avg ${a.loadavg.join(' ')}`,
  );
  console.log(
    table(
      [
        ['CPU ms per stream', ...Object.keys(a.cpuMsPerStream)],
        ['', ...Object.values(a.cpuMsPerStream)],
      ],
      1,
    ),
  );
}

// ---------------------------------------------------------------- hedged phase (issue 10)

/**
 * The same request through the gateway on the heavy-tailed route, first for the workload without a
 * hedge policy, then for the one with a hedge: latency percentiles, then what each action cost once
 * every attempt has ended. Spend is the gateway's books — settled ledger cost plus the exposure held
 * by open cases (aborted losers without usage are never zero) — per action.
 */
async function hedgedPhase(pool, keys) {
  const out = { upstreamModel: TAIL.model, rate: CFG.hedgeRate, hedgeDelayMs: CFG.hedgeDelayMs, runs: {} };
  for (const [mode, workload] of [
    ['without hedging', TAIL.plain],
    ['with hedging', TAIL.hedged],
  ]) {
    log(`hedged phase, ${mode}: ${CFG.hedgeRate} req/s for ${CFG.durationS} s on ${TAIL.model}`);
    const request = {
      url: `${ADMISSION}/v1/chat/completions`,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keys[workload]}` },
      body: JSON.stringify({ model: TAIL.alias, messages: PROMPT }),
    };
    out.runs[workload] = {
      mode,
      loadavg: os.loadavg().map((l) => round(l, 2)),
      ...(await load(request, { overallRate: CFG.hedgeRate, duration: CFG.durationS })),
    };
    await resetSim();
  }
  const workloads = [TAIL.plain, TAIL.hedged];
  const deadline = Date.now() + CFG.drainTimeoutMs;
  // every attempt ended and handed to settlement or reconciliation
  const busy = async () =>
    Number(
      (
        await pool.query(
          `SELECT count(*) AS n FROM attempt t JOIN action a ON a.id = t.action_id
           WHERE a.workload_id = ANY($1::text[]) AND t.status NOT IN ('settled', 'reconciliation_required')`,
          [workloads],
        )
      ).rows[0].n,
    );
  while ((await busy()) > 0 && Date.now() < deadline) await sleep(500);
  for (const workload of workloads) {
    const { rows } = await pool.query(
      `SELECT
         (SELECT count(*) FROM action a WHERE a.workload_id = $1) AS actions,
         (SELECT count(*) FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.workload_id = $1) AS attempts,
         (SELECT count(*) FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.workload_id = $1 AND t.role = 'hedge') AS hedges,
         (SELECT count(*) FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.workload_id = $1 AND t.role = 'hedge' AND t.winner) AS hedges_won,
         (SELECT coalesce(sum(cost_microusd), 0) FROM ledger_entry WHERE workload_id = $1) AS settled,
         (SELECT coalesce(sum(c.exposure_microusd), 0) FROM reconciliation_case c JOIN action a ON a.id = c.action_id
           WHERE a.workload_id = $1 AND c.status = 'open') AS unresolved`,
      [workload],
    );
    const r = rows[0];
    const actions = Number(r.actions);
    const perAction = (v) => (actions > 0 ? round(Number(v) / actions, 1) : null);
    Object.assign(out.runs[workload], {
      actions,
      attempts: Number(r.attempts),
      hedges: Number(r.hedges),
      hedgesWon: Number(r.hedges_won),
      settledMicrousd: String(r.settled),
      unresolvedMicrousd: String(r.unresolved),
      settledPerActionMicrousd: perAction(r.settled),
      // worst cases held for attempts without usage (aborted losers): exposure, not a cost
      heldPerActionMicrousd: perAction(r.unresolved),
    });
  }
  out.drained = (await busy()) === 0;
  const [plain, hedged] = workloads.map((w) => out.runs[w]);
  const extra = (a, b) => (a && b !== null ? round((b / a - 1) * 100, 1) : null);
  out.extraSettledPct = extra(plain.settledPerActionMicrousd, hedged.settledPerActionMicrousd);
  out.extraWithHeldPct = extra(
    plain.settledPerActionMicrousd + plain.heldPerActionMicrousd,
    hedged.settledPerActionMicrousd + hedged.heldPerActionMicrousd,
  );
  out.p99RatioHedgedToPlain = plain.p99Ms && hedged.p99Ms !== null ? round(hedged.p99Ms / plain.p99Ms, 3) : null;
  return out;
}

function reportHedged(h) {
  console.log('');
  console.log(`Hedged phase: gateway on ${h.upstreamModel}, ${h.rate} req/s, hedge after ${h.hedgeDelayMs} ms (one hedge, no retries)`);
  console.log('');
  const rows = [
    [
      '',
      'ok req/s',
      'p50 ms',
      'p99 ms',
      'max ms',
      'actions',
      'attempts',
      'hedges (won)',
      'settled µUSD/action',
      'held µUSD/action',
      'load avg',
    ],
  ];
  for (const r of Object.values(h.runs)) {
    rows.push([
      r.mode,
      r.okPerSec,
      r.p50Ms,
      r.p99Ms,
      r.maxMs,
      r.actions,
      r.attempts,
      `${r.hedges} (${r.hedgesWon})`,
      r.settledPerActionMicrousd,
      r.heldPerActionMicrousd,
      r.loadavg.join(' '),
    ]);
  }
  console.log(table(rows, 1));
  const drained = h.drained ? '' : ' (some attempts had not ended when measured)';
  console.log(
    `extra spend with hedging, per action: ${h.extraSettledPct ?? 'n/a'} % settled; ${h.extraWithHeldPct ?? 'n/a'} % counting the worst cases held for aborted losers (exposure until their usage is known); p99 hedged / plain: ${h.p99RatioHedgedToPlain ?? 'n/a'}${drained}`,
  );
}

// ---------------------------------------------------------------- settlement and stages

/** Waits until every admitted action of the measured phases has a ledger row (or gives up). */
async function waitForSettlement(pool, loadEnded, rounds, phases) {
  const count = async (workloads) => {
    const { rows } = await pool.query(
      `SELECT (SELECT count(*) FROM action a WHERE a.workload_id = ANY($1::text[]))::int AS actions,
              (SELECT count(*) FROM action a WHERE a.workload_id = ANY($1::text[])
                 AND a.status = 'expired' AND a.status_reason LIKE 'expired: withdrawn by admission%')::int AS withdrawn,
              (SELECT count(*) FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.workload_id = ANY($1::text[]))::int AS attempts,
              (SELECT count(*) FROM ledger_entry l WHERE l.workload_id = ANY($1::text[]))::int AS ledger`,
      [workloads],
    );
    return rows[0];
  };
  // A request in flight when a run ends loses its client (autocannon closes the connection): if
  // that was before its dispatch, admission withdrew it, and it has no attempt and no ledger row.
  const settled = (c) => c.ledger >= c.actions - c.withdrawn;
  const all = phases.flatMap((p) => p.workloads);
  const deadline = loadEnded + CFG.drainTimeoutMs;
  let total = await count(all);
  while (!settled(total) && Date.now() < deadline) {
    await sleep(250);
    total = await count(all);
  }
  const out = { caughtUp: settled(total), drainMs: Date.now() - loadEnded, byPhase: {} };
  for (const phase of phases) {
    const r = await count(phase.workloads);
    const gateway = rounds[phase.name].map((pair) => pair.gateway);
    out.byPhase[phase.name] = {
      workloads: phase.workloads.length,
      responses: gateway.reduce((n, g) => n + g.completed, 0),
      ok: gateway.reduce((n, g) => n + g.ok, 0),
      actions: r.actions,
      withdrawn: r.withdrawn,
      attempts: r.attempts,
      ledgerRows: r.ledger,
    };
  }
  return out;
}

/** Where the time goes inside the gateway, from the rows' own timestamps (ms resolution). */
async function stageBreakdown(pool, workloads) {
  const { rows } = await pool.query(
    `WITH s AS (
       SELECT extract(epoch FROM t.started_at - a.created_at) * 1000 AS to_dispatch,
              extract(epoch FROM t.ended_at - t.started_at) * 1000 AS upstream,
              extract(epoch FROM t.ended_at - a.created_at) * 1000 AS admit_to_upstream_done,
              extract(epoch FROM l.settled_at - t.ended_at) * 1000 AS settle_lag
         FROM action a
         JOIN attempt t ON t.action_id = a.id
         LEFT JOIN ledger_entry l ON l.attempt_id = t.id
        WHERE a.workload_id = ANY($1::text[]))
     SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY to_dispatch) AS to_dispatch,
            percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY upstream) AS upstream,
            percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY admit_to_upstream_done) AS admit_to_upstream_done,
            percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY settle_lag) AS settle_lag
       FROM s`,
    [workloads],
  );
  const r = rows[0];
  const pair = (a) => (a ? { p50: round(Number(a[0]), 1), p99: round(Number(a[1]), 1) } : null);
  return {
    admissionToDispatch: pair(r?.to_dispatch),
    dispatchToUpstreamDone: pair(r?.upstream),
    admissionToUpstreamDone: pair(r?.admit_to_upstream_done),
    upstreamDoneToLedger: pair(r?.settle_lag),
  };
}

async function scrapeMetrics() {
  try {
    const text = await (await fetch(`${ADMISSION}/metrics`)).text();
    const lines = text.split('\n').filter((l) => l.startsWith('gateway_admission_request_seconds_'));
    const pick = (suffix) =>
      lines.filter((l) => l.startsWith(`gateway_admission_request_seconds_${suffix}`) && l.includes('outcome="answered"'));
    const count = Number(pick('count')[0]?.split(' ').pop() ?? NaN);
    const sum = Number(pick('sum')[0]?.split(' ').pop() ?? NaN);
    const buckets = pick('bucket').map((l) => ({ le: /le="([^"]+)"/.exec(l)?.[1], count: Number(l.split(' ').pop()) }));
    const decisions = text.split('\n').filter((l) => l.startsWith('gateway_admission_decisions_total'));
    fs.writeFileSync(path.join(LOG_DIR, 'admission-metrics.txt'), text);
    return { answered: count, meanSeconds: count > 0 ? round(sum / count, 4) : null, buckets, decisions };
  } catch (err) {
    return { error: err.message };
  }
}

// ---------------------------------------------------------------- Postgres waits

/**
 * Samples pg_stat_activity of the bench database every 100 ms while a run lasts: what the
 * busy backends are doing ("CPU" = active and not waiting; "idle in transaction" = a transaction
 * held open while its client works between statements). Averages are backends per sample.
 */
function pgWaitSampler(pool) {
  const counts = new Map();
  let samples = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const { rows } = await pool.query(
          `SELECT state, wait_event_type, wait_event, regexp_replace(left(query, 200), '\\s+', ' ', 'g') AS query
             FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')`,
        );
        samples += 1;
        for (const r of rows) {
          const what =
            r.state === 'idle in transaction' ? 'idle in transaction' : r.wait_event_type ? `${r.wait_event_type}:${r.wait_event}` : 'CPU';
          const stmt = statementLabel(r.query);
          const key = `${what}|${stmt}`;
          counts.set(key, (counts.get(key) ?? 0) + 1);
        }
      } catch {
        // a failed sample is just skipped
      }
      await sleep(100);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      const top = [...counts.entries()]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 8)
        .map(([key, n]) => {
          const [what, statement] = key.split('|');
          return { what, statement, avgBackends: round(n / Math.max(1, samples), 2) };
        });
      return { samples, top };
    },
  };
}

/**
 * Transactions committed or rolled back in the bench database so far, and sessions (connections)
 * opened to it (pg_stat_database; the backends report at most a second late, and the bench's own
 * samples count too: read it as approximate). Each commit of a writing transaction is a WAL flush;
 * each session a new backend process (fork, authentication, catalog caches, and the statements
 * and PL/pgSQL functions prepared again on first use).
 */
async function pgActivity(pool) {
  try {
    const { rows } = await pool.query(
      `SELECT pg_stat_clear_snapshot(), d.xact_commit + d.xact_rollback AS transactions, d.sessions
         FROM pg_stat_database d WHERE d.datname = current_database()`,
    );
    return { transactions: Number(rows[0].transactions), sessions: Number(rows[0].sessions) };
  } catch {
    return { transactions: NaN, sessions: NaN };
  }
}

/** The tables the request path and settlement update, whose updates are reported as HOT or not. */
const UPDATED_TABLES = ['action', 'attempt', 'budget_account', 'quota_counter', 'reservation'];

/** scripts/pg-write-work.mjs's statements, run on the pool. */
const rowsOf = (pool) => async (sql, params) => (await pool.query(sql, params)).rows;

/** Where the WAL and the updated tables' counters stand (null when the server cannot say). */
async function pgWrites(pool) {
  try {
    return { wal: await walPosition(rowsOf(pool)), updates: await updateCounts(rowsOf(pool), UPDATED_TABLES) };
  } catch {
    return null;
  }
}

/**
 * What Postgres wrote since `before` (a pgWrites) per 2xx answer: WAL bytes (exact), records and
 * full-page images (pg_stat_wal, up to a second late), and per table its updates per answer and
 * the share of them that were HOT. The WAL is the whole server's (the bench's box runs nothing
 * else); the run's answers are settled partly after it, as the previous run's were during it.
 */
async function pgWritesPer(pool, before, ok) {
  if (!before || ok <= 0) return null;
  try {
    const wal = await walSince(rowsOf(pool), before.wal);
    const per = (n, digits = 1) => (n === null ? null : round(n / ok, digits));
    const after = await updateCounts(rowsOf(pool), UPDATED_TABLES);
    const tables = hotShares(before.updates, after).map((t) => ({ ...t, updates: per(t.updates) }));
    const byRelation = await walByRelation(rowsOf(pool), wal.range).catch(() => null);
    return {
      walBytes: Math.round(wal.bytes / ok),
      walRecords: per(wal.records),
      walFpi: per(wal.fpi, 2),
      walSyncs: per(wal.syncs, 2),
      tables,
      walByRelation: byRelation && walLines(byRelation, ok),
    };
  } catch {
    return null;
  }
}

/** "UPDATE quota_counter", "INSERT INTO action", "COMMIT"…: enough to tell statements apart. */
function statementLabel(query) {
  const q = (query ?? '').trim().replace(/"/g, '');
  const m = /^(SELECT|INSERT INTO|UPDATE|DELETE FROM|BEGIN|COMMIT|ROLLBACK)\b\s*([\w.]*)/i.exec(q);
  if (!m) return q.slice(0, 40);
  if (/^SELECT$/i.test(m[1])) {
    const from = /\bFROM\s+([\w.]+)/i.exec(q);
    return `SELECT ${from ? from[1].split('.').pop() : ''}${/FOR UPDATE/i.test(q) ? ' FOR UPDATE' : ''}`.trim();
  }
  return `${m[1].toUpperCase()} ${m[2].split('.').pop()}`.trim();
}

// ---------------------------------------------------------------- CPU

/**
 * CPU, syscalls and context switches of each process of the stack, read from /proc (Linux only;
 * elsewhere empty but for the bench process's own CPU), so a run can say how many cores each part
 * used and how often it entered the kernel and slept. Postgres is counted through the backends
 * connected to the bench database, when the server is local.
 *
 * Per process: utime and stime (/proc/<pid>/stat, all threads), syscr and syscw (/proc/<pid>/io,
 * all threads: every read/recv and write/writev/send syscall, sockets included) and the
 * voluntary (slept: waited for a socket, a lock, a timer) and nonvoluntary (preempted) context
 * switches, summed over /proc/<pid>/task/<tid>/status (status of the pid alone counts its main
 * thread only) per thread, so a thread that ends between two snapshots takes only its own with it.
 */
function cpuProbe({ services, kafka, pool, pgUrl }) {
  let hz = 100;
  try {
    hz = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    // assume 100
  }
  const read = (file) => {
    try {
      return fs.readFileSync(file, 'utf8');
    } catch {
      return null;
    }
  };
  const field = (text, name) => {
    const m = text && new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text);
    return m ? Number(m[1]) : null;
  };
  /**
   * Context switches and CPU seconds per thread (tid → counts): threads come and go (the JVM's
   * do, often). `helper` marks a thread that compiles or collects garbage beside the work itself:
   * in a node process every thread but the main one (V8's worker pool: the optimizing compiler,
   * concurrent and parallel GC; libuv's pool, idle here), in the broker the JVM's compiler threads.
   */
  const threads = (pid) => {
    try {
      const list = fs.readdirSync(`/proc/${pid}/task`).map((tid) => {
        const status = read(`/proc/${pid}/task/${tid}/status`);
        const f = procStatFields(`/proc/${pid}/task/${tid}/stat`);
        return {
          tid,
          name: /^Name:\s+(.*)$/m.exec(status ?? '')?.[1] ?? '',
          vcsw: field(status, 'voluntary_ctxt_switches') ?? 0,
          nvcsw: field(status, 'nonvoluntary_ctxt_switches') ?? 0,
          cpu: f ? (Number(f[11]) + Number(f[12])) / hz : 0,
        };
      });
      const jvm = list.some((t) => t.name === 'VM Thread');
      return Object.fromEntries(
        list.map(({ tid, name, ...t }) => [tid, { ...t, helper: jvm ? /^C\d CompilerThre/.test(name) : tid !== String(pid) }]),
      );
    } catch {
      return null;
    }
  };
  const sample = (pid) => {
    const f = procStatFields(`/proc/${pid}/stat`);
    if (!f) return null;
    const io = read(`/proc/${pid}/io`);
    return {
      user: Number(f[11]) / hz,
      system: Number(f[12]) / hz,
      syscr: field(io, 'syscr'),
      syscw: field(io, 'syscw'),
      minflt: Number(f[7]),
      threads: threads(pid),
    };
  };
  const self = () => {
    const u = process.cpuUsage();
    return sample(process.pid) ?? { user: u.user / 1e6, system: u.system / 1e6, syscr: null, syscw: null, minflt: null, threads: null };
  };
  const pgLocal = ['127.0.0.1', 'localhost', '::1'].includes(new URL(pgUrl).hostname);
  const SCALARS = ['user', 'system', 'syscr', 'syscw', 'minflt'];
  const COUNTERS = [...SCALARS, 'vcsw', 'nvcsw', 'helper'];
  // A thread (or backend) that started in between counts all it did; one that ended is lost.
  const switched = (a, b, k) =>
    a.threads ? Object.entries(a.threads).reduce((n, [tid, t]) => n + t[k] - (b?.threads?.[tid]?.[k] ?? 0), 0) : null;
  const helperSeconds = (a, b) =>
    a.threads ? Object.entries(a.threads).reduce((n, [tid, t]) => (t.helper ? n + t.cpu - (b?.threads?.[tid]?.cpu ?? 0) : n), 0) : null;
  const diff = (a, b) =>
    Object.fromEntries([
      ...SCALARS.map((k) => [k, a[k] != null && b?.[k] != null ? a[k] - b[k] : a[k] != null && !b ? a[k] : null]),
      ['vcsw', switched(a, b, 'vcsw')],
      ['nvcsw', switched(a, b, 'nvcsw')],
      ['helper', helperSeconds(a, b)],
    ]);
  const sum = (list) =>
    Object.fromEntries(COUNTERS.map((k) => [k, list.some((d) => d[k] == null) ? null : list.reduce((n, d) => n + d[k], 0)]));
  /** Counter increments per process between two snapshots (postgres: its backends summed). */
  const delta = (before, after) => {
    const out = {};
    for (const [k, v] of Object.entries(after)) {
      if (k === 'box') continue;
      if (k === 'postgresBackends') {
        out.postgres = sum(Object.entries(v).flatMap(([pid, s]) => (s ? [diff(s, before.postgresBackends?.[pid])] : [])));
      } else if (v != null && before[k] != null) {
        out[k] = diff(v, before[k]);
      }
    }
    return out;
  };
  const ratio = (n, d, digits) => (n != null && d > 0 ? round(n / d, digits) : null);
  return {
    async snapshot() {
      const s = {};
      for (const c of services.children) s[c.service.name] = sample(c.child.pid);
      if (kafka.pid) s.kafka = sample(kafka.pid);
      if (pgLocal) {
        const { rows } = await pool.query(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
        );
        s.postgresBackends = Object.fromEntries(rows.map((r) => [r.pid, sample(r.pid)]));
      }
      s.loadGenerator = self();
      s.box = boxCpu(hz);
      return s;
    },
    /** CPU seconds (user + system) per process between two snapshots. */
    seconds(before, after) {
      return Object.fromEntries(Object.entries(delta(before, after)).map(([k, d]) => [k, d.user + d.system]));
    },
    /** The part of `seconds` spent on helper threads (compilers, GC helpers; see `threads`); null where unknown. */
    helperSeconds(before, after) {
      return Object.fromEntries(Object.entries(delta(before, after)).map(([k, d]) => [k, d.helper == null ? null : Math.max(0, d.helper)]));
    },
    /**
     * Per process, and for the stack (services + kafka + postgres, not the load generator): read
     * and write syscalls, voluntary and nonvoluntary context switches per `n` (2xx answers, or
     * seconds), and the system share of its CPU in %.
     */
    counts(before, after, n) {
      if (n <= 0) return null;
      const d = delta(before, after);
      const box = boxCpuShares(before.box, after.box);
      const stack = sum(Object.entries(d).flatMap(([k, v]) => (k === 'loadGenerator' ? [] : [v])));
      const per = (c) => ({
        writes: ratio(c.syscw, n, 2),
        reads: ratio(c.syscr, n, 2),
        voluntaryCtxSw: ratio(c.vcsw, n, 2),
        involuntaryCtxSw: ratio(c.nvcsw, n, 2),
        minorFaults: ratio(c.minflt, n, 1),
        systemPct: ratio(100 * c.system, c.user + c.system, 1),
      });
      if (Object.keys(d).length === 0) return {};
      return {
        ...Object.fromEntries(Object.entries(d).map(([k, c]) => [k, per(c)])),
        total: per(stack),
        ...(box ? { boxCpuPct: box } : {}),
      };
    },
  };
}

/**
 * The stack's CPU per answer in units of one direct call's CPU (provider-sim + load generator per
 * 2xx answer in the same phase's baseline run): the same code costs the same number of direct
 * calls on a faster or slower machine, or while the host slows the guest down, which CPU ms do not
 * (the direct call's own CPU moved 390–590 µs between runs of one hour on one box).
 */
function directCallUnits(baselineCpu, gatewayCpu) {
  const direct = baselineCpu ? (baselineCpu['provider-sim'] ?? 0) + (baselineCpu.loadGenerator ?? 0) : 0;
  if (!(direct > 0) || !gatewayCpu) return {};
  return { directCallCpuMs: round(direct, 3), stackCpuPerOkInDirectCalls: round(gatewayCpu.total / direct, 1) };
}

/** Cores used per process (3 decimals, so an idle stack's hundredths show). */
const perSecond = (cpuSeconds, seconds) => Object.fromEntries(Object.entries(cpuSeconds).map(([k, v]) => [k, round(v / seconds, 3)]));

/** The stack's own processes: everything measured except the bench process itself. */
const stackSeconds = (cpuSeconds) => Object.entries(cpuSeconds).reduce((a, [k, v]) => (k === 'loadGenerator' ? a : a + v), 0);

/**
 * CPU ms per 2xx answer, per process and summed over the stack (services, broker, Postgres
 * backends; not the load generator). CPU a process spends after the run (settling what the run
 * admitted) is not in it.
 */
function cpuMsPer(cpuSeconds, ok) {
  if (ok <= 0) return null;
  const per = Object.fromEntries(Object.entries(cpuSeconds).map(([k, v]) => [k, v == null ? null : round((v * 1000) / ok, 2)]));
  return { ...per, total: round((stackSeconds(cpuSeconds) * 1000) / ok, 2) };
}

/**
 * RSS now and at its peak (VmHWM) per service process, and the broker's when the bench started
 * one, in MB (Linux only; elsewhere empty).
 */
function rss(services, brokerPid) {
  const out = {};
  for (const c of services.children) {
    const m = processMemoryMb(c.child.pid);
    if (m) out[c.service.name] = m;
  }
  const broker = brokerPid ? processMemoryMb(brokerPid) : null;
  if (broker) out.kafka = broker;
  return out;
}

/**
 * RSS (rss()) plus where it sits, per service, in MB: V8 heap used / total and external memory
 * (array buffers included) from each service's /metrics (prom-client's default metrics; the
 * provider simulator and the broker have none).
 */
async function memory(services, brokerPid) {
  const out = rss(services, brokerPid);
  await Promise.all(
    services.children.map(async (c) => {
      if (!out[c.service.name] || c.service.name === 'provider-sim') return;
      try {
        const text = await (await fetch(`http://127.0.0.1:${PORTS[c.service.portEnv]}/metrics`)).text();
        const mb = (metric) => {
          const line = text.split('\n').find((l) => l.startsWith(`${metric}{`) || l.startsWith(`${metric} `));
          return line ? round(Number(line.split(' ').pop()) / 1024 / 1024, 1) : null;
        };
        Object.assign(out[c.service.name], {
          heapUsed: mb('nodejs_heap_size_used_bytes'),
          heapTotal: mb('nodejs_heap_size_total_bytes'),
          external: mb('nodejs_external_memory_bytes'),
        });
      } catch {
        // no /metrics: RSS only
      }
    }),
  );
  return out;
}

/**
 * Event-loop delay per service from its /metrics (prom-client's default metrics: a
 * perf_hooks.monitorEventLoopDelay histogram that every scrape reads and resets). `reset()`
 * scrapes to start a window; `read()` scrapes again and returns p50/p99/max of that window in ms,
 * beyond the histogram's sampling interval.
 */
const EVENT_LOOP_RESOLUTION_MS = 50; // = EVENT_LOOP_SAMPLE_MS in libs/service-kit/src/metrics.ts

function eventLoopProbe(services) {
  const targets = services.children
    .filter((c) => c.service.name !== 'provider-sim')
    .map((c) => [c.service.name, `http://127.0.0.1:${PORTS[c.service.portEnv]}/metrics`]);
  // The histogram records the time between ticks of a timer (eventLoopMonitoringPrecision,
  // EVENT_LOOP_SAMPLE_MS in libs/service-kit/src/metrics.ts): what exceeds the interval is the delay.
  const gauge = (text, name) => {
    const line = text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
    return line ? round(Math.max(0, Number(line.split(' ').pop()) * 1000 - EVENT_LOOP_RESOLUTION_MS), 1) : null;
  };
  const scrape = async () =>
    Object.fromEntries(
      await Promise.all(
        targets.map(async ([name, url]) => {
          try {
            const text = await (await fetch(url)).text();
            return [
              name,
              {
                p50: gauge(text, 'nodejs_eventloop_lag_p50_seconds'),
                p99: gauge(text, 'nodejs_eventloop_lag_p99_seconds'),
                max: gauge(text, 'nodejs_eventloop_lag_max_seconds'),
              },
            ];
          } catch {
            return [name, null];
          }
        }),
      ),
    );
  return { reset: scrape, read: scrape };
}

/**
 * Memory per service: RSS after start, after the idle phase and at the end of saturation/gateway
 * (with its peak), and the V8 heap (used/total) and external memory behind each; then the
 * start-up time (spawn → /health 200).
 */
function reportMemory(memoryMb, startupMs = {}) {
  const at = Object.entries(memoryMb).filter(([, m]) => m && Object.keys(m).length > 0);
  if (at.length === 0) return;
  const names = Object.keys(at[at.length - 1][1]);
  const cell = (m) => (m ? `${m.rss}${m.heapUsed != null ? ` (${m.heapUsed}/${m.heapTotal}/${m.external})` : ''}` : '');
  const rows = [['RSS MB (heap used/total/external)', ...at.map(([when]) => when), 'peak', 'start-up s']];
  for (const n of names) {
    const s = startupMs[n];
    rows.push([n, ...at.map(([, m]) => cell(m[n])), at[at.length - 1][1][n]?.peak ?? '', s ? round(s / 1000, 1) : '']);
  }
  console.log('\n' + table(rows, 1));
  if (names.includes('kafka'))
    console.log('(kafka: the broker the bench started, a JVM: RSS only; its heap flags are in scripts/kafka.mjs)');
}

/**
 * Counters each service exports on /metrics, one scrape per service for all of them: for each
 * name in `keys`, the lines its function names a key for (null: not counted), summed per service
 * and key. `perOk` turns two scrapes of one name into counts per 2xx answer, and in total.
 */
function metricsCounterProbe(services, keys) {
  const targets = services.children
    .filter((c) => c.service.name !== 'provider-sim')
    .map((c) => [c.service.name, `http://127.0.0.1:${PORTS[c.service.portEnv]}/metrics`]);
  const scrape = async () => {
    const out = Object.fromEntries(Object.keys(keys).map((k) => [k, {}]));
    await Promise.all(
      targets.map(async ([name, url]) => {
        try {
          const text = await (await fetch(url)).text();
          for (const line of text.split('\n')) {
            for (const [counter, keyOf] of Object.entries(keys)) {
              const key = keyOf(line);
              if (key) out[counter][`${name}|${key}`] = (out[counter][`${name}|${key}`] ?? 0) + Number(line.split(' ').pop());
            }
          }
        } catch {
          // a service without metrics counts nothing
        }
      }),
    );
    return out;
  };
  const perOk = (before, after, ok, digits = 2) => {
    if (ok <= 0) return null;
    const out = { total: 0 };
    for (const [key, n] of Object.entries(after)) {
      const d = n - (before[key] ?? 0);
      if (d <= 0) continue;
      const [service, what] = key.split('|');
      (out[service] ??= {})[what] = round(d / ok, digits);
      out.total += d / ok;
    }
    out.total = round(out.total, digits);
    return out;
  };
  return { scrape, perOk };
}

/**
 * Kafka requests each service sent (`gateway_kafka_requests_total`, by client and API):
 * "producer Produce", "consumer Fetch", "consumer OffsetCommit"…
 */
function kafkaRequestKey(line) {
  if (!line.startsWith('gateway_kafka_requests_total{')) return null;
  return `${/client="([^"]+)"/.exec(line)?.[1]} ${/api="([^"]+)"/.exec(line)?.[1]}`;
}

/**
 * V8's garbage collections in each service (prom-client's `nodejs_gc_duration_seconds`, from
 * Node's `gc` performance entries): how many of each kind, and the main thread's pause time.
 * Where concurrent marking is on (settlement), a major GC's marking runs on a helper thread and is
 * not in the pause: that CPU is in the helper-thread figures (docs/decisions.md, "The tail at 100 req/s: V8's concurrent marking").
 */
function gcKey(line) {
  const m = /^nodejs_gc_duration_seconds_(count|sum)\{/.exec(line);
  const kind = m && /kind="([a-z]+)"/.exec(line)?.[1];
  if (!kind) return null;
  return m[1] === 'count' ? `${kind} GCs` : `${kind} pause s`;
}

/** The longest broker pause of each gateway run, for the GC table's footnote ('' without a GC log). */
function brokerMaxPauses(result, phases) {
  const parts = phases.flatMap((p) => {
    const gc = result.runs[p.name].gateway.brokerGc;
    return gc ? [`${p.name} ${round(gc.maxPauseMs, 1)} ms`] : [];
  });
  return parts.length ? `\n(the broker's longest pause: ${parts.join(', ')})` : '';
}

/**
 * The broker's collections during a run (brokerGcPauses) in the GC table's keys, per 1,000 2xx
 * answers: young ones count as minor, full ones as major.
 */
function brokerGcPer1000Ok(gc, ok) {
  if (ok <= 0) return null;
  const per = (n) => round((n * 1000) / ok, 4);
  return {
    'minor GCs': per(gc.young),
    'minor pause s': per(gc.youngPauseMs / 1000),
    'major GCs': per(gc.full),
    'major pause s': per(gc.fullPauseMs / 1000),
  };
}

/**
 * No traffic: waits BENCH_IDLE_SETTLE_S for the stack to quiet down (back-offs reach their
 * ceiling), then measures CPU per process over BENCH_IDLE_S.
 */
async function idlePhase(cpu, loop) {
  log(`idle: ${CFG.idleSettleS} s quiet, then ${CFG.idleS} s measured`);
  await sleep(CFG.idleSettleS * 1000);
  await loop.reset();
  const before = await cpu.snapshot();
  const t = Date.now();
  await sleep(CFG.idleS * 1000);
  const after = await cpu.snapshot();
  const seconds = (Date.now() - t) / 1000;
  const eventLoopDelayMs = await loop.read();
  const cpuSeconds = cpu.seconds(before, after);
  return {
    seconds: round(seconds, 2),
    cpuCores: perSecond(cpuSeconds, seconds),
    totalCores: round(stackSeconds(cpuSeconds) / seconds, 3),
    syscallsPerSecond: cpu.counts(before, after, seconds),
    eventLoopDelayMs,
  };
}

/**
 * The soak (`--soak`): the gateway alone at BENCH_RATE, first BENCH_SOAK_WARMUP_S unmeasured on the
 * warm-up workload (the JIT, the pools and the caches fill), then, on the rate workload, windows of BENCH_SOAK_WINDOW_S for BENCH_SOAK_S. Every
 * BENCH_SOAK_SAMPLE_S each service's memory is sampled (`memory()`: RSS from /proc, heap from its
 * /metrics); a window keeps each service's lowest heap used (its trough, ~what survives a
 * collection), its highest RSS, its answers and latency, and the stack's CPU per answer.
 */
async function soakPhase(requests, services, brokerPid, cpu) {
  const opts = { lanes: CFG.rateLanes, overallRate: CFG.rate };
  log(`soak: warming the gateway at ${CFG.rate} req/s for ${CFG.soakWarmupS} s (not reported)`);
  await load(requests.warmup, { ...opts, duration: CFG.soakWarmupS });
  const fullGcMb = { start: await fullGcHeaps(services) };
  let answersAtMid = 0;
  const windows = [];
  let answers = 0;
  const started = Date.now();
  log(`soak: ${CFG.rate} req/s for ${CFG.soakS} s, windows of ${CFG.soakWindowS} s, memory sampled every ${CFG.soakSampleS} s`);
  while (Date.now() - started < CFG.soakS * 1000 && !shuttingDown) {
    const samples = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        samples.push(await memory(services, brokerPid));
        await sleep(CFG.soakSampleS * 1000);
      }
    })();
    const before = await cpu.snapshot();
    const run = await load(requests.soak, { ...opts, duration: CFG.soakWindowS });
    const after = await cpu.snapshot();
    sampling = false;
    await sampler;
    answers += run.ok;
    if (!fullGcMb.mid && Date.now() - started >= (CFG.soakS * 1000) / 2) {
      fullGcMb.mid = await fullGcHeaps(services);
      answersAtMid = answers;
    }
    const rssPeak = {};
    for (const sample of samples)
      for (const [service, m] of Object.entries(sample)) rssPeak[service] = Math.max(rssPeak[service] ?? 0, m.rss ?? 0);
    const window = {
      endS: round((Date.now() - started) / 1000, 1),
      answers,
      run,
      heapTroughMb: troughs(samples),
      externalTroughMb: troughs(samples, 'external'),
      rssPeakMb: rssPeak,
      stackCpuMsPerOk: cpuMsPer(cpu.seconds(before, after), run.ok)?.total ?? null,
    };
    windows.push(window);
    log(
      `  ${window.endS} s: ${run.okPerSec} ok/s, p50 ${run.p50Ms} ms, p99 ${run.p99Ms} ms, stack CPU ${window.stackCpuMsPerOk} ms/answer; heap troughs MB ${Object.entries(
        window.heapTroughMb,
      )
        .map(([n, v]) => `${n} ${v}`)
        .join(', ')}`,
    );
  }
  const names = [...new Set(windows.flatMap((w) => Object.keys(w.rssPeakMb)))];
  const growth = Object.fromEntries(
    names.map((n) => [
      n,
      {
        rssFirstMb: windows[0]?.rssPeakMb[n] ?? null,
        rssLastMb: windows.at(-1)?.rssPeakMb[n] ?? null,
        rssMaxMb: Math.max(...windows.map((w) => w.rssPeakMb[n] ?? 0)),
      },
    ]),
  );
  return { seconds: round((Date.now() - started) / 1000, 1), answers, answersAtMid, windows, growth, fullGcMb };
}

/** Each node service's heap after a full collection (`heapAfterFullGc`), one after the other; null where it failed. */
async function fullGcHeaps(services) {
  const out = {};
  for (const c of services.children)
    out[c.service.name] = await heapAfterFullGc(c.child.pid).catch((err) => {
      log(`full collection of ${c.service.name} failed: ${err.message}`);
      return null;
    });
  return out;
}

function reportSoak(soak) {
  const w = soak.windows;
  const range = (f) => `${Math.min(...w.map(f))}–${Math.max(...w.map(f))}`;
  console.log(
    `\nSoak: the gateway at ${CFG.rate} req/s for ${soak.seconds} s, ${soak.answers} answers in ${w.length} windows of ${CFG.soakWindowS} s` +
      ` (p50 ${range((x) => x.run.p50Ms)} ms, p99 ${range((x) => x.run.p99Ms)} ms, stack CPU ${range((x) => x.stackCpuMsPerOk)} ms/answer by window)`,
  );
  const rows = [
    [
      'service',
      'heap after a full GC, MB: before → half-way → after',
      'its growth, KB per 1,000 answers: first half / second half',
      'second half, MB a day at this rate',
      'heap troughs MB: first / last window',
      'RSS MB: first / last window / max',
    ],
  ];
  const first = w[0]?.heapTroughMb ?? {};
  const last = w.at(-1)?.heapTroughMb ?? {};
  for (const [n, g] of Object.entries(soak.growth))
    rows.push([
      n,
      ['start', 'mid', 'end'].map((at) => soak.fullGcMb[at]?.[n] ?? '—').join(' → '),
      ['firstHalf', 'secondHalf'].map((h) => (g.fullGc?.[h] ? signed(g.fullGc[h].kbPer1000Answers) : '—')).join(' / '),
      g.fullGc?.secondHalf ? signed(g.fullGc.secondHalf.mbPerDay) : '—',
      `${first[n] ?? '—'} / ${last[n] ?? '—'}`,
      `${g.rssFirstMb} / ${g.rssLastMb} / ${g.rssMaxMb}`,
    ]);
  console.log(table(rows, 1));
  const s = soak.settlement;
  console.log(
    `settlement: ${s.byPhase.rate.ledgerRows} ledger rows for ${s.byPhase.rate.actions} actions (${s.byPhase.rate.ok} answered 2xx), ${s.caughtUp ? `caught up ${s.drainMs} ms after the load` : 'NOT caught up'}`,
  );
  console.log(
    "(heap after a full GC: each service's inspector asked for a full collection after the warm-up, half-way and after the soak, one service at a time; a heap that gains in the first half only is filling caches and compiled code, a leak gains in both; the troughs, the lowest heap sampled in a window, also hold garbage not collected yet)",
  );
}

function writeResult(result) {
  fs.mkdirSync(path.dirname(RESULT_FILE), { recursive: true });
  fs.writeFileSync(RESULT_FILE, JSON.stringify(result, null, 2) + '\n');
}

// ---------------------------------------------------------------- report

/** The fixed-rate warm-up's runs (settleAtRate), when it ran. */
function reportWarmup(warmup) {
  const w = warmup?.rate;
  if (!w) return;
  const rows = [['warm-up at the fixed rate (gateway)', 'ok req/s', 'p50 ms', 'p99 ms', 'stack CPU ms/answer', 'of it helper threads']];
  w.runs.forEach((r, i) => rows.push([`run ${i + 1}`, r.okPerSec, r.p50Ms, r.p99Ms, r.stackCpuMsPerOk ?? '-', r.helperCpuMsPerOk ?? '-']));
  console.log('\n' + table(rows, 1));
  console.log(
    w.settled
      ? `settled after ${w.seconds} s (at least ${CFG.rateWarmupMinS} s): the last two runs' CPU per answer within ${CFG.rateWarmupTolerance * 100} %, helper threads at most ${CFG.rateWarmupHelperShare * 100} % of it`
      : `NOT settled within ${w.seconds} s (BENCH_RATE_WARMUP_MAX_S): the rounds may still have been warming up`,
  );
}

/**
 * Each round's headline figures and the median of each column: the spread between rounds minutes
 * apart on one box is what a single figure from it is worth (the tables above are the median round's).
 */
function reportRounds(result, phases) {
  const cols = [
    ['baseline ok/s', (r) => r.baselineOkPerSec],
    ['gateway ok/s', (r) => r.gatewayOkPerSec],
    ['added p50 ms', (r) => r.addedP50Ms, signed],
    ['added p99 ms', (r) => r.addedP99Ms, signed],
    ['stack CPU ms/answer', (r) => r.stackCpuMsPerOk],
    ['of it helper threads', (r) => r.stackHelperCpuMsPerOk],
    ['in direct calls', (r) => r.stackCpuPerOkInDirectCalls],
    ['load avg', (r) => r.loadavg1],
  ];
  const show = (v, fmt) => (v === null || v === undefined ? '-' : fmt ? fmt(v) : v);
  const rows = [['phase', 'round', ...cols.map(([h]) => h)]];
  for (const phase of phases) {
    const list = result.rounds[phase.name];
    list.forEach((r, i) => rows.push([phase.label, `${i + 1}${r.median ? ' *' : ''}`, ...cols.map(([, get, fmt]) => show(get(r), fmt))]));
    rows.push([phase.label, 'median', ...cols.map(([, get, fmt]) => show(median(list.map(get).filter((v) => v !== null)), fmt))]);
  }
  console.log(
    `\n${CFG.rounds} rounds per phase (BENCH_ROUNDS), each a baseline run then a gateway run; * = the round the tables show, median = of each column`,
  );
  console.log(table(rows, 2));
}

function report(result, phases) {
  const rows = [['phase', 'target', 'conns', 'ok req/s', 'p50 ms', 'p99 ms', 'max ms', '2xx', 'non-2xx', 'errors']];
  for (const phase of phases) {
    for (const [name, r] of Object.entries(result.runs[phase.name])) {
      rows.push([phase.label, name, r.connections, r.okPerSec, r.p50Ms, r.p99Ms, r.maxMs, r.ok, r.non2xx, r.errors + r.timeouts]);
    }
  }
  console.log(
    `\nGateway vs direct provider-sim (${UPSTREAM_MODEL}), ${CFG.durationS} s per run, gateway load on ${CFG.gatewayWorkloads} workload(s), ${result.machine.cpus} CPUs shared by everything`,
  );
  console.log(
    `load average (1/5/15 min) before the runs ${result.machine.loadavgBefore.join(' ')}, after ${result.machine.loadavgAfter.join(' ')}\n`,
  );
  console.log(table(rows));

  const cmp = [['phase', 'added p50 ms', 'added p99 ms', 'throughput gateway/baseline']];
  for (const phase of phases) {
    const c = result.comparison[phase.name];
    cmp.push([phase.label, signed(c.addedP50Ms), signed(c.addedP99Ms), c.throughputRatio ?? 'n/a']);
  }
  console.log('\n' + table(cmp, 1));
  if (CFG.rounds > 1) reportRounds(result, phases);
  for (const [name, r] of Object.entries(result.runs.rate ?? {})) {
    if (r.okPerSec < 0.9 * CFG.rate) {
      console.log(
        `note: ${name} answered ${r.okPerSec} of the offered ${CFG.rate} req/s; each lane waits for its answer, so above its capacity the fixed-rate phase turns into a closed loop of ${r.connections} connections (try BENCH_RATE lower)`,
      );
    }
  }

  const cpuNames = [...new Set(phases.flatMap((p) => Object.values(result.runs[p.name]).flatMap((r) => Object.keys(r.cpuCores))))];
  if (cpuNames.length > 0) {
    const cpuRows = [['CPU cores used', ...cpuNames]];
    for (const phase of phases) {
      for (const [name, r] of Object.entries(result.runs[phase.name]))
        cpuRows.push([`${phase.name}/${name}`, ...cpuNames.map((n) => r.cpuCores[n] ?? '')]);
    }
    console.log('\n' + table(cpuRows, 1));
  }

  const gatewayPhases = phases.filter((p) => result.runs[p.name].gateway.cpuMsPerOk);
  if (gatewayPhases.length > 0) {
    const names = Object.keys(result.runs[gatewayPhases[0].name].gateway.cpuMsPerOk).filter((n) => n !== 'total');
    const rows = [['CPU ms per 2xx answer (gateway runs)', 'stack total', ...names]];
    for (const phase of gatewayPhases) {
      const c = result.runs[phase.name].gateway.cpuMsPerOk;
      rows.push([phase.label, c.total, ...names.map((n) => c[n] ?? '')]);
      const h = result.runs[phase.name].gateway.helperCpuMsPerOk;
      if (h) rows.push([`  of it helper threads`, h.total, ...names.map((n) => h[n] ?? '')]);
    }
    console.log('\n' + table(rows, 1));
    console.log('(stack total: services + kafka + postgres, not the load generator)');
    if (gatewayPhases.some((p) => result.runs[p.name].gateway.helperCpuMsPerOk))
      console.log(
        "(helper threads: in a node process every thread but the main one — V8's optimizing compiler and GC helpers; in the broker the JVM's compiler threads)",
      );
    reportWarmup(result.warmup);
    for (const phase of gatewayPhases) {
      const c = result.comparison[phase.name];
      if (c?.stackCpuPerOkInDirectCalls != null)
        console.log(
          `stack CPU per 2xx answer in direct calls (÷ ${c.directCallCpuMs} ms, provider-sim + load generator per answer of the baseline run), ${phase.label}: ${c.stackCpuPerOkInDirectCalls}`,
        );
    }
    for (const phase of gatewayPhases) {
      const n = result.runs[phase.name].gateway.pgTransactionsPerOk;
      if (n != null) console.log(`Postgres transactions per 2xx answer, ${phase.label}: ${n}`);
    }
    for (const phase of gatewayPhases) {
      const opened = result.runs[phase.name].gateway.pgSessionsOpened;
      if (opened != null) console.log(`Postgres connections opened during the run (new backends), ${phase.label}: ${opened}`);
    }
    for (const phase of gatewayPhases) {
      const w = result.runs[phase.name].gateway.pgWritesPerOk;
      if (!w) continue;
      const records = w.walRecords === null ? '' : ` in ${w.walRecords} records (${w.walFpi} full-page images)`;
      const syncs = w.walSyncs == null ? '' : `, synced to disk ${w.walSyncs} times`;
      const hot = w.tables.filter((t) => t.updates > 0).map((t) => `${t.table} ${t.updates} (${t.hotPct} % HOT)`);
      console.log(
        `Postgres writes per 2xx answer, ${phase.label}: ${w.walBytes} B of WAL${records}${syncs}; row updates ${hot.join(', ')}`,
      );
    }
    const wr = [['WAL records per 2xx answer (pg_walinspect)', 'phase', 'record types', 'records', 'bytes']];
    for (const phase of gatewayPhases) {
      const w = result.runs[phase.name].gateway.pgWritesPerOk?.walByRelation;
      if (!w) continue;
      for (const l of w.lines) wr.push([l.name, phase.name, l.types, l.records, l.bytes]);
      if (w.rest > 0) wr.push(['(the rest, each under 0.05)', phase.name, '', w.rest, '']);
    }
    if (wr.length > 1)
      console.log(
        '\n' +
          table(wr, 3) +
          '\n(per relation: a table or index of the bench database, named by the first block each record touches; in parentheses, records that touch none: commits, other databases)',
      );
    const kr = [['Kafka requests per 2xx answer (gateway runs)', 'phase', 'requests']];
    for (const phase of gatewayPhases) {
      const k = result.runs[phase.name].gateway.kafkaRequestsPerOk;
      if (!k) continue;
      for (const [service, apis] of Object.entries(k)) {
        if (service === 'total') continue;
        for (const [what, n] of Object.entries(apis)) if (n >= 0.01) kr.push([`${service} ${what}`, phase.name, n]);
      }
      kr.push(['all services', phase.name, k.total]);
    }
    if (kr.length > 1) console.log('\n' + table(kr, 2));
    const gr = [['GCs per 1,000 2xx answers (gateway runs)', 'phase', 'major', 'minor', 'incremental', 'main-thread pause ms']];
    for (const phase of gatewayPhases) {
      const g = result.runs[phase.name].gateway.gcPer1000Ok;
      if (!g) continue;
      for (const [service, kinds] of Object.entries(g)) {
        if (service === 'total') continue;
        // seconds per 1,000 answers → ms
        const pause = Object.entries(kinds).reduce((a, [k, v]) => (k.endsWith(' pause s') ? a + v * 1000 : a), 0);
        const n = (kind) => round(kinds[`${kind} GCs`] ?? 0, 1);
        gr.push([service, phase.name, n('major'), n('minor'), n('incremental'), round(pause, 1)]);
      }
    }
    if (gr.length > 1)
      console.log(
        '\n' +
          table(gr, 2) +
          "\n(services: V8's collections; where concurrent marking is on (settlement: V8's defaults), a major GC's marking runs on a helper thread, outside the pause; SERVICE_NODE_FLAGS in scripts/services.mjs)" +
          "\n(kafka: the broker's young (minor) and full (major) collections from its GC log; each pause stops every Kafka hop in flight)" +
          brokerMaxPauses(result, gatewayPhases),
      );
  }
  reportSyscalls(result, phases);

  const loopNames = [...new Set(phases.flatMap((p) => Object.keys(result.runs[p.name].gateway.eventLoopDelayMs ?? {})))];
  if (loopNames.length > 0) {
    const rows = [['event-loop delay ms p50/p99', ...loopNames]];
    const cell = (d) => (d ? `${d.p50}/${d.p99}` : '');
    rows.push(['idle', ...loopNames.map((n) => cell(result.idle?.eventLoopDelayMs?.[n]))]);
    for (const phase of phases) {
      for (const [name, r] of Object.entries(result.runs[phase.name]))
        rows.push([`${phase.name}/${name}`, ...loopNames.map((n) => cell(r.eventLoopDelayMs?.[n]))]);
    }
    console.log('\n' + table(rows, 1));
  }

  if (result.memoryMb) reportMemory(result.memoryMb, result.startupMs);

  if (result.idle) reportIdle(result.idle);

  const pw = [['Postgres backends busy (avg)', 'phase', 'statement', 'backends']];
  for (const phase of phases) {
    for (const w of result.runs[phase.name].gateway.pgWaits?.top ?? []) pw.push([w.what, phase.name, w.statement, w.avgBackends]);
  }
  if (pw.length > 1) console.log('\n' + table(pw, 3));

  const st = [['gateway stage (DB timestamps)', 'phase', 'p50 ms', 'p99 ms']];
  for (const phase of phases) {
    const s = result.gatewayStagesMs[phase.name];
    if (!s) continue;
    for (const [k, label] of [
      ['admissionToDispatch', 'admitted → dispatch claimed'],
      ['dispatchToUpstreamDone', 'claimed → upstream answered'],
      ['admissionToUpstreamDone', 'admitted → upstream answered'],
      ['upstreamDoneToLedger', 'upstream answered → ledger row'],
    ]) {
      if (s[k]) st.push([label, phase.name, s[k].p50, s[k].p99]);
    }
  }
  console.log('\n' + table(st));
  reportPathFloor(result.pathFloor, result.comparison.rate?.addedP50Ms ?? null, table);

  const sr = [
    [
      'settlement (gateway runs)',
      'workloads',
      'responses',
      '2xx',
      'actions admitted',
      'withdrawn (client gone)',
      'attempts',
      'ledger rows',
    ],
  ];
  for (const phase of phases) {
    const s = result.settlement.byPhase[phase.name];
    sr.push([phase.label, s.workloads, s.responses, s.ok, s.actions, s.withdrawn, s.attempts, s.ledgerRows]);
  }
  console.log('\n' + table(sr, 1));
  console.log(
    result.settlement.caughtUp
      ? `settlement caught up: every dispatched action had its ledger row ${result.settlement.drainMs} ms after the load stopped`
      : `settlement did NOT catch up within ${CFG.drainTimeoutMs} ms of the load stopping`,
  );
  const bad = phases.flatMap((p) =>
    Object.entries(result.runs[p.name])
      .filter(([, r]) => r.non2xx + r.errors + r.timeouts > 0)
      .map(([n, r]) => `${p.name}/${n}: ${JSON.stringify(r.statusCodes)} errors=${r.errors} timeouts=${r.timeouts}`),
  );
  console.log(bad.length === 0 ? 'every response was 2xx' : `NOT every response was 2xx:\n  ${bad.join('\n  ')}`);
  console.log();
}

/**
 * Syscalls and context switches per 2xx answer, per process of the gateway runs (and, for the
 * baseline runs, the processes that did something: provider-sim and the load generator).
 */
function reportSyscalls(result, phases) {
  const rows = [
    [
      'syscalls and context switches per 2xx answer',
      'run',
      'writes',
      'reads',
      'vol. ctx sw',
      'invol. ctx sw',
      'minor faults',
      'sys % of CPU',
    ],
  ];
  const cells = (c) => [
    c.writes ?? '',
    c.reads ?? '',
    c.voluntaryCtxSw ?? '',
    c.involuntaryCtxSw ?? '',
    c.minorFaults ?? '',
    c.systemPct ?? '',
  ];
  for (const phase of phases) {
    for (const [target, r] of Object.entries(result.runs[phase.name])) {
      const counts = r.syscallsPerOk;
      if (!counts?.total) continue;
      for (const [n, c] of Object.entries(counts)) {
        if (n === 'total' || n === 'boxCpuPct' || (target !== 'gateway' && (c.writes ?? 0) + (c.reads ?? 0) < 0.05)) continue;
        rows.push([n, `${phase.name}/${target}`, ...cells(c)]);
      }
      rows.push(['stack total (not the load generator)', `${phase.name}/${target}`, ...cells(counts.total)]);
    }
  }
  if (rows.length === 1) return;
  console.log('\n' + table(rows, 2));
  console.log(
    "(/proc: syscw, syscr; minor page faults (minflt, the whole process); context switches summed over each process's threads; machine calibration at the top)",
  );
  for (const phase of phases) {
    for (const [target, r] of Object.entries(result.runs[phase.name])) {
      const box = r.syscallsPerOk?.boxCpuPct;
      if (box) console.log(`box CPU during ${phase.name}/${target} (/proc/stat, all processes): ${shares(box)}`);
    }
  }
}

function reportIdle(idle) {
  const rows = [['idle CPU (cores)', 'cores', 'event-loop delay ms p50/p99', 'syscalls/s', 'vol. ctx sw/s']];
  const perSecond = idle.syscallsPerSecond ?? {};
  const rate = (c) => (c?.reads != null ? round(c.reads + c.writes, 1) : '');
  for (const [n, c] of Object.entries(idle.cpuCores)) {
    const d = idle.eventLoopDelayMs?.[n];
    rows.push([n, c, d ? `${d.p50}/${d.p99}` : '', rate(perSecond[n]), perSecond[n]?.voluntaryCtxSw ?? '']);
  }
  rows.push(['stack total (not the load generator)', idle.totalCores, '', rate(perSecond.total), perSecond.total?.voluntaryCtxSw ?? '']);
  console.log(`\nIdle: no traffic, measured over ${idle.seconds} s after ${CFG.idleSettleS} s of quiet`);
  console.log(table(rows, 1));
  if (perSecond.boxCpuPct) console.log(`box CPU meanwhile (/proc/stat, all processes): ${shares(perSecond.boxCpuPct)}`);
  console.log();
}

function table(rows, textColumns = 2) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  const line = (r) => r.map((c, i) => (i < textColumns ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ');
  return [line(rows[0]), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(line)].join('\n');
}

const signed = (n) => (n > 0 ? `+${n}` : String(n));
function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

// ---------------------------------------------------------------- lifecycle

async function shutdown(code, why) {
  if (shuttingDown) return;
  shuttingDown = true;
  if (why) log(`${why}; stopping…`);
  for (const run of running) run.stop?.();
  for (const stop of stops.reverse()) await stop().catch(() => undefined);
  process.exit(code);
}

main().catch(async (err) => {
  if (shuttingDown) return; // interrupted: whatever was still running lost its stack under it
  console.error(`[bench] failed: ${err.stack ?? err}`);
  await shutdown(1);
});
