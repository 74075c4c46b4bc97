import type { AttemptRepository, CaseRepository, LedgerRepository, ReconciliationStore, ReservationHoldRepository } from '@gateway/db';

/**
 * The repositories reconciliation's use cases call, narrowed to what they use (the in-memory
 * fake in test/ implements them all). Cases, ledger rows, holds and attempt transitions go
 * through the same repositories settlement uses.
 */
export type CasePort = Pick<CaseRepository, 'open' | 'lock' | 'resolve' | 'openExposureOnAction' | 'list'>;
export type LedgerPort = Pick<LedgerRepository, 'record'>;
export type HoldPort = Pick<ReservationHoldRepository, 'lock' | 'lockMany' | 'move' | 'moveMany'>;
export type AttemptPort = Pick<AttemptRepository, 'lockAttempt' | 'byId' | 'transition' | 'awaitingSettlement'>;

export interface MoneyPorts {
  store: ReconciliationStore;
  cases: CasePort;
  holds: HoldPort;
  attempts: AttemptPort;
}
