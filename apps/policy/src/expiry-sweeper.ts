import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { InjectLogger, PeriodicJob } from '@gateway/service-kit';
import { ExpireExceptions } from './usecases/expire-exceptions/expire-exceptions.usecase';

export const EXPIRY_SWEEP_MS = 'EXPIRY_SWEEP_MS';

/** Runs the expiry bookkeeping periodically (0 disables it; admission never depends on it). */
@Injectable()
export class ExpirySweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly job: PeriodicJob;

  constructor(expire: ExpireExceptions, @Inject(EXPIRY_SWEEP_MS) intervalMs: number, @InjectLogger() log: Logger) {
    this.job = new PeriodicJob(
      intervalMs,
      async () => void (await expire.execute()),
      (err) => log.warn({ error: err.message }, 'exception expiry sweep failed; retrying next tick'),
    );
  }

  onApplicationBootstrap(): void {
    this.job.start();
  }

  onApplicationShutdown(): Promise<void> {
    return this.job.stop();
  }
}
