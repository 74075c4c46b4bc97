// The settlement benches' data: answered attempts with their actions and reservations, seeded in
// bulk as admission and dispatch leave them, and their attempt.completed events
// (bench/settlement.ts, bench/settlement-profile.ts).
import { randomUUID } from 'node:crypto';
import { AttemptCompletedV1 } from '@gateway/contracts';
import { budgetAccountId, Database } from '@gateway/db';
import { answeredAttemptEvent, Seeder } from '@gateway/testing';

export const ROUTE = 'bench-settle';
export const PRICE = `price-${ROUTE}-v1`;
export const PERIOD = new Date('2026-12-01T00:00:00Z');
export const RESERVED = 20_000n;
export const TEAM_ACCOUNT = budgetAccountId('team', 'bench-team', PERIOD);

export interface Seeded {
  workloadId: string;
  actionId: string;
  attemptId: string;
}

/** The route and price revision every seeded attempt settles at. */
export async function seedRoute(db: Database): Promise<void> {
  await new Seeder(db).route({
    routeId: ROUTE,
    alias: ROUTE,
    providerKind: 'openai-chat',
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamModel: 'm',
  });
}

const SEED_CHUNK = 1_000;

/** Accounts, actions, reservations and attempts as admission and dispatch leave them, in bulk. */
export async function seed(db: Database, n: number, workloadCount: number): Promise<Seeded[]> {
  const workloads = Array.from({ length: workloadCount }, (_, i) => `bench-settle-wl-${i + 1}`);
  const out: Seeded[] = Array.from({ length: n }, (_, i) => ({
    workloadId: workloads[i % workloads.length],
    actionId: randomUUID(),
    attemptId: randomUUID(),
  }));
  const perWorkload = (w: string) => BigInt(out.filter((s) => s.workloadId === w).length) * RESERVED;
  await db.prisma.budgetAccount.createMany({
    data: [
      ...workloads.map((w) => ({
        id: budgetAccountId('workload', w, PERIOD),
        scope: 'workload',
        scopeId: w,
        periodStart: PERIOD,
        budgetMicrousd: 10n ** 15n,
        pendingMicrousd: perWorkload(w),
      })),
      {
        id: TEAM_ACCOUNT,
        scope: 'team',
        scopeId: 'bench-team',
        periodStart: PERIOD,
        budgetMicrousd: 10n ** 15n,
        pendingMicrousd: BigInt(n) * RESERVED,
      },
    ],
  });
  const now = new Date();
  const later = new Date(now.getTime() + 3_600_000);
  // Rows per createMany: below Postgres's 32,767 bind parameters at ~20 columns. Past that
  // Prisma 7 splits the insert itself and sends the parts at once on one transaction's client,
  // which pg 8 warns about and pg 9 refuses ("client.query() when the client is already
  // executing a query"; prisma/orm#29646).
  for (let i = 0; i < n; i += SEED_CHUNK) {
    const chunk = out.slice(i, i + SEED_CHUNK);
    await db.prisma.action.createMany({
      data: chunk.map((s) => ({
        id: s.actionId,
        requestId: `req-${s.actionId}`,
        workloadId: s.workloadId,
        environment: 'bench',
        routeId: ROUTE,
        routeVersion: 1,
        modelAlias: ROUTE,
        apiKind: 'openai-chat',
        streamMode: 'none',
        effectiveCandidates: 1,
        outputCeiling: 100,
        inputTokensEstimate: 10,
        requestFingerprint: s.actionId,
        status: 'answered',
        statusReason: 'answered',
        deadlineAt: later,
        dispatchDeadlineAt: later,
        createdAt: now,
        updatedAt: now,
      })),
    });
    await db.prisma.reservation.createMany({
      data: chunk.map((s) => ({
        id: randomUUID(),
        actionId: s.actionId,
        workloadAccountId: budgetAccountId('workload', s.workloadId, PERIOD),
        scopeAccountIds: [TEAM_ACCOUNT],
        reservedOutputTokens: 100,
        reservedMicrousd: RESERVED,
        priceRevisionId: PRICE,
        status: 'pending',
        statusReason: 'reserved at admission',
        createdAt: now,
        updatedAt: now,
      })),
    });
    await db.prisma.attempt.createMany({
      data: chunk.map((s) => ({
        id: s.attemptId,
        actionId: s.actionId,
        attemptNo: 1,
        role: 'primary',
        routeId: ROUTE,
        routeVersion: 1,
        status: 'succeeded',
        statusReason: 'answered',
        effectiveCandidates: 1,
        providerRequestId: `chatcmpl-${s.attemptId}`, // what answeredAttemptEvent reports
        startedAt: now,
        endedAt: now, // dispatch's completion sets both, in the update that leaves in_flight
        updatedAt: now,
      })),
    });
  }
  return out;
}

export function completed(s: Seeded, at: Date): AttemptCompletedV1 {
  return answeredAttemptEvent(
    { workloadId: s.workloadId, actionId: s.actionId, attemptId: s.attemptId, routeId: ROUTE },
    {
      timestamp: at.toISOString(),
      environment: 'bench',
      model_alias: ROUTE,
      input_tokens: 120,
      output_tokens_total: 40,
      total_tokens: 160,
    },
  );
}
