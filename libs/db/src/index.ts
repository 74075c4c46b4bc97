/**
 * @gateway/db: the only Prisma user. Database (client + transactions), the migration runner and
 * repositories that accept a transaction and return plain read models, never Prisma types.
 */
export {
  Database,
  isDatabaseOutOfService,
  isDatabaseRefusingWrites,
  isDatabaseUnavailable,
  isTransientDatabaseError,
  isUniqueViolation,
  IDLE_IN_TRANSACTION_DEFAULT_MS,
  LONGEST_TRANSACTION_MS,
  STATEMENT_ANSWER_DEFAULT_MS,
} from './database';
export type { PreparedStatement, Tx } from './database';
export * from './types';
export * from './repositories/outbox.repository';
export * from './repositories/processed-event.repository';
export * from './repositories/catalog.repository';
export * from './repositories/admission.repository';
export * from './repositories/quota-counter.repository';
export * from './repositories/dispatch.repository';
export * from './repositories/ledger.repository';
export * from './repositories/case.repository';
export * from './repositories/attempt.repository';
export * from './repositories/reservation-hold.repository';
export * from './repositories/reconciliation.repository';
export * from './repositories/undispatched-action';
export * from './repositories/views.repository';
export * from './repositories/policy.repository';
export * from './repositories/exception.repository';
export * from './repositories/change-request.repository';
export * from './repositories/hedge-policy.repository';
export * from './repositories/experiment.repository';
export * from './repositories/experiment-pause.repository';
export * from './repositories/gateway-meta.repository';
export { migrate } from './migrations/migrate';
export type { FlushDropReason } from './wal-flush-gate';
export * from './repositories/controls.repository';
export * from './repositories/audit.repository';
export * from './repositories/usage-export.repository';
