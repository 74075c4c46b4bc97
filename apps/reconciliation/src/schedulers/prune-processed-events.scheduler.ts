import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { Clock, InjectClock, InjectLogger, PeriodicJob, ScheduledJob } from '@gateway/service-kit';
import { SWEEP_CONFIG, SweepConfig } from '../reconciliation.config';
import { PruneProcessedEvents } from '../usecases/prune-processed-events/prune-processed-events.usecase';

const PRUNE_MS = 60 * 60 * 1000;

/** Prunes the consumers' processed event ids past the redelivery horizon every hour (off when the sweeper is off). */
@Injectable()
export class PruneProcessedEventsScheduler extends ScheduledJob {
  constructor(
    prune: PruneProcessedEvents,
    @Inject(SWEEP_CONFIG) config: SweepConfig,
    @InjectLogger() log: Logger,
    @InjectClock() clock: Clock,
  ) {
    super(
      new PeriodicJob(
        config.intervalMs <= 0 ? 0 : PRUNE_MS,
        async () => void (await prune.execute(clock.now())),
        (err) => log.error({ error: err.message }, 'pruning processed event ids failed'),
      ),
    );
  }
}
