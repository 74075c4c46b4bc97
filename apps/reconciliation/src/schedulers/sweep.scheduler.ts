import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { Clock, InjectClock, InjectLogger, PeriodicJob, ScheduledJob } from '@gateway/service-kit';
import { SWEEP_CONFIG, SweepConfig } from '../reconciliation.config';
import { ReconciliationMetrics } from '../reconciliation.metrics';
import { SettleLateEvidence } from '../usecases/import-usage/settle-late-evidence.usecase';
import { SweepReservations } from '../usecases/sweep-reservations/sweep-reservations.usecase';

/**
 * Runs the sweeper, then settles the orphan cases that late evidence came for (`SettleLateEvidence`:
 * evidence may come right after the sweep that opened the case), every RECONCILIATION_SWEEP_MS, backing off up to RECONCILIATION_SWEEP_IDLE_MAX_MS
 * while sweeps find nothing; one sweep at a time per instance (instances coordinate through row locks).
 */
@Injectable()
export class SweepScheduler extends ScheduledJob {
  constructor(
    sweep: SweepReservations,
    lateEvidence: SettleLateEvidence,
    metrics: ReconciliationMetrics,
    @Inject(SWEEP_CONFIG) config: SweepConfig,
    @InjectLogger() log: Logger,
    @InjectClock() clock: Clock,
  ) {
    super(
      new PeriodicJob(
        config.intervalMs,
        async () => {
          const report = await sweep.execute(clock.now());
          metrics.swept.inc({ kind: 'voided' }, report.voidedActionIds.length);
          metrics.swept.inc({ kind: 'orphaned_attempt' }, report.orphans.length);
          const late = await lateEvidence.execute(clock.now(), config.batchSize);
          metrics.swept.inc({ kind: 'late_evidence' }, late);
          return report.voidedActionIds.length + report.orphans.length + late > 0;
        },
        (err) => {
          metrics.sweepFailures.inc();
          log.error({ error: err.message }, 'sweep failed');
        },
        { idleMaxMs: config.idleMaxMs },
      ),
    );
  }
}
