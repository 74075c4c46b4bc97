import { RunningService } from '@gateway/service-kit';
import { startReconciliation } from '../src/app';

/**
 * Reconciliation for an int spec: an ephemeral port, no sweeper and no daily-controls schedule
 * (the spec runs what it needs), and the report consumers (decisions, settled events) fetching
 * every 200 ms instead of their idle-cheap 5 s.
 */
export function startTestReconciliation(databaseUrl: string, brokers: string): Promise<RunningService> {
  return startReconciliation({
    ...process.env,
    DATABASE_URL: databaseUrl,
    KAFKA_BROKERS: brokers,
    RECONCILIATION_PORT: '0',
    RECONCILIATION_SWEEP_MS: '0',
    CONTROLS_RUN_MS: '0',
    CONTROLS_FETCH_WAIT_MS: '200',
    AUDIT_FETCH_WAIT_MS: '200',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
  });
}
