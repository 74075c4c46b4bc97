import { randomUUID } from 'node:crypto';
import { budgetAccountId, Database } from '@gateway/db';

/**
 * What admission and dispatch leave behind for one finished attempt: the workload's budget
 * account holding the reservation as pending, the action, its pending reservation and the
 * attempt (succeeded upstream unless said otherwise). Settlement and its poison path start here.
 */
export async function seedHeldAttempt(
  db: Database,
  input: {
    routeId: string;
    priceRevisionId: string;
    reservedMicrousd: bigint;
    periodStart: Date;
    workloadId?: string;
    budgetMicrousd?: bigint;
    actionStatus?: 'dispatched' | 'answered';
  },
): Promise<{ workloadId: string; actionId: string; attemptId: string; accountId: string }> {
  const workloadId = input.workloadId ?? `wl-${randomUUID()}`;
  const actionId = randomUUID();
  const attemptId = randomUUID();
  const accountId = budgetAccountId('workload', workloadId, input.periodStart);
  const now = new Date();
  await db.prisma.budgetAccount.upsert({
    where: { id: accountId },
    create: {
      id: accountId,
      scope: 'workload',
      scopeId: workloadId,
      periodStart: input.periodStart,
      budgetMicrousd: input.budgetMicrousd ?? 1_000_000n,
      pendingMicrousd: input.reservedMicrousd,
    },
    update: { pendingMicrousd: { increment: input.reservedMicrousd } },
  });
  await db.prisma.action.create({
    data: {
      id: actionId,
      requestId: `req-${actionId}`,
      workloadId,
      environment: 'test',
      routeId: input.routeId,
      routeVersion: 1,
      modelAlias: `alias-${input.routeId}`,
      apiKind: 'openai-chat',
      streamMode: 'none',
      effectiveCandidates: 1,
      outputCeiling: 100,
      inputTokensEstimate: 10,
      requestFingerprint: randomUUID(),
      status: input.actionStatus ?? 'answered',
      statusReason: input.actionStatus ?? 'answered',
      deadlineAt: new Date(now.getTime() + 60_000),
      dispatchDeadlineAt: new Date(now.getTime() + 60_000),
      createdAt: now,
      updatedAt: now,
    },
  });
  await db.prisma.reservation.create({
    data: {
      id: randomUUID(),
      actionId,
      workloadAccountId: accountId,
      reservedOutputTokens: 100,
      reservedMicrousd: input.reservedMicrousd,
      priceRevisionId: input.priceRevisionId,
      status: 'pending',
      statusReason: 'reserved at admission',
      createdAt: now,
      updatedAt: now,
    },
  });
  await db.prisma.attempt.create({
    data: {
      id: attemptId,
      actionId,
      attemptNo: 1,
      role: 'primary',
      routeId: input.routeId,
      routeVersion: 1,
      status: 'succeeded',
      statusReason: 'answered',
      effectiveCandidates: 1,
      startedAt: now,
      updatedAt: now,
    },
  });
  return { workloadId, actionId, attemptId, accountId };
}
