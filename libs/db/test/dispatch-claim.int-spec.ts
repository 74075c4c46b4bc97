import { randomUUID } from 'node:crypto';
import { AttemptCompletedV1 } from '@gateway/contracts';
import { InvalidTransitionError } from '@gateway/domain';
import { Database, DispatchRepository, OutboxRepository } from '../src';

/**
 * The single-use dispatch claim (DESIGN §7, §9) on the real Postgres: a redelivered command or a
 * second dispatcher never sends an attempt twice; an expired command sends nothing; an attempt's
 * end is recorded once.
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

  it('an attempt ends once: a second completion is refused and writes nothing', async () => {
    const actionId = await admittedAction(new Date(Date.now() + 60_000));
    const attemptId = randomUUID();
    const now = new Date();
    expect(
      await repo.claim({
        actionId,
        attemptId,
        attemptNo: 1,
        role: 'primary',
        routeId: 'r',
        routeVersion: 1,
        effectiveCandidates: 1,
        claimedBy: 'd',
        now,
      }),
    ).toEqual({ ok: true });
    const event = (): AttemptCompletedV1 => ({
      event_id: randomUUID(),
      timestamp: now.toISOString(),
      request_id: randomUUID(),
      action_id: actionId,
      attempt_id: attemptId,
      attempt_no: 1,
      attempt_role: 'primary',
      workload_id: `claim-${actionId}`,
      environment: 'test',
      route_id: 'r',
      route_version: 1,
      model_alias: 'r',
      provider_request_id: 'req-1',
      requested_candidate_count: null,
      effective_candidate_count: 1,
      returned_candidate_count: 1,
      input_tokens: 5,
      output_tokens_total: 7,
      total_tokens: 12,
      cached_input_tokens: 0,
      reasoning_tokens: 0,
      output_includes_reasoning: true,
      stream_mode: 'none',
      usage_source: 'provider_response',
      quota_scope: 'workload',
      policy_result: null,
      policy_reason: null,
      outcome: 'succeeded',
      http_status: 200,
      candidates: [{ index: 0, finish_reason: 'stop', outcome: 'ok' }],
      prompt_block_reason: null,
      attempts_total: 1,
      action_final: true,
    });
    const outcome = (e: AttemptCompletedV1) => ({
      attemptId,
      actionId,
      status: 'succeeded' as const,
      statusReason: 'answered',
      providerRequestId: 'req-1',
      httpStatus: 200,
      returnedCandidates: 1,
      candidateOutcomes: e.candidates,
      promptBlockReason: null,
      usage: { inputTokens: 5, cachedInputTokens: 0, outputTokensTotal: 7, reasoningTokens: 0 },
      usageSource: 'provider_response' as const,
      now,
      event: e,
      delivery: { outcome: 'answered' as const, verdict: 'valid' as const, verdictReason: 'ok' },
      finishAction: { status: 'answered' as const, reason: 'answered', returnedCandidates: 1, workloadId: `claim-${actionId}` },
    });
    const first = event();
    await repo.complete(outcome(first));
    await expect(repo.complete(outcome(event()))).rejects.toBeInstanceOf(InvalidTransitionError);
    const attempt = await db.prisma.attempt.findUniqueOrThrow({ where: { id: attemptId } });
    expect(attempt).toMatchObject({ status: 'succeeded', inputTokens: 5, outputTokensTotal: 7, usageSource: 'provider_response' });
    expect((await db.prisma.action.findUniqueOrThrow({ where: { id: actionId } })).status).toBe('answered');
    expect(await db.prisma.outboxMessage.count({ where: { key: `claim-${actionId}` } })).toBe(1);
  });
});
