// Settlement throughput from a pre-filled topic (see bench/README.md, "Settlement").
// Run by scripts/bench-settlement.mjs (`npm run bench:settlement`), which provides a fresh
// database and a broker of its own; this file seeds, produces, runs ONE settlement instance per
// phase as a child process, measures and verifies. Not a test: nothing asserts on timings; it
// exits non-zero only when the books are wrong (a missing or repeated ledger row, budget totals).
//
// Phases, each on attempts of its own:
//   one-by-one  BENCH_SETTLE_EVENTS_ONE events (default 3,000), SETTLEMENT_BATCH_MAX=1
//   batched     BENCH_SETTLE_ROUNDS rounds (default 3), each a fresh instance on BENCH_SETTLE_EVENTS
//               events of its own (default 20,000), SETTLEMENT_BATCH_MAX=BENCH_SETTLE_BATCH (1,000),
//               behind BENCH_SETTLE_WARM_EVENTS (10,000) on the same topic that warm the fresh
//               instance's JIT and are not counted (0: the cold figure, as before 2026-12-05);
//               the median round is the figure (runs minutes apart on one box differed by 2x), and
//               each round prints the box's CPU split (steal, iowait) and the checkpoints it overlapped
//   steady      BENCH_SETTLE_RATE events/s (default 5,000) for BENCH_SETTLE_STEADY_S s (5) into the
//               last round's running instance: answer → ledger latency (event timestamp → settled_at)
import { spawn, ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Topics } from '@gateway/contracts';
import { Database } from '@gateway/db';
import { KafkaBus } from '@gateway/messaging';
import { boxCpu, boxCpuShares, BoxCpu, processMemoryMb } from '../scripts/machine.mjs';
import { hotShares, Query, updateCounts, walByRelation, walLines, walPosition, walSince } from '../scripts/pg-write-work.mjs';
import { cpuMs, minorFaults, num, required } from './bench-env';
import { CountedWindow, countedWindow, perRow, Snapshot } from './counted-window';
import { completed, Seeded, seed, seedRoute } from './settlement-seed';

const ROOT = path.resolve(__dirname, '..');
const CFG = {
  events: num('BENCH_SETTLE_EVENTS', 20_000),
  // settled by each round's fresh instance before the counted ones (a warm instance, as in production)
  warm: process.env.BENCH_SETTLE_WARM_EVENTS === '0' ? 0 : Math.round(num('BENCH_SETTLE_WARM_EVENTS', 10_000)),
  rounds: Math.round(num('BENCH_SETTLE_ROUNDS', 3)),
  eventsOne: num('BENCH_SETTLE_EVENTS_ONE', 3_000),
  batch: num('BENCH_SETTLE_BATCH', 1_000),
  rate: num('BENCH_SETTLE_RATE', 5_000),
  steadyS: num('BENCH_SETTLE_STEADY_S', 5),
  workloads: num('BENCH_SETTLE_WORKLOADS', 50),
};
const LOG_DIR = path.join(ROOT, '.local', 'bench-logs');
/** the broker scripts/bench-settlement.mjs started for the bench (its CPU is the third process an event costs) */
const BROKER_PID = process.env.BENCH_BROKER_PID ? Number(process.env.BENCH_BROKER_PID) : null;
const quiet = { info: () => undefined, warn: () => undefined, error: (o: object, m?: string) => console.error(m, o) };
const log = (msg: string) => console.log(`[bench:settlement] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const db = new Database(required('DATABASE_URL'), { poolMax: 4 });
  const bus = new KafkaBus({ brokers: required('KAFKA_BROKERS').split(','), clientId: 'bench-settlement', logger: quiet });
  try {
    await bus.connect();
    await bus.ensureTopics();
    await seedRoute(db);
    const steadyCount = Math.round(CFG.rate * CFG.steadyS);
    const perRound = CFG.warm + CFG.events;
    const total = CFG.eventsOne + CFG.rounds * perRound + steadyCount;
    log(`seeding ${total} answered attempts over ${CFG.workloads} workloads and one shared team account`);
    const all = await seed(db, total, CFG.workloads);
    const one = all.slice(0, CFG.eventsOne);
    const steady = all.slice(CFG.eventsOne + CFG.rounds * perRound);

    const [{ autovacuum }] = await db.prisma.$queryRaw<Array<{ autovacuum: string }>>`SELECT current_setting('autovacuum') AS autovacuum`;
    log(`the server's autovacuum is ${autovacuum}; every phase starts after a VACUUM (ANALYZE), so rounds start alike either way`);
    const results: PhaseResult[] = [];
    await vacuum(db);
    await produce(bus, one);
    results.push(await phase(db, 'one-by-one', 1, one));
    for (let r = 1; r <= CFG.rounds; r++) {
      const start = CFG.eventsOne + (r - 1) * perRound;
      const warm = all.slice(start, start + CFG.warm);
      const batched = all.slice(start + CFG.warm, start + perRound);
      await vacuum(db);
      // In each partition the warm-up events come first: the instance has settled its first
      // CFG.warm events (whichever they are) before the counted window opens.
      await produce(bus, warm);
      await produce(bus, batched);
      const last = r === CFG.rounds;
      results.push(
        await phase(
          db,
          `batched-${r}`,
          CFG.batch,
          batched,
          last
            ? async () => {
                log(`steady: ${CFG.rate} events/s for ${CFG.steadyS} s`);
                return steadyPhase(db, bus, steady);
              }
            : undefined,
          warm,
        ),
      );
    }
    report(results);
    const hot = hotShares({}, await updateCounts(sql(db), SETTLED_TABLES));
    console.log(`row updates that were HOT (no index entries): ${hot.map((h) => `${h.table} ${h.hotPct} % of ${h.updates}`).join(', ')}`);
    const books = await verify(db, bus, all);
    console.log(JSON.stringify({ config: CFG, results, hot, books }));
    if (!books.ok) process.exitCode = 1;
  } finally {
    await bus.disconnect();
    await db.close();
  }
}

/**
 * The previous phase's dead row versions (every settled event updates its attempt, action lock,
 * reservation and the shared team account) vacuumed away, as autovacuum would between them: on a
 * server with autovacuum off, later rounds otherwise ran on more bloated tables and indexes than
 * the first (Postgres CPU per event rising round by round, 2026-12-04).
 */
async function vacuum(db: Database): Promise<void> {
  await db.prisma.$executeRawUnsafe('VACUUM (ANALYZE)');
}

async function produce(bus: KafkaBus, seeded: Seeded[], at = new Date()): Promise<void> {
  for (let i = 0; i < seeded.length; i += 2_000) {
    await bus.publish(
      'attemptCompleted',
      seeded.slice(i, i + 2_000).map((s) => ({ key: s.workloadId, value: completed(s, at) })),
    );
  }
}

interface PhaseResult {
  phase: string;
  batchMax: number;
  events: number;
  /** settled by the same instance before the counted window opened (not in any figure) */
  warmEvents?: number;
  eventsPerS: number;
  /**
   * Ledger rows committed per second between the counted window's first and last progress polls
   * (null without a window). `eventsPerS` spans the rows' `settled_at`, which is when their batch
   * began (the consumer's clock before the transaction), so on a round of a few seconds it counts
   * the first counted batches from their start and the last ones not to their commit: 6,158 by
   * `settled_at` against 6,920 by commit times in a traced round (2026-12-05).
   */
  committedPerS: number | null;
  cpuMsPerEvent: number;
  /** the instance's minor page faults per event over the same rows as its CPU */
  minorFaultsPerEvent: number;
  /** CPU of the Postgres backends serving the settlement instance, per event (null when Postgres is not on this machine) */
  pgCpuMsPerEvent: number | null;
  /** the broker's CPU over the same span (`BENCH_BROKER_PID`; null when the bench did not start it) */
  kafkaCpuMsPerEvent: number | null;
  lockWaitersAvg: number;
  deadlocks: number;
  /** the whole box's CPU by kind over the phase, in % (steal: a vCPU that wanted to run and did not) */
  boxCpuPct: BoxCpu | null;
  /** Postgres checkpoints that started during the phase (timed or requested; each makes page writes dearer for a while) */
  checkpoints: number;
  /** where the box's CPU went over the counted window (null where /proc is not this box's) */
  window: CountedWindow | null;
  /** WAL the server wrote during the phase (warm-up included) per event settled in it: the write work, deterministic where CPU is noisy */
  walBytesPerEvent: number;
  /** the same in WAL records (pg_stat_wal; null before Postgres 14) */
  walRecordsPerEvent: number | null;
  /** the phase's WAL, from and to (LSNs), for `pg_waldump --stats` on the server's pg_wal */
  walRange: [string, string];
  /** the phase's WAL records per event by relation and record type (pg_walinspect; null without it) */
  walByRelation: ReturnType<typeof walLines> | null;
  /** the instance's peak RSS when the phase ended (MB; null where /proc is not this box's) */
  peakRssMb: number | null;
  latency?: { p50Ms: number; p99Ms: number; maxMs: number; events: number };
}

/**
 * Starts one settlement instance with the batch size, waits until every seeded attempt (and every
 * warm-up one ahead of them) has its ledger row, and measures, once the instance has settled as
 * many events as there were warm-up ones: events/s over the span of settled_at from the next row
 * to the last (boot and warm-up excluded), the instance's CPU over the same rows, and backends
 * waiting on row locks.
 */
async function phase(
  db: Database,
  name: string,
  batchMax: number,
  seeded: Seeded[],
  whileRunning?: () => Promise<PhaseResult['latency']>,
  warm: Seeded[] = [],
): Promise<PhaseResult> {
  const cgroup = settlementCgroup();
  log(
    `${name}: ${seeded.length} events waiting${warm.length > 0 ? ` behind ${warm.length} warm-up ones` : ''}; starting settlement with SETTLEMENT_BATCH_MAX=${batchMax}` +
      (cgroup ? ` in the cgroup ${cgroup} (${cgroupMemoryLimit(cgroup)})` : ''),
  );
  const ids = seeded.map((s) => s.attemptId);
  const allIds = [...warm.map((s) => s.attemptId), ...ids];
  const total = allIds.length;
  const since = await dbNow(db);
  const deadlocksBefore = await deadlocks(db);
  const checkpointsBefore = await checkpoints(db);
  const walBefore = await walPosition(sql(db));
  const box0 = boxCpu();
  const child = startSettlement(name, batchMax);
  try {
    let cpuAtFirst: number | null = null;
    let faultsAtFirst = 0;
    /** rows committed when the CPU readings began: the per-event figures divide by the rows after it */
    let rowsAtFirst = warm.length;
    let kafkaAtFirst: number | null = null;
    let windowStart: Snapshot | null = null;
    let windowEnd: Snapshot | null = null;
    const pg = new BackendsCpu();
    const waits: number[] = [];
    const deadline = Date.now() + 15 * 60_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`settlement exited ${child.exitCode} (see ${LOG_DIR}/settlement-${name}.log)`);
      const n = await ledgerCountSince(db, since);
      const counting = n > warm.length;
      if (counting && cpuAtFirst === null) {
        cpuAtFirst = cpuMs(child.pid!);
        faultsAtFirst = minorFaults(child.pid!);
        rowsAtFirst = n;
        kafkaAtFirst = BROKER_PID === null ? null : cpuMs(BROKER_PID);
      }
      if (counting) waits.push(await lockWaiters(db));
      if (counting) await pg.sample(db);
      // The window for cores used: polls while rows were still coming, not the idle wait after the last.
      if (counting && n < total) windowEnd = snapshot(child.pid!, pg, n);
      windowStart ??= windowEnd;
      if (n >= total) break;
      if (Date.now() > deadline) throw new Error(`${name}: only ${n} of ${total} settled`);
      await sleep(POLL_MS);
    }
    const box = boxCpuShares(box0, boxCpu());
    const window = windowStart && windowEnd ? countedWindow(windowStart, windowEnd) : null;
    const exact = await ledgerCount(db, allIds);
    if (exact !== total) throw new Error(`${name}: ${exact} of the phase's ${total} attempts have a ledger row`);
    const cpu = cpuMs(child.pid!) - (cpuAtFirst ?? 0);
    const faults = minorFaults(child.pid!) - faultsAtFirst;
    const rssPeak = processMemoryMb(child.pid!)?.peak ?? null;
    const kafkaCpu = BROKER_PID === null || kafkaAtFirst === null ? null : cpuMs(BROKER_PID) - kafkaAtFirst;
    // The CPU readings began at the first poll past the warm-up's rows; the rows committed before
    // that poll (up to a few thousand: batches commit in bursts) cost CPU that is not in them.
    const measured = Math.max(1, total - rowsAtFirst);
    // From the first row after the warm-up's count to the last: the rows the CPU window covers.
    const [span] = await db.prisma.$queryRaw<Array<{ ms: number }>>`
      WITH phase AS (SELECT settled_at FROM ledger_entry WHERE attempt_id = ANY(${allIds}::text[]))
      SELECT EXTRACT(EPOCH FROM max(settled_at) - (SELECT settled_at FROM phase ORDER BY settled_at OFFSET ${warm.length} LIMIT 1)) * 1000 AS ms
      FROM phase`;
    const result: PhaseResult = {
      phase: name,
      batchMax,
      events: seeded.length,
      ...(warm.length > 0 ? { warmEvents: warm.length } : {}),
      eventsPerS: Math.round(seeded.length / Math.max(0.001, Number(span.ms) / 1000)),
      committedPerS: window && window.committed > 0 ? Math.round(window.committed / (window.wallMs / 1000)) : null,
      cpuMsPerEvent: Number((cpu / measured).toFixed(3)),
      minorFaultsPerEvent: Number((faults / measured).toFixed(2)),
      pgCpuMsPerEvent: pg.seen ? Number((pg.totalMs / measured).toFixed(3)) : null,
      kafkaCpuMsPerEvent: kafkaCpu === null ? null : Number((kafkaCpu / measured).toFixed(3)),
      lockWaitersAvg: Number((waits.reduce((a, b) => a + b, 0) / Math.max(1, waits.length)).toFixed(2)),
      deadlocks: (await deadlocks(db)) - deadlocksBefore,
      boxCpuPct: box,
      checkpoints: (await checkpoints(db)) - checkpointsBefore,
      ...(await walPerEvent(db, walBefore, total)),
      window,
      peakRssMb: rssPeak,
    };
    if (whileRunning) result.latency = await whileRunning();
    return result;
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
  }
}

function snapshot(pid: number, pg: BackendsCpu, rows: number): Snapshot {
  return {
    at: Date.now(),
    rows,
    box: boxCpu(),
    settlement: cpuMs(pid),
    mainThread: cpuMs(pid, { mainThread: true }),
    backends: pg.seen ? pg.totalMs : null,
    broker: BROKER_PID === null ? null : cpuMs(BROKER_PID),
  };
}

/**
 * Events published at a fixed rate into the running instance; latency from the answer (the
 * event's timestamp, set when it is published) to its ledger row's settled_at (the settling
 * transaction's clock, a few ms before its commit).
 */
async function steadyPhase(db: Database, bus: KafkaBus, seeded: Seeded[]): Promise<PhaseResult['latency']> {
  const perTick = Math.max(1, Math.round(CFG.rate / 10));
  const answeredAt = new Map<string, number>();
  const since = await dbNow(db);
  const start = Date.now();
  for (let i = 0, tick = 0; i < seeded.length; i += perTick, tick++) {
    const due = start + tick * 100;
    if (due > Date.now()) await sleep(due - Date.now());
    const at = new Date();
    const chunk = seeded.slice(i, i + perTick);
    for (const s of chunk) answeredAt.set(s.attemptId, at.getTime());
    await produce(bus, chunk, at);
  }
  const ids = seeded.map((s) => s.attemptId);
  for (let n = 0; n < seeded.length; n = await ledgerCountSince(db, since)) await sleep(POLL_MS);
  const rows = await db.prisma.$queryRaw<Array<{ attempt_id: string; settled_at: Date }>>`
    SELECT attempt_id, settled_at FROM ledger_entry WHERE attempt_id = ANY(${ids}::text[])`;
  const ms = rows.map((r) => r.settled_at.getTime() - (answeredAt.get(r.attempt_id) ?? 0)).sort((x, y) => x - y);
  const at = (q: number) => ms[Math.min(ms.length - 1, Math.ceil(q * ms.length) - 1)];
  return { p50Ms: at(0.5), p99Ms: at(0.99), maxMs: ms[ms.length - 1], events: ms.length };
}

/**
 * The settlement instance, started as `npm start` starts it (`BENCH_SETTLE_INSTANCE`, from
 * scripts/bench-settlement.mjs: the compiled tree and the services' V8 flags), or from
 * `BENCH_SETTLE_APP_ROOT` (another checkout's TypeScript, through the runtime hook, against the
 * same data and broker: a before/after pair in one run's conditions). Its connections carry
 * application_name `SETTLEMENT_APP_NAME`, so their backends' CPU can be read.
 */
function startSettlement(name: string, batchMax: number): ChildProcess {
  fs.mkdirSync(LOG_DIR, { recursive: true });
  const out = fs.openSync(path.join(LOG_DIR, `settlement-${name}.log`), 'w');
  const url = new URL(required('DATABASE_URL'));
  url.searchParams.set('application_name', SETTLEMENT_APP_NAME);
  const other = process.env.BENCH_SETTLE_APP_ROOT ? path.resolve(process.env.BENCH_SETTLE_APP_ROOT) : null;
  const root = other ?? ROOT;
  const instance: { args: string[]; env: Record<string, string> } =
    other || !process.env.BENCH_SETTLE_INSTANCE
      ? { args: ['-r', '@swc-node/register', 'apps/settlement/src/main.ts'], env: { SWC_NODE_PROJECT: path.join(root, 'tsconfig.json') } }
      : JSON.parse(process.env.BENCH_SETTLE_INSTANCE);
  // BENCH_SETTLE_CGROUP: start the instance inside that cgroup, as a container would (a shell
  // writes its own pid to cgroup.procs, then execs node), so Node sizes its heap from the
  // cgroup's memory limit at start-up, as it does in a container.
  const cgroup = settlementCgroup();
  const [command, args] = cgroup
    ? ['sh', ['-c', 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"', 'sh', cgroup, process.execPath, ...instance.args]]
    : [process.execPath, instance.args];
  return spawn(command, args, {
    cwd: root,
    env: {
      ...process.env,
      ...instance.env,
      DATABASE_URL: url.toString(),
      SETTLEMENT_BATCH_MAX: String(batchMax),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
    },
    stdio: ['ignore', out, out],
  });
}

const SETTLEMENT_APP_NAME = 'bench-settlement-instance';

/** The cgroup directory of BENCH_SETTLE_CGROUP (one that exists, with a cgroup.procs), or null. */
function settlementCgroup(): string | null {
  const dir = process.env.BENCH_SETTLE_CGROUP;
  if (!dir) return null;
  if (!fs.existsSync(path.join(dir, 'cgroup.procs')))
    throw new Error(`BENCH_SETTLE_CGROUP=${dir} is not a cgroup directory (no cgroup.procs)`);
  return path.resolve(dir);
}

/** The memory limit of BENCH_SETTLE_CGROUP, for the log (cgroup v1 memory.limit_in_bytes, v2 memory.max). */
function cgroupMemoryLimit(dir: string): string {
  for (const file of ['memory.limit_in_bytes', 'memory.max']) {
    const f = path.join(dir, file);
    if (!fs.existsSync(f)) continue;
    const raw = fs.readFileSync(f, 'utf8').trim();
    return raw === 'max' || Number(raw) >= 2 ** 60 ? 'no memory limit' : `a memory limit of ${Math.round(Number(raw) / 1048576)} MB`;
  }
  return 'no memory controller';
}

/**
 * CPU of the backends serving the settlement instance (/proc, by application_name), summed per
 * backend from the first sample it was seen in; a backend that ends between samples loses at
 * most one sampling interval of its work.
 */
class BackendsCpu {
  private readonly first = new Map<number, number>();
  private readonly last = new Map<number, number>();
  seen = false;

  async sample(db: Database): Promise<void> {
    const rows = await db.prisma.$queryRaw<Array<{ pid: number }>>`
      SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = ${SETTLEMENT_APP_NAME}`;
    for (const { pid } of rows) {
      let ms: number;
      try {
        ms = cpuMs(pid);
      } catch {
        continue; // Postgres on another machine, or the backend just ended
      }
      this.seen = true;
      if (!this.first.has(pid)) this.first.set(pid, ms);
      this.last.set(pid, ms);
    }
  }

  get totalMs(): number {
    let total = 0;
    for (const [pid, ms] of this.last) total += ms - (this.first.get(pid) ?? ms);
    return total;
  }
}

/**
 * How often the phases look for their ledger rows. Each look is a query on the Postgres the
 * instance under test shares the cores with: it counts the rows settled since the phase began
 * (earlier phases are over by then; the `(settled_at, id)` index), not the phase's attempt ids,
 * which sent 20,000 ids and cost Postgres 20–30 ms every 100 ms (a fifth to a third of a core).
 */
const POLL_MS = 250;

async function ledgerCountSince(db: Database, since: Date): Promise<number> {
  const [r] = await db.prisma.$queryRaw<Array<{ n: bigint }>>`SELECT count(*) AS n FROM ledger_entry WHERE settled_at >= ${since}`;
  return Number(r.n);
}

async function dbNow(db: Database): Promise<Date> {
  const [r] = await db.prisma.$queryRaw<Array<{ now: Date }>>`SELECT now() AS now`;
  return r.now;
}

/** The phase's attempts that have their ledger row (once, at the end: exact, and dear). */
async function ledgerCount(db: Database, ids: string[]): Promise<number> {
  const [r] = await db.prisma.$queryRaw<
    Array<{ n: bigint }>
  >`SELECT count(*) AS n FROM ledger_entry WHERE attempt_id = ANY(${ids}::text[])`;
  return Number(r.n);
}

async function lockWaiters(db: Database): Promise<number> {
  const [r] = await db.prisma.$queryRaw<Array<{ n: bigint }>>`
    SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
  return Number(r.n);
}

async function checkpoints(db: Database): Promise<number> {
  const [r] = await db.prisma.$queryRaw<Array<{ n: bigint }>>`SELECT checkpoints_timed + checkpoints_req AS n FROM pg_stat_bgwriter`;
  return Number(r.n);
}

/** The settled tables whose updates the bench reports as HOT or not. */
const SETTLED_TABLES = ['attempt', 'budget_account', 'reservation'];

/** scripts/pg-write-work.mjs's statements, run through Prisma. */
function sql(db: Database): Query {
  return (text, params = []) => db.prisma.$queryRawUnsafe(text, ...params);
}

async function walPerEvent(
  db: Database,
  before: Awaited<ReturnType<typeof walPosition>>,
  events: number,
): Promise<Pick<PhaseResult, 'walBytesPerEvent' | 'walRecordsPerEvent' | 'walRange' | 'walByRelation'>> {
  const wal = await walSince(sql(db), before);
  const byRelation = await walByRelation(sql(db), wal.range).catch(() => null);
  return {
    walBytesPerEvent: Math.round(wal.bytes / events),
    walRecordsPerEvent: wal.records === null ? null : Math.round((wal.records * 10) / events) / 10,
    walRange: wal.range,
    walByRelation: byRelation && walLines(byRelation, events),
  };
}

async function deadlocks(db: Database): Promise<number> {
  const [r] = await db.prisma.$queryRaw<
    Array<{ n: bigint }>
  >`SELECT deadlocks AS n FROM pg_stat_database WHERE datname = current_database()`;
  return Number(r.n);
}

/** Exactly one ledger row and one usage.settled per attempt; every account's books add up. */
async function verify(db: Database, bus: KafkaBus, seeded: Seeded[]) {
  const ids = seeded.map((s) => s.attemptId);
  const [rows] = await db.prisma.$queryRaw<Array<{ n: bigint; attempts: bigint; cost: bigint }>>`
    SELECT count(*) AS n, count(DISTINCT attempt_id) AS attempts, coalesce(sum(cost_microusd), 0) AS cost
    FROM ledger_entry WHERE attempt_id = ANY(${ids}::text[])`;
  // The relay deletes each outbox row once the broker has it: the topic (a fresh broker's) counts
  // what was published, and the outbox must have nothing left (given 10 s for the last sends).
  const published = async () => {
    const [w] = await db.prisma.$queryRaw<Array<{ n: bigint }>>`
      SELECT count(*) AS n FROM outbox_message WHERE topic = ${Topics.usageSettled.name}`;
    return { onTopic: await bus.retainedRecords(Topics.usageSettled.name), waiting: Number(w.n) };
  };
  let settled = await published();
  for (const until = Date.now() + 10_000; (settled.onTopic < seeded.length || settled.waiting > 0) && Date.now() < until;) {
    await new Promise((r) => setTimeout(r, 250));
    settled = await published();
  }
  const accounts = await db.prisma.$queryRaw<Array<{ id: string; pending: bigint; settled: bigint; unresolved: bigint; ledger: bigint }>>`
    SELECT b.id, b.pending_microusd AS pending, b.settled_microusd AS settled, b.unresolved_microusd AS unresolved,
      (SELECT coalesce(sum(l.cost_microusd), 0) FROM ledger_entry l JOIN reservation r ON r.action_id = l.action_id
        WHERE r.workload_account_id = b.id OR b.id = ANY(r.scope_account_ids)) AS ledger
    FROM budget_account b WHERE b.scope_id LIKE 'bench-%'`;
  const wrongAccounts = accounts.filter(
    (a) => BigInt(a.pending) !== 0n || BigInt(a.unresolved) !== 0n || BigInt(a.settled) !== BigInt(a.ledger),
  );
  const books = {
    attempts: seeded.length,
    ledgerRows: Number(rows.n),
    attemptsWithRow: Number(rows.attempts),
    usageSettledEvents: settled.onTopic,
    usageSettledWaiting: settled.waiting,
    settledMicrousd: String(rows.cost),
    accounts: accounts.length,
    accountsWrong: wrongAccounts.map((a) => a.id),
    ok: false,
  };
  books.ok =
    books.ledgerRows === seeded.length &&
    books.attemptsWithRow === seeded.length &&
    books.usageSettledEvents === seeded.length &&
    books.usageSettledWaiting === 0 &&
    wrongAccounts.length === 0;
  log(
    `books: ${books.ledgerRows} ledger rows for ${books.attempts} attempts (${books.attemptsWithRow} distinct), ` +
      `${books.usageSettledEvents} usage.settled on the topic (${books.usageSettledWaiting} still in the outbox), ${books.accounts} accounts, wrong: ${books.accountsWrong.length ? books.accountsWrong.join(',') : 'none'}` +
      (books.ok ? '' : '  ← BOOKS WRONG'),
  );
  return books;
}

function report(results: PhaseResult[]): void {
  console.log('');
  console.log(`load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  console.log(
    'phase        batch  events  events/s  by commits  CPU ms/event  faults/event  pg CPU ms/event  kafka CPU ms/event  lock waiters (avg)  deadlocks  checkpoints  WAL B/event  WAL rec/event  box steal / iowait / idle %',
  );
  const row = (
    r: Omit<
      PhaseResult,
      'boxCpuPct' | 'checkpoints' | 'window' | 'peakRssMb' | 'walBytesPerEvent' | 'walRecordsPerEvent' | 'walRange' | 'walByRelation'
    > & {
      boxCpuPct?: BoxCpu | null;
      checkpoints?: number;
      walBytesPerEvent?: number;
      walRecordsPerEvent?: number | null;
    },
  ) =>
    console.log(
      `${r.phase.padEnd(12)} ${String(r.batchMax).padStart(5)} ${String(r.events).padStart(7)} ${String(r.eventsPerS).padStart(9)} ${String(r.committedPerS ?? '-').padStart(11)} ` +
        `${r.cpuMsPerEvent.toFixed(3).padStart(13)} ${r.minorFaultsPerEvent.toFixed(2).padStart(13)} ${(r.pgCpuMsPerEvent === null ? '-' : r.pgCpuMsPerEvent.toFixed(3)).padStart(16)} ` +
        `${(r.kafkaCpuMsPerEvent === null ? '-' : r.kafkaCpuMsPerEvent.toFixed(3)).padStart(19)} ` +
        `${r.lockWaitersAvg.toFixed(2).padStart(19)} ${String(r.deadlocks).padStart(10)} ${String(r.checkpoints ?? '').padStart(12)} ${String(r.walBytesPerEvent ?? '').padStart(12)} ${String(r.walRecordsPerEvent ?? '').padStart(14)}  ` +
        (r.boxCpuPct ? `${r.boxCpuPct.steal} / ${r.boxCpuPct.iowait} / ${r.boxCpuPct.idle}` : ''),
    );
  results.forEach(row);
  const one = results.find((r) => r.phase === 'one-by-one');
  const rounds = results.filter((r) => r.phase.startsWith('batched'));
  if (rounds.some((r) => r.warmEvents))
    console.log(
      `(batched: each round's fresh instance settled ${CFG.warm} warm-up events first, in no figure; BENCH_SETTLE_WARM_EVENTS=0 measures it cold)`,
    );
  const median = medianRound(rounds);
  if (median && rounds.length > 1) {
    const mid = (pick: (r: PhaseResult) => number) => medianOf(rounds.map(pick));
    row({
      phase: 'batched med.',
      batchMax: median.batchMax,
      events: median.events,
      eventsPerS: mid((r) => r.eventsPerS),
      committedPerS: rounds.every((r) => r.committedPerS !== null) ? mid((r) => r.committedPerS ?? 0) : null,
      cpuMsPerEvent: mid((r) => r.cpuMsPerEvent),
      minorFaultsPerEvent: mid((r) => r.minorFaultsPerEvent),
      pgCpuMsPerEvent: rounds.every((r) => r.pgCpuMsPerEvent !== null) ? mid((r) => r.pgCpuMsPerEvent ?? 0) : null,
      kafkaCpuMsPerEvent: rounds.every((r) => r.kafkaCpuMsPerEvent !== null) ? mid((r) => r.kafkaCpuMsPerEvent ?? 0) : null,
      lockWaitersAvg: mid((r) => r.lockWaitersAvg),
      deadlocks: rounds.reduce((a, r) => a + r.deadlocks, 0),
    });
    console.log('(batched med.: the median of each column over the rounds; deadlocks: their sum)');
    console.log(
      "(events/s: over the span of the rows' settled_at, which is when their batch began; by commits: ledger rows committed per second " +
        'between the first and the last progress poll of the counted window, the cores table below covers the same window)',
    );
    const perEvent = mid((r) => r.cpuMsPerEvent + (r.pgCpuMsPerEvent ?? 0) + (r.kafkaCpuMsPerEvent ?? 0));
    const cores = os.cpus().length;
    console.log(
      `CPU per event, settlement + its Postgres backends + the broker (median round): ${perEvent.toFixed(3)} ms; ` +
        `with all ${cores} cores busy on nothing else, one instance could not pass ~${Math.round((cores * 1000) / Math.max(0.001, perEvent))} events/s`,
    );
  }
  if (one && median) {
    console.log(
      `\nbatched (median round, ${median.phase}) / one-by-one: ${(median.eventsPerS / one.eventsPerS).toFixed(1)}x events/s, ` +
        `${(one.cpuMsPerEvent / Math.max(0.001, median.cpuMsPerEvent)).toFixed(1)}x less settlement CPU per event`,
    );
  }
  reportWindows(rounds);
  reportWal([one, median].filter((r): r is PhaseResult => r !== undefined));
  const lat = rounds.at(-1)?.latency;
  if (lat)
    console.log(
      `steady ${CFG.rate}/s: answer → ledger p50 ${lat.p50Ms} ms, p99 ${lat.p99Ms} ms, max ${lat.maxMs} ms (${lat.events} events)`,
    );
}

/** What the WAL records per event were, by relation and record type (one-by-one and the median batched round). */
function reportWal(results: PhaseResult[]): void {
  const shown = results.filter((r) => r.walByRelation);
  if (shown.length === 0) return;
  console.log(
    '\nWAL records per event (pg_walinspect; the phase, warm-up included), by relation: a table or index, or in parentheses records that touch none',
  );
  for (const r of shown) {
    const w = r.walByRelation!;
    const width = Math.max(...w.lines.map((l) => l.name.length));
    console.log(`${r.phase}:`);
    for (const l of w.lines)
      console.log(`  ${l.name.padEnd(width)}  ${l.records.toFixed(2).padStart(6)}  ${String(l.bytes).padStart(5)} B  ${l.types}`);
    if (w.rest > 0) console.log(`  ${'(the rest, each under 0.05)'.padEnd(width)}  ${w.rest.toFixed(2).padStart(6)}`);
  }
}

/**
 * Each batched round's counted window in cores: what bounds events/s on this box. The box busy
 * near all its cores with the main thread well short of one: the box (every process's CPU per
 * event); the main thread near one core: the instance's event loop.
 */
function reportWindows(rounds: PhaseResult[]): void {
  const ws = rounds.filter((r) => r.window);
  if (ws.length === 0) return;
  const cores = ws[0].window!.cores;
  console.log(`\ncores used in the counted window (CPU seconds per second, of ${cores})`);
  console.log(
    'round         window s  box busy  settlement  of it main thread  its pg backends  broker  rest of the box  task waiting for a CPU %  CPU ms per row, all three  instance peak RSS MB',
  );
  for (const r of ws) {
    const w = r.window!;
    const opt = (v: number | null, digits = 2) => (v === null ? '-' : v.toFixed(digits));
    console.log(
      `${r.phase.padEnd(12)} ${(w.wallMs / 1000).toFixed(1).padStart(9)} ${w.boxBusy.toFixed(2).padStart(9)} ${w.settlement.toFixed(2).padStart(11)} ` +
        `${w.mainThread.toFixed(2).padStart(18)} ${opt(w.backends).padStart(16)} ${opt(w.broker).padStart(7)} ${w.rest.toFixed(2).padStart(16)} ${opt(w.cpuWaitPct, 1).padStart(25)} ${opt(perRow(r.window), 3).padStart(26)} ${String(r.peakRssMb ?? '-').padStart(21)}`,
    );
  }
  const mid = (pick: (r: PhaseResult) => number | null) => {
    const v = ws.map(pick).filter((x): x is number => x !== null);
    return v.length === ws.length ? medianOf(v) : null;
  };
  const busy = mid((r) => r.window!.boxBusy);
  const main = mid((r) => r.window!.mainThread);
  const ms = mid((r) => perRow(r.window));
  if (busy !== null && main !== null && ms !== null)
    console.log(
      `medians: ${ms.toFixed(3)} ms of CPU per committed row (settlement + its backends + the broker), the box ${busy.toFixed(2)} of ${cores} cores busy ` +
        `(${Math.round((busy * 1000) / ms)} rows/s at that cost), the main thread ${main.toFixed(2)}`,
    );
  console.log(
    "(rest: Postgres's background processes and other backends, this bench, the kernel, other daemons; a main thread near 1.00 bounds the instance; " +
      'a box near all its cores, or with tasks queued for a CPU much of the time, bounds the box)',
  );
}

/** The round with the median events/s (the lower middle of an even count). */
function medianRound(rounds: PhaseResult[]): PhaseResult | undefined {
  const sorted = [...rounds].sort((a, b) => a.eventsPerS - b.eventsPerS);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

function medianOf(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const m = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[m] : Number(((sorted[m - 1] + sorted[m]) / 2).toFixed(3));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
