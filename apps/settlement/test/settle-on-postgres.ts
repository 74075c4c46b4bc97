import { randomUUID } from 'node:crypto';
import {
  AttemptRepository,
  CaseRepository,
  CatalogRepository,
  Database,
  ExtraAttemptInput,
  LedgerRepository,
  OutboxRepository,
  ProcessedEventRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { randomIds } from '@gateway/service-kit';
import { answeredAttemptEvent, Seeder } from '@gateway/testing';
import { SettleAttempt } from '../src/usecases/settle-attempt/settle-attempt.usecase';

/** The settle use case over the real repositories on `db` (what the service wires), logging nothing. */
export function settleOnPostgres(db: Database, outbox = new OutboxRepository(db), ledger = new LedgerRepository(outbox)): SettleAttempt {
  return new SettleAttempt(
    new ProcessedEventRepository(db),
    new ReservationHoldRepository(),
    ledger,
    new CaseRepository(db, outbox),
    new AttemptRepository(),
    new CatalogRepository(db),
    randomIds,
    { info: () => undefined },
  );
}

/** A fresh verified route `<prefix>-<random>` with the seeded default price `price-<route>-v1`. */
export function uniqueRoute(prefix: string): { routeId: string; priceId: string; seed: (db: Database) => Promise<void> } {
  const routeId = `${prefix}-${randomUUID().slice(0, 8)}`;
  return {
    routeId,
    priceId: `price-${routeId}-v1`,
    seed: async (db) => {
      await new Seeder(db).route({
        routeId,
        alias: `alias-${routeId}`,
        providerKind: 'openai-chat',
        upstreamBaseUrl: 'http://x',
        upstreamModel: 'm',
      });
    },
  };
}

/**
 * An attempt's error answer (a transient 503) that billed 100 prompt tokens: settlement moves money
 * for it, so it updates the reservation and the action row. `actionFinal` false: a retry or fallback
 * is about to start.
 */
export function billedFailureEvent(
  ids: { workloadId: string; actionId: string; attemptId: string; routeId: string },
  actionFinal: boolean,
) {
  return answeredAttemptEvent(ids, {
    outcome: 'failed',
    http_status: 503,
    returned_candidate_count: 0,
    candidates: [],
    input_tokens: 100,
    output_tokens_total: 0,
    total_tokens: 100,
    action_final: actionFinal,
  });
}

/** A retry (attempt 2) of `actionId` on `route` holding `holdMicrousd`, with room in every limit but the budgets. */
export function retryInput(
  route: { routeId: string; priceId: string },
  actionId: string,
  attemptId: string,
  holdMicrousd: bigint,
  label: string,
): ExtraAttemptInput {
  return {
    actionId,
    attemptId,
    attemptNo: 2,
    role: 'retry',
    routeId: route.routeId,
    routeVersion: 1,
    effectiveCandidates: 1,
    holdMicrousd,
    policyRevisionId: `rev-${label}`,
    priceRevisionId: route.priceId,
    limits: {
      maxAttempts: 3,
      maxHedges: 1,
      maxRetries: 1,
      maxExtraSpendMicrousd: 10_000n,
      spendFloorMicrousd: 0n,
      minUsefulRemainingMs: 0,
    },
    claimedBy: `d-${label}`,
    now: new Date(),
  };
}
