import { randomUUID } from 'node:crypto';
import { AdmissionRepository, AdmitInput, budgetAccountId, Database, OutboxRepository } from '@gateway/db';
import { admitInput } from '@gateway/testing';

/**
 * DESIGN §7: "The sum of pending + unresolved + settled for a budget never exceeds that budget,
 * under any concurrency" — and the in-flight ceiling and token quota hold the same way. Real
 * Postgres, many admissions racing on the same workload.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('admission holds under concurrency', () => {
  const db = new Database(url, { poolMax: 20 });
  const repo = new AdmissionRepository(db, new OutboxRepository(db));
  const periodStart = new Date('2026-11-01T00:00:00Z');

  afterAll(() => db.close());

  const input = (workloadId: string, over: Partial<AdmitInput> = {}) =>
    admitInput(workloadId, { workloadBudget: { budgetMicrousd: 10_500n, periodStart }, ...over });

  const account = (workloadId: string) =>
    db.prisma.budgetAccount.findUniqueOrThrow({ where: { id: budgetAccountId('workload', workloadId, periodStart) } });

  it('40 racing reservations of 1000 against a budget of 10 500: exactly 10 admitted, pending never above budget', async () => {
    const wl = `race-budget-${randomUUID()}`;
    const results = await Promise.all(Array.from({ length: 40 }, () => repo.admit(input(wl))));
    expect(results.filter((r) => r.ok)).toHaveLength(10);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.code === 'budget_exhausted')).toBe(true);
    const acct = await account(wl);
    expect(acct.pendingMicrousd).toBe(10_000n);
    expect(acct.pendingMicrousd + acct.unresolvedMicrousd + acct.settledMicrousd).toBeLessThanOrEqual(acct.budgetMicrousd);
    // a denied admission leaves nothing behind: no action, no reservation, no slot
    expect(await db.prisma.action.count({ where: { workloadId: wl } })).toBe(10);
    const slots = await db.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: wl } });
    expect(slots.inFlight).toBe(10);
  });

  it('the in-flight ceiling holds under a race, and a refused request consumes no budget', async () => {
    const wl = `race-slots-${randomUUID()}`;
    const results = await Promise.all(
      Array.from({ length: 20 }, () => repo.admit(input(wl, { concurrency: { scope: 'workload', scopeId: wl, maxInFlight: 3 } }))),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(3);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.code === 'concurrency_limit_exceeded')).toBe(true);
    expect((await account(wl)).pendingMicrousd).toBe(3000n);
  });

  it('the token quota holds under a race', async () => {
    const wl = `race-tokens-${randomUUID()}`;
    const windowStart = new Date(Math.floor(Date.now() / 60000) * 60000);
    const results = await Promise.all(
      Array.from({ length: 20 }, () => repo.admit(input(wl, { tokenRate: { scopeId: wl, windowStart, tokens: 110, limit: 500 } }))),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(4);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.code === 'token_quota_exceeded')).toBe(true);
  });

  it('an exception budget is held together with the workload budget, and either can refuse', async () => {
    const wl = `race-exc-${randomUUID()}`;
    const exceptionId = randomUUID();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => repo.admit(input(wl, { exceptionBudget: { exceptionId, budgetMicrousd: 2_500n } }))),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(2);
    const refused = results.find((r) => !r.ok);
    expect(refused).toMatchObject({ ok: false, code: 'budget_exhausted', scope: 'exception' });
    const exc = await db.prisma.budgetAccount.findUniqueOrThrow({ where: { id: budgetAccountId('exception', exceptionId, new Date(0)) } });
    expect(exc.pendingMicrousd).toBe(2000n);
    expect((await account(wl)).pendingMicrousd).toBe(2000n);
  });

  it('a reused idempotency key is a conflict, not a second reservation', async () => {
    const wl = `idem-${randomUUID()}`;
    const first = input(wl);
    first.action.idempotencyKey = 'k1';
    const second = input(wl);
    second.action.idempotencyKey = 'k1';
    expect(await repo.admit(first)).toEqual({ ok: true });
    expect(await repo.admit(second)).toEqual({ ok: false, code: 'idempotency_conflict' });
    expect((await account(wl)).pendingMicrousd).toBe(1000n);
  });
});
