import { Inject, Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { InjectLogger } from '@gateway/service-kit';
import { ExpireExceptions } from './usecases/expire-exceptions/expire-exceptions.usecase';

export const EXPIRY_SWEEP_MS = 'EXPIRY_SWEEP_MS';

/** Runs the expiry bookkeeping periodically (0 disables it; admission never depends on it). */
@Injectable()
export class ExpirySweeper implements OnApplicationBootstrap, OnApplicationShutdown {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;

  constructor(
    private readonly expire: ExpireExceptions,
    @Inject(EXPIRY_SWEEP_MS) private readonly intervalMs: number,
    @InjectLogger() private readonly log: Logger,
  ) {}

  onApplicationBootstrap(): void {
    if (this.intervalMs <= 0) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  private tick(): void {
    if (this.running) return;
    this.running = this.expire
      .execute()
      .catch((err) => this.log.warn({ error: (err as Error).message }, 'exception expiry sweep failed; retrying next tick'))
      .finally(() => {
        this.running = undefined;
      });
  }
}
