import { randomUUID } from 'node:crypto';
import { Database, DispatchRepository, OutboxRepository } from '../src';

/**
 * The single-use dispatch claim (DESIGN §7, §9) on the real Postgres: a redelivered command or a
 * second dispatcher never sends an attempt twice; an expired command sends nothing. (An attempt's
 * end: apps/dispatch/test/evidence-write.int-spec.ts.)
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('dispatch claims and completion', () => {
  const db = new Database(url, { poolMax: 20 });
  const repo = new DispatchRepository(db, new OutboxRepository(db));

  afterAll(() => db.close());

  async function admittedAction(dispatchDeadline: Date, status = 'admitted'): Promise<string> {
    const id = randomUUID();
    const now = new Date();
    await db.prisma.action.create({
      data: {
        id,
        workloadId: `claim-${id}`,
        environment: 'test',
        routeId: 'r',
        routeVersion: 1,
        modelAlias: 'r',
        apiKind: 'openai-chat',
        streamMode: 'none',
        requestedCandidates: null,
        effectiveCandidates: 1,
        outputCeiling: 10,
        inputTokensEstimate: 5,
        requestFingerprint: 'f',
        status,
        statusReason: 'test',
        deadlineAt: dispatchDeadline,
        dispatchDeadlineAt: dispatchDeadline,
        createdAt: now,
        updatedAt: now,
      },
    });
    return id;
  }

  const claim = (actionId: string, claimedBy: string, now = new Date()) =>
    repo.claim({
      actionId,
      attemptId: randomUUID(),
      attemptNo: 1,
      role: 'primary',
      routeId: 'r',
      routeVersion: 1,
      effectiveCandidates: 1,
      holdMicrousd: null,
      policyRevisionId: null,
      claimedBy,
      now,
    });

  it('of 12 racing dispatchers exactly one claims the attempt; the action becomes dispatched once', async () => {
    const actionId = await admittedAction(new Date(Date.now() + 60_000));
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => claim(actionId, `dispatcher-${i}`)));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results.filter((r) => !r.ok).every((r) => !r.ok && r.reason === 'already_claimed')).toBe(true);
    expect(await db.prisma.attempt.count({ where: { actionId } })).toBe(1);
    expect(await db.prisma.dispatchClaim.count({ where: { actionId } })).toBe(1);
    expect((await db.prisma.action.findUniqueOrThrow({ where: { id: actionId } })).status).toBe('dispatched');
  });

  it('an expired command, an unknown action and an expired action send nothing', async () => {
    const past = await admittedAction(new Date(Date.now() - 1000));
    expect(await claim(past, 'd')).toEqual({ ok: false, reason: 'expired' });
    expect(await claim(randomUUID(), 'd')).toEqual({ ok: false, reason: 'not_dispatchable' });
    const swept = await admittedAction(new Date(Date.now() + 60_000), 'expired');
    expect(await claim(swept, 'd')).toEqual({ ok: false, reason: 'not_dispatchable' });
    expect(await db.prisma.attempt.count({ where: { actionId: { in: [past, swept] } } })).toBe(0);
  });
});
