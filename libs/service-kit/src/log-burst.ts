/** Where a burst's lines go: a bound pino method, e.g. `(fields, msg) => log.warn(fields, msg)`. */
export type LogLine = (fields: Record<string, unknown>, msg: string) => void;

/**
 * One log line per window for an event that comes in bursts. The first occurrence in a window is
 * logged with its own fields; the rest are only counted, and one line when the window ends says
 * how many there were and names the last. A metric still counts every occurrence: the log is
 * for the operator reading it, who needs the first case and the size of the burst, not every line.
 *
 * Why: an outage ends with a replay, and a replay can bring thousands of the same refusal at once
 * (2,204 expired dispatch commands in one chaos run). Lines are written synchronously
 * (`createLogger`), so each one costs a `write` on the event loop that is catching up.
 */
export class LogBurst {
  private windowEndsMs = -Infinity;
  private more = 0;
  private last: Record<string, unknown> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly line: LogLine,
    private readonly msg: string,
    private readonly windowMs: number,
    private readonly nowMs: () => number = Date.now,
  ) {
    if (!Number.isFinite(windowMs) || windowMs <= 0)
      throw new Error(`a log burst's window must be a positive number of ms, not ${windowMs}`);
  }

  /** One occurrence, with the fields its own line would have carried. */
  note(fields: Record<string, unknown>): void {
    const now = this.nowMs();
    if (now >= this.windowEndsMs) {
      this.flush();
      this.windowEndsMs = now + this.windowMs;
      this.line(fields, this.msg);
      return;
    }
    this.more += 1;
    this.last = fields;
    // unref: a pending summary never keeps a stopping process alive (close() writes it instead)
    this.timer ??= setTimeout(() => this.flush(), this.windowEndsMs - now).unref();
  }

  /** Writes the summary of the occurrences not logged yet, if any (a service calls it as it stops). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.more === 0) return;
    this.line(
      { ...this.last, more: this.more, window_ms: this.windowMs },
      `${this.msg}: ${this.more} more within ${this.windowMs / 1000} s of the first, not logged one by one (the last one's fields here)`,
    );
    this.more = 0;
    this.last = null;
  }
}
