// What withdrawing an admitted action costs (docs/decisions.md, "A client that left before
// dispatch"): admission withdraws every action whose client left while its reservation statement
// ran, and under overload that is dozens a second, on admission's own event loop. Admits
// WITHDRAW_ACTIONS actions of one workload (group commit, as admission does), then withdraws them
// all, WITHDRAW_CONCURRENCY at a time, through `ActionWithdrawal` (the void admission and the
// sweeper share). Prints withdrawals/s, this process's CPU per withdrawal (main thread and all
// threads) and the Postgres backends' CPU per withdrawal, then checks the books: no pending hold,
// no in-flight slot left. Not a test: nothing asserts a speed; it exits non-zero only when the
// books do not add up. With DATABASE_URL set (a migrated database):
//   node -r @swc-node/register bench/withdrawal.ts
import { randomUUID } from 'node:crypto';
import { ActionWithdrawal, AdmissionRepository, budgetAccountId, Database, OutboxRepository } from '@gateway/db';
import { admitInput } from '@gateway/testing';
import { cpuMs, num, required } from './bench-env';

const CFG = {
  url: required('DATABASE_URL'),
  actions: num('WITHDRAW_ACTIONS', 2000),
  concurrency: num('WITHDRAW_CONCURRENCY', 50),
  rounds: num('WITHDRAW_ROUNDS', 3),
};

async function backendCpuMs(db: Database): Promise<number> {
  // the backends of this database, by their pids (/proc): what Postgres spent for this process
  const { rows } = await db.pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  let total = 0;
  for (const { pid } of rows) {
    try {
      total += cpuMs(pid);
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

async function round(db: Database, n: number): Promise<void> {
  const admissions = new AdmissionRepository(db, new OutboxRepository(db));
  const withdrawals = new ActionWithdrawal(db, { warn: () => undefined });
  const workload = `withdraw-bench-${randomUUID().slice(0, 8)}`;
  const periodStart = new Date('2026-12-01T00:00:00Z');
  const ids: string[] = [];
  const inputs = Array.from({ length: CFG.actions }, () => {
    const input = admitInput(workload, { workloadBudget: { budgetMicrousd: 10n ** 12n, periodStart } });
    input.concurrency.maxInFlight = 1_000_000;
    ids.push(input.action.id);
    return input;
  });
  for (let i = 0; i < inputs.length; i += 200) {
    const results = await Promise.all(inputs.slice(i, i + 200).map((input) => admissions.admit(input)));
    if (results.some((r) => !r.ok)) throw new Error(`an admission was refused: ${JSON.stringify(results.find((r) => !r.ok))}`);
  }

  const cpu0 = process.cpuUsage();
  const main0 = cpuMs(process.pid, { mainThread: true });
  const pg0 = await backendCpuMs(db);
  const t0 = process.hrtime.bigint();
  let next = 0;
  const outcomes = new Map<string, number>();
  await Promise.all(
    Array.from({ length: CFG.concurrency }, async () => {
      while (next < ids.length) {
        const outcome = await withdrawals.withdraw(ids[next++], new Date());
        outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const main = cpuMs(process.pid, { mainThread: true }) - main0;
  const pg = (await backendCpuMs(db)) - pg0;

  const [account] = await db.pool
    .query<{ pending: string }>('SELECT pending_microusd::text AS pending FROM budget_account WHERE id = $1', [
      budgetAccountId('workload', workload, periodStart),
    ])
    .then((r) => r.rows);
  const [slot] = await db.pool
    .query<{ in_flight: number }>(`SELECT in_flight FROM quota_counter WHERE scope = 'workload' AND scope_id = $1`, [workload])
    .then((r) => r.rows);
  const per = (ms: number) => (ms / n).toFixed(3);
  console.log(
    `${n} withdrawals, ${CFG.concurrency} at a time: ${(n / seconds).toFixed(0)}/s; CPU ms per withdrawal: this process ${per((cpu.user + cpu.system) / 1000)} (main thread ${per(main)}), Postgres backends ${per(pg)}; outcomes ${JSON.stringify(Object.fromEntries(outcomes))}; pending left ${account.pending}, in flight left ${slot.in_flight}`,
  );
  if (account.pending !== '0' || slot.in_flight !== 0 || outcomes.get('voided') !== n) process.exitCode = 1;
}

async function main() {
  const db = new Database(CFG.url, { poolMax: 10 });
  try {
    for (let i = 0; i < CFG.rounds; i++) await round(db, CFG.actions);
  } finally {
    await db.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
