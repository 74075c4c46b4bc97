import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { Clock, InjectClock, InjectLogger } from '@gateway/service-kit';
import { SWEEP_CONFIG, SweepConfig } from '../reconciliation.config';
import { ReconciliationMetrics } from '../reconciliation.metrics';
import { SweepReservations } from '../usecases/sweep-reservations/sweep-reservations.usecase';

/** Runs the sweeper every RECONCILIATION_SWEEP_MS; one sweep at a time per instance (instances coordinate through row locks). */
@Injectable()
export class SweepScheduler implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer?: NodeJS.Timeout;
  private running: Promise<void> | null = null;

  constructor(
    private readonly sweep: SweepReservations,
    private readonly metrics: ReconciliationMetrics,
    @Inject(SWEEP_CONFIG) private readonly config: SweepConfig,
    @InjectLogger() private readonly log: Logger,
    @InjectClock() private readonly clock: Clock,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.intervalMs <= 0) return;
    this.timer = setInterval(() => this.tick(), this.config.intervalMs);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  private tick(): void {
    if (this.running) return;
    this.running = this.sweep
      .execute(this.clock.now())
      .then((report) => {
        this.metrics.swept.inc({ kind: 'voided' }, report.voidedActionIds.length);
        this.metrics.swept.inc({ kind: 'orphaned_attempt' }, report.orphans.length);
      })
      .catch((err: Error) => {
        this.metrics.sweepFailures.inc();
        this.log.error({ error: err.message }, 'sweep failed');
      })
      .finally(() => {
        this.running = null;
      });
  }
}
