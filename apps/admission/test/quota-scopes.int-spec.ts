import { randomUUID } from 'node:crypto';
import { AdmissionRepository, AdmitInput, budgetAccountId, Database, OutboxRepository, QuotaCounterRepository } from '@gateway/db';
import { reconcileInstanceCounters } from '@gateway/domain';
import { admitInput } from '@gateway/testing';

/**
 * Issue 16: team and environment quotas inside admission's one statement, per-instance token
 * counters reconciled into the organisation-wide figure, and fan-out per workflow id — raced
 * against the real Postgres.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('quota scopes under concurrency', () => {
  // two admission instances: separate pools, separate instance ids
  const dbA = new Database(url, { poolMax: 10 });
  const dbB = new Database(url, { poolMax: 10 });
  const instanceA = new AdmissionRepository(dbA, new OutboxRepository(dbA));
  const instanceB = new AdmissionRepository(dbB, new OutboxRepository(dbB));
  const counters = new QuotaCounterRepository(dbA);
  const periodStart = new Date('2026-11-01T00:00:00Z');
  const windowStart = new Date(Math.floor(Date.now() / 60000) * 60000);

  afterAll(async () => {
    await dbA.close();
    await dbB.close();
  });

  const input = (workloadId: string, over: Partial<AdmitInput> = {}) =>
    admitInput(workloadId, { workloadBudget: { budgetMicrousd: 1_000_000n, periodStart }, ...over });

  it('instance-scoped token counters raced on two instances: each holds its own limit, and the reconciled figure is their sum', async () => {
    const team = `team-${randomUUID()}`;
    const limit = 1000;
    await dbA.prisma.scopeLimit.create({
      data: { scope: 'team', scopeId: team, tokensPerMinute: limit, tokenRateEnforcement: 'instance', updatedBy: 't', changeReason: 't' },
    });
    const tokensOf = (i: number) => 60 + (i % 5) * 10; // 60..100 tokens per request
    const admitOn = (repo: AdmissionRepository, instanceId: string, i: number) =>
      repo.admit(
        input(`wl-${randomUUID()}`, {
          scopeTokenRates: [{ scope: 'team', scopeId: team, instanceId, windowStart, tokens: tokensOf(i), limit }],
        }),
      );
    const requests = Array.from({ length: 60 }, (_, i) => ({ i, instance: i % 2 === 0 ? 'adm-A' : 'adm-B' }));
    const results = await Promise.all(requests.map((r) => admitOn(r.instance === 'adm-A' ? instanceA : instanceB, r.instance, r.i)));

    const admittedTokens = (instance: string) =>
      requests.filter((r, k) => r.instance === instance && results[k].ok).reduce((sum, r) => sum + tokensOf(r.i), 0);
    const refused = results.filter((r) => !r.ok);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused)
      expect(r).toMatchObject({ code: 'token_quota_exceeded', quotaScope: expect.stringMatching(/^instance:adm-[AB]\/team:/) });
    // each instance kept its own limit
    expect(admittedTokens('adm-A')).toBeLessThanOrEqual(limit);
    expect(admittedTokens('adm-B')).toBeLessThanOrEqual(limit);

    const rows = (await counters.instanceScopedTokenCounters(windowStart)).filter((c) => c.scopeId === team);
    const [window] = reconcileInstanceCounters(rows);
    expect(window.instances).toEqual([
      { instanceId: 'adm-A', tokens: admittedTokens('adm-A') },
      { instanceId: 'adm-B', tokens: admittedTokens('adm-B') },
    ]);
    expect(window.organisationTokens).toBe(admittedTokens('adm-A') + admittedTokens('adm-B'));
    expect(window.limit).toBe(limit);
    expect(window.overLimitTokens).toBe(Math.max(0, window.organisationTokens - limit));
    // no organisation-wide row was written for an instance-enforced limit
    expect(await dbA.prisma.quotaCounter.count({ where: { scopeId: team, instanceId: '' } })).toBe(0);
  });

  it('a new team account created by two instances at once: both admissions are decided on it, neither fails as a conflict', async () => {
    // Before migration 20261203700000 the second creator hit the account's other unique key and
    // was answered idempotency_conflict (seen once in CI on the race below); many fresh accounts
    // raised at once make the collision likely.
    const rounds = await Promise.all(
      Array.from({ length: 80 }, async () => {
        const teamBudget = { scope: 'team' as const, scopeId: `team-${randomUUID()}`, budgetMicrousd: 5_500n, periodStart };
        return Promise.all([instanceA, instanceB].map((repo) => repo.admit(input(`wl-${randomUUID()}`, { scopeBudgets: [teamBudget] }))));
      }),
    );
    expect(rounds.flat().filter((r) => !r.ok)).toEqual([]);
  });

  it('a team budget shared by two workloads holds under a race, though neither workload budget is exhausted', async () => {
    const team = `team-${randomUUID()}`;
    const wls = [`wl-a-${randomUUID()}`, `wl-b-${randomUUID()}`];
    const teamBudget = { scope: 'team' as const, scopeId: team, budgetMicrousd: 5_500n, periodStart };
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 === 0 ? instanceA : instanceB).admit(input(wls[i % 2], { scopeBudgets: [teamBudget] }))),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(5);
    for (const r of results.filter((x) => !x.ok))
      expect(r).toMatchObject({ code: 'budget_exhausted', scope: 'team', quotaScope: `team:${team}` });
    const acct = await dbA.prisma.budgetAccount.findUniqueOrThrow({ where: { id: budgetAccountId('team', team, periodStart) } });
    expect(acct.pendingMicrousd).toBe(5_000n);
    // a refused request left nothing on the workload accounts either
    const workloadPending = await dbA.prisma.budgetAccount.aggregate({
      where: { scope: 'workload', scopeId: { in: wls } },
      _sum: { pendingMicrousd: true },
    });
    expect(workloadPending._sum.pendingMicrousd).toBe(5_000n);
    // which workload won the five is up to the race: every admitted reservation names the team account
    const reservations = await dbA.prisma.reservation.findMany({
      where: { workloadAccountId: { in: wls.map((wl) => budgetAccountId('workload', wl, periodStart)) } },
    });
    expect(reservations).toHaveLength(5);
    for (const reservation of reservations) expect(reservation.scopeAccountIds).toEqual([budgetAccountId('team', team, periodStart)]);
  });

  it('fan-out: at most N calls per workflow id per window, under a race', async () => {
    const wl = `wl-${randomUUID()}`;
    const workflowCalls = { scopeId: `${wl}/${'a'.repeat(64)}`, windowStart, limit: 3 };
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        (i % 2 === 0 ? instanceA : instanceB).admit(input(wl, { workflowCalls, workflowIdHash: 'a'.repeat(64) })),
      ),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(3);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.code === 'fanout_limit_exceeded')).toBe(true);
    const counter = await dbA.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workflow_calls', scopeId: workflowCalls.scopeId } });
    expect(counter.calls).toBe(3);
    expect(await dbA.prisma.action.count({ where: { workloadId: wl, workflowIdHash: 'a'.repeat(64) } })).toBe(3);
  });
});
