import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { Clock, InjectClock, InjectLogger, PeriodicJob } from '@gateway/service-kit';
import { SWEEP_CONFIG, SweepConfig } from '../reconciliation.config';
import { PruneProcessedEvents } from '../usecases/prune-processed-events/prune-processed-events.usecase';

const PRUNE_MS = 60 * 60 * 1000;

/** Prunes the consumers' processed event ids past the redelivery horizon every hour (off when the sweeper is off). */
@Injectable()
export class PruneProcessedEventsScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly job: PeriodicJob;

  constructor(
    prune: PruneProcessedEvents,
    @Inject(SWEEP_CONFIG) config: SweepConfig,
    @InjectLogger() log: Logger,
    @InjectClock() clock: Clock,
  ) {
    this.job = new PeriodicJob(
      config.intervalMs <= 0 ? 0 : PRUNE_MS,
      async () => void (await prune.execute(clock.now())),
      (err) => log.error({ error: err.message }, 'pruning processed event ids failed'),
    );
  }

  onApplicationBootstrap(): void {
    this.job.start();
  }

  onApplicationShutdown(): Promise<void> {
    return this.job.stop();
  }
}
