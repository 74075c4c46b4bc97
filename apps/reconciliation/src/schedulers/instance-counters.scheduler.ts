import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { Clock, InjectClock, InjectLogger, PeriodicJob, ScheduledJob } from '@gateway/service-kit';
import { SWEEP_CONFIG, SweepConfig } from '../reconciliation.config';
import { ReconcileInstanceCounters } from '../usecases/reconcile-instance-counters/reconcile-instance-counters.usecase';

const INSTANCE_COUNTERS_MS = 15_000;

/** Keeps the instance-scoped quota metrics current: reconciles every 15 s (off when the sweeper is off). */
@Injectable()
export class InstanceCountersScheduler extends ScheduledJob {
  constructor(
    reconcile: ReconcileInstanceCounters,
    @Inject(SWEEP_CONFIG) config: SweepConfig,
    @InjectLogger() log: Logger,
    @InjectClock() clock: Clock,
  ) {
    super(
      new PeriodicJob(
        config.intervalMs <= 0 ? 0 : INSTANCE_COUNTERS_MS,
        async () => void (await reconcile.execute(clock.now())),
        (err) => log.error({ error: err.message }, 'instance counter reconciliation failed'),
      ),
    );
  }
}
