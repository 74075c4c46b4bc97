// Where a settlement batch's time goes (bench/README.md, "Settlement"): `npm run bench:settlement --
// --profile`. Settles BENCH_SETTLE_EVENTS seeded attempts (default 10,000) in-process, in sequential
// batches of BENCH_SETTLE_BATCH (1,000), through the use case and the real repositories (no Kafka, no
// Nest), and prints per batch: wall ms per repository call (inclusive), the transaction's remainder
// (BEGIN/COMMIT and JS between statements), node CPU and the database's backends' CPU (/proc), and
// what parsing the events from JSON and checking them against the schema costs. Then the books, as
// bench/settlement.ts checks them. Not a test: it asserts nothing about time.
// BENCH_SETTLE_CPU_PROFILE=<file.cpuprofile> also writes a V8 CPU profile of the measured batches
// only (read it with scripts/cpu-profile.mjs).
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import { performance } from 'node:perf_hooks';
import { Topics } from '@gateway/contracts';
import {
  AttemptRepository,
  CaseRepository,
  CatalogRepository,
  Database,
  LedgerRepository,
  OutboxRepository,
  ProcessedEventRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { randomIds } from '@gateway/service-kit';
import { SettleAttempt } from '../apps/settlement/src/usecases/settle-attempt/settle-attempt.usecase';
import { cpuMs, num, required } from './bench-env';
import { completed, seed, seedRoute } from './settlement-seed';

const EVENTS = num('BENCH_SETTLE_EVENTS', 10_000);
const BATCH = num('BENCH_SETTLE_BATCH', 1_000);
const WARMUP_BATCHES = 2;
const log = (msg: string) => console.log(`[bench:settlement:profile] ${msg}`);

const wall = new Map<string, number>();
const pgCpuByCall = new Map<string, number>();
let counting = false;
/** The pids of the database's backends, read once the pool is warm (the batches run one at a time). */
let backendPids: number[] = [];
function add(name: string, ms: number, pgMs: number): void {
  if (!counting) return;
  wall.set(name, (wall.get(name) ?? 0) + ms);
  pgCpuByCall.set(name, (pgCpuByCall.get(name) ?? 0) + pgMs);
}

/** CPU so far of the backends in `backendPids` (/proc clock ticks: coarse, unbiased over many calls). */
function pidsCpuMs(): number {
  let ms = 0;
  for (const pid of backendPids) {
    try {
      ms += cpuMs(pid);
    } catch {
      // gone
    }
  }
  return ms;
}

/**
 * The object with every method timed (wall, inclusive of what it calls) and the backends' CPU
 * meanwhile (reading /proc twice per call: node CPU figures include that), under `name.method`.
 */
function timed<T extends object>(name: string, target: T, backendsToo = true): T {
  return new Proxy(target, {
    get(t, prop, receiver) {
      const v = Reflect.get(t, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        const t0 = performance.now();
        const sample = counting && backendsToo;
        const c0 = sample ? pidsCpuMs() : 0;
        const done = () => add(`${name}.${String(prop)}`, performance.now() - t0, sample ? pidsCpuMs() - c0 : 0);
        const out = (v as (...a: unknown[]) => unknown).apply(t, args);
        if (out instanceof Promise) return out.finally(done);
        done();
        return out;
      };
    },
  });
}

async function main(): Promise<void> {
  const url = required('DATABASE_URL');
  const db = new Database(url, { poolMax: 10 });
  try {
    await seedRoute(db);
    log(`seeding ${EVENTS} answered attempts`);
    const seeded = await seed(db, EVENTS, 50);
    const events = seeded.map((s) => completed(s, new Date()));

    // What the consumer does before the use case: JSON → object → schema check.
    const wire = events.map((e) => Buffer.from(JSON.stringify(e)));
    const p0 = process.cpuUsage();
    for (const b of wire) Topics.attemptCompleted.schema.parse(JSON.parse(b.toString('utf8')));
    const parse = process.cpuUsage(p0);
    const parseUs = (parse.user + parse.system) / EVENTS;

    const outbox = timed('outbox', new OutboxRepository(db));
    const processed = new ProcessedEventRepository(db);
    const tx = { ms: 0 };
    const processedTimed = timed('processed', processed);
    const settle = new SettleAttempt(
      {
        transaction: async (fn) => {
          const t0 = performance.now();
          try {
            return await processed.transaction(fn);
          } finally {
            if (counting) tx.ms += performance.now() - t0;
          }
        },
        recordMany: (...a: Parameters<ProcessedEventRepository['recordMany']>) => processedTimed.recordMany(...a),
      },
      timed('holds', new ReservationHoldRepository()),
      timed('ledger', new LedgerRepository(outbox)),
      timed('cases', new CaseRepository(db, outbox)),
      timed('attempts', new AttemptRepository()),
      // a cache hit per event: timed, but reading /proc around each would cost more than the call
      timed('catalog', new CatalogRepository(db), false),
      randomIds,
      { info: () => undefined },
    );
    const published: bigint[] = [];
    outbox.onCommittedAppend((rows) => published.push(...rows.map((r) => r.id)));

    const profiler = process.env.BENCH_SETTLE_CPU_PROFILE ? new Session() : null;
    if (profiler) {
      profiler.connect();
      await profiler.post('Profiler.enable');
      await profiler.post('Profiler.setSamplingInterval', { interval: 500 });
    }
    let measured = 0;
    let markMs = 0;
    let node = { user: 0, system: 0 };
    let pg = new Map<number, number>();
    const started = performance.now();
    let measuredFrom = started;
    for (let i = 0, n = 0; i < events.length; i += BATCH, n++) {
      if (n === WARMUP_BATCHES) {
        counting = true;
        measuredFrom = performance.now();
        pg = await backendsCpuMs(db);
        backendPids = [...pg.keys()];
        if (profiler) await profiler.post('Profiler.start');
        node = process.cpuUsage();
      }
      const batch = events.slice(i, i + BATCH);
      await settle.executeBatch(batch, new Date());
      // The relay deletes what it published, one statement per batch of rows.
      const t0 = performance.now();
      await outbox.deletePublished(published.splice(0));
      if (counting) {
        markMs += performance.now() - t0;
        measured += batch.length;
      }
    }
    const elapsed = performance.now() - measuredFrom;
    const nodeCpu = process.cpuUsage(node);
    if (profiler) {
      const { profile } = await profiler.post('Profiler.stop');
      fs.writeFileSync(required('BENCH_SETTLE_CPU_PROFILE'), JSON.stringify(profile));
    }
    let pgCpu = 0;
    for (const [pid, ms] of await backendsCpuMs(db)) pgCpu += ms - (pg.get(pid) ?? 0);
    const batches = measured / BATCH;

    console.log('');
    console.log(`${measured} events in ${batches} batches of ${BATCH} (after ${WARMUP_BATCHES} warm-up batches), sequential`);
    console.log(`load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
    console.log(`events/s ${Math.round(measured / (elapsed / 1000))}; wall ms per batch ${(elapsed / batches).toFixed(1)}`);
    console.log(
      `CPU ms per event: node ${((nodeCpu.user + nodeCpu.system) / 1000 / measured).toFixed(3)}, ` +
        `postgres backends ${(pgCpu / measured).toFixed(3)}; parse+schema µs per event ${parseUs.toFixed(1)} (not in the loop above)`,
    );
    console.log('\nper batch, inclusive (ledger.recordMany includes outbox.appendMany): wall ms, backends CPU ms');
    const rows = [...wall.entries()].sort((a, b) => b[1] - a[1]);
    for (const [name, ms] of rows) {
      console.log(
        `  ${name.padEnd(36)} ${(ms / batches).toFixed(2).padStart(8)} ${((pgCpuByCall.get(name) ?? 0) / batches).toFixed(2).padStart(8)}`,
      );
    }
    const statements = rows.filter(([name]) => name !== 'outbox.appendMany').reduce((a, [, ms]) => a + ms, 0);
    console.log(`  ${'transaction rest (BEGIN/COMMIT, JS)'.padEnd(36)} ${((tx.ms - statements) / batches).toFixed(2).padStart(8)}`);
    console.log(`  ${'outbox.deletePublished (after commit)'.padEnd(36)} ${(markMs / batches).toFixed(2).padStart(8)}`);
  } finally {
    await db.close();
  }
}

/** CPU so far of each backend connected to this database, by pid (/proc; Postgres on this machine). */
async function backendsCpuMs(db: Database): Promise<Map<number, number>> {
  const rows = await db.prisma.$queryRaw<Array<{ pid: number }>>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`;
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      out.set(pid, cpuMs(pid));
    } catch {
      // not on this machine, or gone
    }
  }
  return out;
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
