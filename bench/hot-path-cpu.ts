/**
 * CPU per hot-path database write, client and server side, without the rest of the stack:
 * dispatch's claim + completion of one attempt, and one outbox sweep that finds nothing. Runs in
 * one process on one pooled connection, so its Postgres backend's CPU can be read from /proc
 * (Linux, server on this machine). A measurement, not a test: compare two checkouts on the same
 * box, by ratio. Usage: `DATABASE_URL=<migrated database> node -r @swc-node/register bench/hot-path-cpu.ts`
 * (SWC_NODE_PROJECT=tsconfig.json); it adds actions, attempts and outbox rows to that database, and
 * the sweep figure means "nothing due" only when the database's outbox is otherwise drained.
 */
import { randomUUID } from 'node:crypto';
import { Database, DispatchRepository, OutboxRepository } from '@gateway/db';
import { insertAdmittedAction, succeededOutcome } from '@gateway/testing';
import { cpuMs } from './bench-env';

const N = Number(process.env.HOT_PATH_N ?? 200);
const ROUNDS = 3;
const DELETE_RUN_PUBLISHED = {
  name: 'hot_path_delete_run_published',
  text: 'DELETE FROM outbox_message WHERE key = $1::text',
};

function backendCpuMs(pid: number): number | null {
  try {
    return cpuMs(pid);
  } catch {
    return null;
  }
}

async function measure(db: Database, pid: number, label: string, prepare: () => Promise<unknown[]>, op: (x: unknown) => Promise<unknown>) {
  const inputs = await prepare();
  const c0 = process.cpuUsage();
  const b0 = backendCpuMs(pid);
  for (const x of inputs) await op(x);
  const c = process.cpuUsage(c0);
  const b1 = backendCpuMs(pid);
  const backend = b0 === null || b1 === null ? 'n/a' : ((b1 - b0) / inputs.length).toFixed(2);
  console.log(
    `${label.padEnd(28)} client ${((c.user + c.system) / 1000 / inputs.length).toFixed(2)} ms  postgres ${backend} ms  (per op, n=${inputs.length})`,
  );
}

async function main(): Promise<void> {
  const url = process.env.DATABASE_URL;
  if (!url) throw new Error('DATABASE_URL (a migrated database) is required');
  const db = new Database(url, { poolMax: 1 });
  const outbox = new OutboxRepository(db);
  const repo = new DispatchRepository(db, outbox);
  const pid = (await db.query<{ pid: number }>({ name: 'hot_path_backend_pid', text: 'SELECT pg_backend_pid() AS pid' }, []))[0].pid;
  const workloadId = `hot-path-${randomUUID()}`;
  const attempts = async () => {
    const ids: string[] = [];
    for (let i = 0; i < N; i++) ids.push(await insertAdmittedAction(db, { workloadId, deadline: new Date(Date.now() + 600_000) }));
    return ids;
  };
  const claimAndComplete = async (x: unknown) => {
    const actionId = x as string;
    const attemptId = randomUUID();
    const now = new Date();
    const base = {
      actionId,
      attemptId,
      attemptNo: 1,
      role: 'primary' as const,
      routeId: 'r',
      routeVersion: 1,
      effectiveCandidates: 1,
      holdMicrousd: null,
      policyRevisionId: null,
    };
    const claim = await repo.claim({ ...base, claimedBy: 'hot-path', now });
    if (!claim.ok) throw new Error(`claim refused: ${claim.reason}`);
    await repo.complete(succeededOutcome({ actionId, attemptId, workloadId, now }));
  };
  const emptySweep = () => outbox.drainBatch(100, async () => ({ published: [], quarantined: [] }));
  // The first round warms up (prepared statements, JIT) and is not reported.
  for (let round = 0; round <= ROUNDS; round++) {
    const report = round > 0;
    await measure(db, pid, report ? 'dispatch claim + complete' : 'warm-up', attempts, claimAndComplete);
    // Nobody publishes this run's events: delete them as the relay would, so the sweep finds nothing (as it nearly always does).
    const drained = async () => {
      await db.query(DELETE_RUN_PUBLISHED, [workloadId]);
      return Array.from({ length: N });
    };
    await measure(db, pid, report ? 'outbox sweep (nothing due)' : 'warm-up', drained, emptySweep);
  }
  await db.close();
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
