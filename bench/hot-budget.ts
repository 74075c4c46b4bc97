// One hot budget (issue 12): many concurrent admissions against ONE workload budget row, driving
// AdmissionRepository directly (no HTTP, no Kafka). Run by `npm run bench:hot-budget`
// (scripts/bench-hot-budget.mjs: its own database, migrated), or directly with DATABASE_URL set:
//   node -r @swc-node/register bench/hot-budget.ts
//
// Three paths, each on a fresh workload, in this process, one after the other:
//   before        the pre-change path (bench/legacy-admission.ts: CTE in an interactive transaction)
//   autocommit    today's statement, one admission per statement (groupCommit: false)
//   group commit  today's statement, concurrent admissions of the workload grouped (the default)
// For each: reservations/s, p50/p99 per reservation, lock waits seen in pg_stat_activity, node CPU
// per reservation, and at the end pending = sum of reservations (no lost or double holds).
// Not a test: nothing asserts a speed; it exits non-zero only when the holds do not add up.
//
// Knobs: HOT_CONCURRENCY (admissions in flight, default 200), HOT_DURATION_S (per path, default 5),
// HOT_WARMUP_S (per path, default 1), HOT_POOL (pg pool size, default 10, as a service),
// HOT_MAX_GROUP (admissions per group-commit statement, default as the service), HOT_LANES
// (group statements of the workload in flight at once, default as the service),
// HOT_PATHS (comma-separated subset of before,autocommit,group).
import { randomUUID } from 'node:crypto';
import {
  ADMISSION_GROUPS,
  AdmissionRepository,
  AdmitInput,
  AdmitResult,
  budgetAccountId,
  Database,
  isDatabaseUnavailable,
  OutboxRepository,
} from '@gateway/db';
import { admitInput } from '@gateway/testing';
import { cpuMs, num } from './bench-env';
import { LegacyAdmission } from './legacy-admission';

const CFG = {
  url: process.env.DATABASE_URL ?? '',
  concurrency: num('HOT_CONCURRENCY', 200),
  durationS: num('HOT_DURATION_S', 5),
  warmupS: num('HOT_WARMUP_S', 1),
  pool: num('HOT_POOL', 10),
  maxGroup: num('HOT_MAX_GROUP', ADMISSION_GROUPS.maxGroup),
  lanes: num('HOT_LANES', ADMISSION_GROUPS.lanes),
  paths: (process.env.HOT_PATHS || 'before,autocommit,group').split(',').map((s) => s.trim()),
};
const PERIOD_START = new Date('2026-11-01T00:00:00Z');

interface PathResult {
  path: string;
  reservations: number;
  refused: number;
  perSecond: number;
  p50Ms: number;
  p99Ms: number;
  lockWaitsAvg: number;
  lockWaitsMax: number;
  idleInTxAvg: number;
  cpuUsPerReservation: number;
  pgCpuUsPerReservation: number | null;
  pendingMicrousd: bigint;
  reservedSumMicrousd: bigint;
  inFlight: number;
  actions: number;
}

type Admit = (input: AdmitInput) => Promise<AdmitResult>;

async function main(): Promise<void> {
  if (!CFG.url) throw new Error('DATABASE_URL is required (npm run bench:hot-budget sets it)');
  const db = new Database(CFG.url, { poolMax: CFG.pool });
  const monitor = new Database(CFG.url, { poolMax: 1 });
  const outbox = new OutboxRepository(db);
  const paths: Record<string, Admit> = {
    before: (i) => new LegacyAdmission(db, outbox).admit(i),
    autocommit: (i) => alone.admit(i),
    group: (i) => grouped.admit(i),
  };
  const alone = new AdmissionRepository(db, outbox, { groupCommit: false });
  const grouped = new AdmissionRepository(db, outbox, { maxGroup: CFG.maxGroup, lanes: CFG.lanes });
  const results: PathResult[] = [];
  let failed = false;
  try {
    for (const path of CFG.paths) {
      const admit = paths[path];
      if (!admit) throw new Error(`unknown path ${path} (before, autocommit, group)`);
      const r = await runPath(path, admit, db, monitor);
      results.push(r);
      const ok = r.pendingMicrousd === r.reservedSumMicrousd && r.inFlight === r.actions && r.actions === r.reservations;
      failed ||= !ok;
      console.log(
        `[hot-budget] ${path}: ${r.reservations} reservations, pending ${r.pendingMicrousd} = sum of reservations ${r.reservedSumMicrousd}` +
          ` (in flight ${r.inFlight}, actions ${r.actions}): ${ok ? 'holds add up' : 'MISMATCH'}`,
      );
    }
  } finally {
    await db.close();
    await monitor.close();
  }
  printTable(results);
  if (failed) process.exitCode = 1;
}

async function runPath(path: string, admit: Admit, db: Database, monitor: Database): Promise<PathResult> {
  const workloadId = `hot-${path}-${randomUUID()}`;
  const input = () =>
    admitInput(workloadId, {
      workloadBudget: { budgetMicrousd: 10n ** 15n, periodStart: PERIOD_START },
      concurrency: { scope: 'workload', scopeId: workloadId, maxInFlight: 1_000_000_000 },
    });
  // warm-up: connections open, statements prepared, the budget row exists
  await drive(admit, input, CFG.warmupS * 1000, () => undefined);

  const latencies: number[] = [];
  let refused = 0;
  const samples: Array<{ lockWaits: number; idleInTx: number }> = [];
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const rows = await monitor.prisma.$queryRaw<Array<{ lock_waits: bigint; idle_in_tx: bigint }>>`
        SELECT count(*) FILTER (WHERE wait_event_type = 'Lock') AS lock_waits,
               count(*) FILTER (WHERE state = 'idle in transaction') AS idle_in_tx
        FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`;
      samples.push({ lockWaits: Number(rows[0].lock_waits), idleInTx: Number(rows[0].idle_in_tx) });
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const pg0 = await backendCpu(monitor);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await drive(admit, input, CFG.durationS * 1000, (ms, ok) => {
    if (ok) latencies.push(ms);
    else refused += 1;
  });
  const elapsedS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const pg1 = await backendCpu(monitor);
  sampling = false;
  await sampler;

  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)] ?? NaN;
  const account = await db.prisma.budgetAccount.findUniqueOrThrow({ where: { id: budgetAccountId('workload', workloadId, PERIOD_START) } });
  const sum = await db.prisma.reservation.aggregate({
    where: { workloadAccountId: account.id },
    _sum: { reservedMicrousd: true },
    _count: true,
  });
  const slot = await db.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: workloadId } });
  const actions = await db.prisma.action.count({ where: { workloadId } });
  const avg = (xs: number[]) => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
  return {
    path,
    reservations: sum._count,
    refused,
    perSecond: latencies.length / elapsedS,
    p50Ms: pct(50),
    p99Ms: pct(99),
    lockWaitsAvg: avg(samples.map((s) => s.lockWaits)),
    lockWaitsMax: Math.max(0, ...samples.map((s) => s.lockWaits)),
    idleInTxAvg: avg(samples.map((s) => s.idleInTx)),
    cpuUsPerReservation: (cpu.user + cpu.system) / Math.max(1, latencies.length),
    pgCpuUsPerReservation: pg0 && pg1 ? cpuDeltaUs(pg0, pg1) / Math.max(1, latencies.length) : null,
    pendingMicrousd: account.pendingMicrousd,
    reservedSumMicrousd: sum._sum.reservedMicrousd ?? 0n,
    inFlight: slot.inFlight,
    actions,
  };
}

/**
 * CPU time (µs) of this database's backends, from /proc (Postgres on this machine; null when its
 * processes cannot be read). Backends of the pool persist across a path, so the delta is their work.
 */
async function backendCpu(monitor: Database): Promise<Map<number, number> | null> {
  const rows = await monitor.prisma.$queryRaw<Array<{ pid: number }>>`
    SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`;
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      out.set(pid, cpuMs(pid) * 1000);
    } catch {
      return null;
    }
  }
  return out;
}

function cpuDeltaUs(before: Map<number, number>, after: Map<number, number>): number {
  let sum = 0;
  for (const [pid, us] of after) sum += us - (before.get(pid) ?? 0);
  return sum;
}

/** `CFG.concurrency` loops, each admitting again as soon as its admission is decided, for `ms`. */
async function drive(admit: Admit, input: () => AdmitInput, ms: number, done: (ms: number, ok: boolean) => void): Promise<void> {
  const until = performance.now() + ms;
  await Promise.all(
    Array.from({ length: CFG.concurrency }, async () => {
      while (performance.now() < until) {
        const i = input();
        const t = performance.now();
        // a pool that cannot serve before the deadline is a 503 in the service: counted, not fatal
        const ok = await admit(i).then(
          (r) => r.ok,
          (err: unknown) => {
            if (!isDatabaseUnavailable(err)) throw err;
            return false;
          },
        );
        done(performance.now() - t, ok);
      }
    }),
  );
}

function printTable(results: PathResult[]): void {
  const base = results.find((r) => r.path === 'before');
  const head = [
    'path',
    'res/s',
    'vs before',
    'p50 ms',
    'p99 ms',
    'lock waits avg',
    'max',
    'idle in tx avg',
    'node CPU µs/res',
    'pg CPU µs/res',
    'refused/503',
  ];
  const rows = results.map((r) => [
    r.path,
    r.perSecond.toFixed(0),
    base ? `${(r.perSecond / base.perSecond).toFixed(2)}×` : '-',
    r.p50Ms.toFixed(1),
    r.p99Ms.toFixed(1),
    r.lockWaitsAvg.toFixed(1),
    String(r.lockWaitsMax),
    r.idleInTxAvg.toFixed(1),
    r.cpuUsPerReservation.toFixed(0),
    r.pgCpuUsPerReservation === null ? '-' : r.pgCpuUsPerReservation.toFixed(0),
    String(r.refused),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
  console.log(
    `\none hot workload budget row: ${CFG.concurrency} admissions in flight, pool ${CFG.pool}, groups of at most ${CFG.maxGroup} (${CFG.lanes} statement(s) in flight), ${CFG.durationS} s per path`,
  );
  console.log(line(head));
  for (const row of rows) console.log(line(row));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
