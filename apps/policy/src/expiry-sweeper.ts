import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { InjectLogger, PeriodicJob, ScheduledJob } from '@gateway/service-kit';
import { ExpireExceptions } from './usecases/expire-exceptions/expire-exceptions.usecase';

export const EXPIRY_SWEEP_MS = 'EXPIRY_SWEEP_MS';

/** Runs the expiry bookkeeping periodically (0 disables it; admission never depends on it). */
@Injectable()
export class ExpirySweeper extends ScheduledJob {
  constructor(expire: ExpireExceptions, @Inject(EXPIRY_SWEEP_MS) intervalMs: number, @InjectLogger() log: Logger) {
    super(
      new PeriodicJob(
        intervalMs,
        async () => void (await expire.execute()),
        (err) => log.warn({ error: err.message }, 'exception expiry sweep failed; retrying next tick'),
      ),
    );
  }
}
