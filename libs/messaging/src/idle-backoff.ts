export interface IdleBackoffOptions {
  /** the wait while there is work (the job's nominal interval) */
  baseMs: number;
  /** the longest wait once idle; at or below `baseMs` there is no back-off */
  maxMs: number;
  /** keep the base wait this long after the last work before backing off (default 0) */
  graceMs?: number;
  now?: () => number;
}

/**
 * How long a periodic job waits before its next run, so that an idle service costs next to
 * nothing (issue 12): `baseMs` while runs find work, or found some within `graceMs`; then the
 * wait doubles after each empty run, up to `maxMs`. `reset()` is work signalled from outside
 * (a commit that wrote outbox rows): the next wait is `baseMs` again. Failed runs count as work,
 * so they are retried at the base interval.
 */
export class IdleBackoff {
  private delay: number;
  private lastWorkAt: number;
  private readonly now: () => number;

  constructor(private readonly opts: IdleBackoffOptions) {
    this.now = opts.now ?? Date.now;
    this.delay = opts.baseMs;
    this.lastWorkAt = this.now();
  }

  /** The wait before the next run, after a run that did (or did not) find work. */
  next(didWork: boolean): number {
    const now = this.now();
    if (didWork) this.lastWorkAt = now;
    const idle = !didWork && now - this.lastWorkAt >= (this.opts.graceMs ?? 0);
    this.delay = idle ? Math.max(this.opts.baseMs, Math.min(this.opts.maxMs, this.delay * 2)) : this.opts.baseMs;
    return this.delay;
  }

  /** Work arrived from outside. True when the wait in progress was longer than `baseMs` (re-arm it). */
  reset(): boolean {
    this.lastWorkAt = this.now();
    const backedOff = this.delay > this.opts.baseMs;
    this.delay = this.opts.baseMs;
    return backedOff;
  }
}
