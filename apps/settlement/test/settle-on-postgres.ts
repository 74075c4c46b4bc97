import { randomUUID } from 'node:crypto';
import {
  AttemptRepository,
  CaseRepository,
  CatalogRepository,
  Database,
  LedgerRepository,
  OutboxRepository,
  ProcessedEventRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { randomIds } from '@gateway/service-kit';
import { Seeder } from '@gateway/testing';
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
