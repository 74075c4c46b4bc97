import { randomUUID } from 'node:crypto';
import { InvalidTransitionError } from '@gateway/domain';
import { insertAdmittedAction, primaryClaim, succeededOutcome } from '@gateway/testing';
import { AttemptOutcome, Database, DispatchRepository, OutboxRepository } from '@gateway/db';

/**
 * Dispatch's claims and completions go to Postgres in groups (issue 12: one round trip and one
 * commit for the claims, and apart the completions, that arrive together). On the real Postgres:
 * each item of a group is decided exactly as it was alone, one item's failure fails only that
 * item, and the in-flight slots of every workload in a completion group are released once each.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('grouped dispatch claims and completions', () => {
  const db = new Database(url, { poolMax: 10 });
  const repo = new DispatchRepository(db, new OutboxRepository(db));
  const statements = jest.spyOn(db, 'query');

  afterAll(() => db.close());
  beforeEach(() => statements.mockClear());

  const groupCalls = (name: string) => statements.mock.calls.filter(([s]) => s.name === name).length;

  async function actionsOf(workloads: string[], perWorkload: number, deadline = new Date(Date.now() + 60_000)) {
    const out: Array<{ actionId: string; attemptId: string; workloadId: string }> = [];
    for (const workloadId of workloads) {
      await db.prisma.quotaCounter.create({
        data: { scope: 'workload', scopeId: workloadId, windowStart: new Date(0), inFlight: perWorkload },
      });
      for (let i = 0; i < perWorkload; i++) {
        out.push({ actionId: await insertAdmittedAction(db, { workloadId, deadline }), attemptId: randomUUID(), workloadId });
      }
    }
    return out;
  }

  const inFlightOf = async (workloadId: string) =>
    (await db.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: workloadId } })).inFlight;

  it('claims issued together share statements, and each is decided as if alone: taken, already taken, expired, unknown', async () => {
    const [a, b, c] = [`grp-${randomUUID()}`, `grp-${randomUUID()}`, `grp-${randomUUID()}`];
    const fresh = await actionsOf([a, b, c], 8);
    const [expired] = await actionsOf([`grp-${randomUUID()}`], 1, new Date(Date.now() - 1_000));
    const now = new Date();
    const results = await Promise.all([
      ...fresh.map((x) => repo.claim(primaryClaim(x.actionId, x.attemptId, now))),
      // a redelivered command of the first action, in the same group as its first delivery
      repo.claim(primaryClaim(fresh[0].actionId, randomUUID(), now)),
      repo.claim(primaryClaim(expired.actionId, expired.attemptId, now)),
      repo.claim(primaryClaim(randomUUID(), randomUUID(), now)),
    ]);
    expect(results.slice(0, fresh.length)).toEqual(fresh.map(() => ({ ok: true })));
    expect(results.slice(fresh.length)).toEqual([
      { ok: false, reason: 'already_claimed' },
      { ok: false, reason: 'expired' },
      { ok: false, reason: 'not_dispatchable' },
    ]);
    expect(groupCalls('dispatch_claim_group')).toBeLessThan(results.length / 4);
    const attempts = await db.prisma.attempt.findMany({ where: { actionId: { in: fresh.map((x) => x.actionId) } } });
    expect(attempts.map((t) => t.id).sort()).toEqual(fresh.map((x) => x.attemptId).sort());
    expect(new Set(attempts.map((t) => t.status))).toEqual(new Set(['in_flight']));
    const actions = await db.prisma.action.findMany({ where: { id: { in: fresh.map((x) => x.actionId) } } });
    expect(new Set(actions.map((x) => x.status))).toEqual(new Set(['dispatched']));
    expect(await db.prisma.attempt.count({ where: { actionId: expired.actionId } })).toBe(0);
  });

  it('completions of several workloads share statements; each workload gets back exactly the slots of its ended actions', async () => {
    const [a, b] = [`grp-${randomUUID()}`, `grp-${randomUUID()}`];
    const all = await actionsOf([a, b], 10);
    const now = new Date();
    await Promise.all(all.map((x) => repo.claim(primaryClaim(x.actionId, x.attemptId, now))));
    statements.mockClear();
    // one action of b was expired by the sweeper meanwhile: its answer is refused, its slot stays
    const swept = all[all.length - 1];
    await db.prisma.action.update({ where: { id: swept.actionId }, data: { status: 'expired' } });
    const outcomes = all.map((x) => succeededOutcome({ ...x, now }));
    const settled = await Promise.allSettled([
      ...outcomes.map((o) => repo.complete(o)),
      // the same outcome twice in one group: recorded once, the second run sees the first's row
      repo.complete(outcomes[0]),
    ]);
    const answers = settled.map((s) => (s.status === 'fulfilled' ? s.value : s.reason));
    expect(answers.slice(0, all.length - 1)).toEqual(all.slice(0, -1).map(() => 'recorded'));
    expect(answers[all.length - 1]).toBeInstanceOf(InvalidTransitionError);
    expect(answers[all.length]).toBe('already_recorded');
    expect(groupCalls('dispatch_complete_group')).toBeLessThan(settled.length / 4);
    expect(await inFlightOf(a)).toBe(0);
    expect(await inFlightOf(b)).toBe(1);
    expect(await db.prisma.outboxMessage.count({ where: { eventId: { in: outcomes.map((o) => o.event.event_id) } } })).toBe(all.length - 1);
    const answered = await db.prisma.action.count({ where: { id: { in: all.map((x) => x.actionId) }, status: 'answered' } });
    expect(answered).toBe(all.length - 1);
  });

  it('an item the database refuses fails alone: the rest of its group is recorded', async () => {
    const w = `grp-${randomUUID()}`;
    const all = await actionsOf([w], 6);
    const now = new Date();
    await Promise.all(all.map((x) => repo.claim(primaryClaim(x.actionId, x.attemptId, now))));
    const outcomes: AttemptOutcome[] = all.map((x) => succeededOutcome({ ...x, now }));
    // an int column out of range: the whole group statement fails, then each item goes alone
    outcomes[2] = { ...outcomes[2], usage: { ...outcomes[2].usage!, inputTokens: 2 ** 40 } };
    const settled = await Promise.allSettled(outcomes.map((o) => repo.complete(o)));
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(String((settled[2] as PromiseRejectedResult).reason)).toMatch(/out of range/);
    expect(await inFlightOf(w)).toBe(1);
    expect((await db.prisma.attempt.findUniqueOrThrow({ where: { id: all[2].attemptId } })).status).toBe('in_flight');
  });

  it('groupStatements: false sends every claim alone', async () => {
    const alone = new DispatchRepository(db, new OutboxRepository(db), { groupStatements: false });
    const xs = await actionsOf([`grp-${randomUUID()}`], 5);
    const now = new Date();
    await Promise.all(xs.map((x) => alone.claim(primaryClaim(x.actionId, x.attemptId, now))));
    expect(groupCalls('dispatch_claim_group')).toBe(5);
  });
});
