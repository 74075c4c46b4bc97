import type { OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { IdleBackoff } from '@gateway/messaging';

export interface PeriodicJobOptions {
  /**
   * Back off when idle: after a run that reports no work (`run` resolves to false) the wait
   * doubles, up to this, and goes back to `intervalMs` after a run that did some (or failed).
   * Unset or not above `intervalMs`: a fixed interval.
   */
  idleMaxMs?: number;
}

/**
 * A background job run every `intervalMs` (0 or less: never), one run at a time per instance: the
 * next run is scheduled when the previous one has finished, and a `tick()` during a run joins it.
 * The timer never keeps the process alive, and `stop()` waits for the run in progress. Errors go
 * to `onError`; the next run tries again. Sweepers and reconcilers of every service use it.
 */
export class PeriodicJob {
  private timer?: NodeJS.Timeout;
  private running: Promise<void> | null = null;
  private started = false;
  private readonly backoff: IdleBackoff;

  constructor(
    private readonly intervalMs: number,
    private readonly run: () => Promise<boolean | void>,
    private readonly onError: (err: Error) => void,
    opts: PeriodicJobOptions = {},
  ) {
    this.backoff = new IdleBackoff({ baseMs: intervalMs, maxMs: opts.idleMaxMs ?? intervalMs });
  }

  start(): void {
    if (this.intervalMs <= 0 || this.started) return;
    this.started = true;
    this.schedule(this.intervalMs);
  }

  async stop(): Promise<void> {
    this.started = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One run now, unless one is still going. */
  tick(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.runOnce().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async runOnce(): Promise<void> {
    let didWork = true;
    try {
      didWork = (await this.run()) !== false;
    } catch (err) {
      this.onError(err instanceof Error ? err : new Error(String(err)));
    }
    if (this.started && !this.timer) this.schedule(this.backoff.next(didWork));
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.tick();
    }, ms);
    this.timer.unref();
  }
}

/**
 * A Nest provider that runs one `PeriodicJob` from application bootstrap until shutdown (a job of
 * interval 0 never starts): the one home of that wiring, which every scheduler extends.
 */
export abstract class ScheduledJob implements OnApplicationBootstrap, OnApplicationShutdown {
  protected constructor(private readonly job: PeriodicJob) {}

  onApplicationBootstrap(): void {
    this.job.start();
  }

  onApplicationShutdown(): Promise<void> {
    return this.job.stop();
  }
}
