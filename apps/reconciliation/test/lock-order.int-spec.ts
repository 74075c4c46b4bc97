/**
 * One global lock order (docs/architecture.md, "Lock order"): attempt, action, reservation, quota
 * counters, budget accounts. Admission takes a workload's in-flight counter and then its budget
 * account in one statement; the sweeper that voids undispatchable reservations touches the same
 * two rows. Before the order was fixed the sweeper moved the budget first and returned the slot
 * after (78 deadlocks in one fault-injection run). Here they race on one workload against the
 * real Postgres, and no transaction may be a deadlock victim. Team and environment budget accounts
 * (issue 16) are shared by several workloads: admission takes them after the workload's (and the
 * exception's) and the hold movement locks them in that same order.
 */
import { randomUUID } from 'node:crypto';
import {
  AdmissionRepository,
  AttemptRepository,
  CaseRepository,
  Database,
  OutboxRepository,
  ReconciliationRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { randomIds } from '@gateway/service-kit';
import { admitInput } from '@gateway/testing';
import { SweepReservations } from '../src/usecases/sweep-reservations/sweep-reservations.usecase';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

describe('admission and the sweeper take locks in one order', () => {
  const admissionDb = new Database(url, { poolMax: 12 });
  const sweeperDbs = [new Database(url, { poolMax: 4 }), new Database(url, { poolMax: 4 })];
  const admission = new AdmissionRepository(admissionDb, new OutboxRepository(admissionDb));
  const sweepers = sweeperDbs.map(
    (own) =>
      new SweepReservations(
        new ReconciliationRepository(own),
        new CaseRepository(own, new OutboxRepository(own)),
        new ReservationHoldRepository(),
        new AttemptRepository(),
        { intervalMs: 0, orphanGraceMs: 60_000, dispatchClockSkewMs: 0, batchSize: 50 },
        randomIds,
        quiet,
      ),
  );

  afterAll(() => Promise.all([admissionDb, ...sweeperDbs].map((d) => d.close())));

  it('racing admissions and voiding sweeps on one workload: no deadlock, every hold voided once', async () => {
    const workloadId = `lock-order-${randomUUID()}`;
    const periodStart = new Date('2026-11-01T00:00:00Z');
    let admitting = true;
    // Admitted with a dispatch deadline already past: the sweepers void them as fast as they come.
    const admissions = (async () => {
      const results = [];
      try {
        for (let round = 0; round < 12; round++) {
          const batch = Array.from({ length: 12 }, () => {
            const input = admitInput(workloadId, { workloadBudget: { budgetMicrousd: 100_000_000n, periodStart } });
            input.action.dispatchDeadlineAt = new Date(Date.now() - 1000);
            return admission.admit(input);
          });
          results.push(...(await Promise.all(batch)));
        }
      } finally {
        admitting = false;
      }
      return results;
    })();
    const sweeping = sweepers.map(async (s) => {
      let voided = 0;
      while (admitting) voided += (await s.execute(new Date())).voidedActionIds.length;
      // then drain what is left, batch by batch
      for (let n = -1; n !== 0; voided += n) n = (await s.execute(new Date())).voidedActionIds.length;
      return voided;
    });
    const results = await admissions;
    const voided = (await Promise.all(sweeping)).reduce((a, b) => a + b, 0);

    const deadlocks = [admissionDb, ...sweeperDbs].reduce((n, d) => n + d.retries.deadlock, 0);
    expect(deadlocks).toBe(0);
    expect(results.every((r) => r.ok)).toBe(true);
    expect(voided).toBeGreaterThanOrEqual(results.length);
    expect(await admissionDb.prisma.action.count({ where: { workloadId, status: 'expired' } })).toBe(results.length);
    const [account] = await admissionDb.prisma.budgetAccount.findMany({ where: { scope: 'workload', scopeId: workloadId } });
    expect(account.pendingMicrousd).toBe(0n);
    const slots = await admissionDb.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: workloadId } });
    expect(slots.inFlight).toBe(0);
  });

  it('two workloads of one team and environment: admissions and voiding sweeps on the shared accounts, no deadlock', async () => {
    const team = `team-${randomUUID()}`;
    const environment = `env-${randomUUID()}`;
    const workloads = [`lock-order-a-${randomUUID()}`, `lock-order-b-${randomUUID()}`];
    const periodStart = new Date('2026-11-01T00:00:00Z');
    const scopeBudgets = [
      { scope: 'team' as const, scopeId: team, budgetMicrousd: 100_000_000n, periodStart },
      { scope: 'environment' as const, scopeId: environment, budgetMicrousd: 100_000_000n, periodStart },
    ];
    let admitting = true;
    const admissions = (async () => {
      const results = [];
      try {
        for (let round = 0; round < 10; round++) {
          const batch = Array.from({ length: 12 }, (_, i) => {
            const input = admitInput(workloads[i % 2], { workloadBudget: { budgetMicrousd: 100_000_000n, periodStart }, scopeBudgets });
            input.action.dispatchDeadlineAt = new Date(Date.now() - 1000);
            return admission.admit(input);
          });
          results.push(...(await Promise.all(batch)));
        }
      } finally {
        admitting = false;
      }
      return results;
    })();
    const sweeping = sweepers.map(async (s) => {
      while (admitting) await s.execute(new Date());
      for (let n = -1; n !== 0;) n = (await s.execute(new Date())).voidedActionIds.length;
    });
    const results = await admissions;
    await Promise.all(sweeping);

    const deadlocks = [admissionDb, ...sweeperDbs].reduce((n, d) => n + d.retries.deadlock, 0);
    expect(deadlocks).toBe(0);
    expect(results.every((r) => r.ok)).toBe(true);
    const shared = await admissionDb.prisma.budgetAccount.findMany({ where: { scopeId: { in: [team, environment] } } });
    expect(shared.map((a) => [a.scope, a.pendingMicrousd])).toEqual(
      expect.arrayContaining([
        ['team', 0n],
        ['environment', 0n],
      ]),
    );
    expect(shared).toHaveLength(2);
  });
});
