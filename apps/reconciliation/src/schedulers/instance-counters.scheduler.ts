import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { Clock, InjectClock, InjectLogger } from '@gateway/service-kit';
import { SWEEP_CONFIG, SweepConfig } from '../reconciliation.config';
import { ReconcileInstanceCounters } from '../usecases/reconcile-instance-counters/reconcile-instance-counters.usecase';

/** Keeps the instance-scoped quota metrics current: reconciles every 15 s (off when the sweeper is off). */
@Injectable()
export class InstanceCountersScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer?: NodeJS.Timeout;
  private running: Promise<void> | null = null;

  constructor(
    private readonly reconcile: ReconcileInstanceCounters,
    @Inject(SWEEP_CONFIG) private readonly config: SweepConfig,
    @InjectLogger() private readonly log: Logger,
    @InjectClock() private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.intervalMs <= 0) return;
    this.timer = setInterval(() => this.tick(), 15_000);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  private tick(): void {
    if (this.running) return;
    this.running = this.reconcile
      .execute(this.clock.now())
      .then(() => undefined)
      .catch((err: Error) => this.log.error({ error: err.message }, 'instance counter reconciliation failed'))
      .finally(() => {
        this.running = null;
      });
  }
}
