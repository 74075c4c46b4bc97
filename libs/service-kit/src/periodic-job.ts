/**
 * A background job run every `intervalMs` (0 or less: never), one run at a time per instance: a
 * tick that finds the previous run still going is skipped. The timer never keeps the process
 * alive, and `stop()` waits for the run in progress. Errors go to `onError`; the next tick tries
 * again. Sweepers and reconcilers of every service use it.
 */
export class PeriodicJob {
  private timer?: NodeJS.Timeout;
  private running: Promise<void> | null = null;

  constructor(
    private readonly intervalMs: number,
    private readonly run: () => Promise<void>,
    private readonly onError: (err: Error) => void,
  ) {}

  start(): void {
    if (this.intervalMs <= 0 || this.timer) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One run now, unless one is still going. */
  tick(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.run()
      .catch((err: unknown) => this.onError(err instanceof Error ? err : new Error(String(err))))
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }
}
