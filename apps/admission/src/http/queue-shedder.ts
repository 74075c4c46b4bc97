/**
 * How long dispatch commands wait before anyone works on them, measured on the replies, and the
 * share of new requests admission refuses while that wait stands above its target (load
 * shedding; docs/decisions.md, "Shedding on the dispatch queue").
 *
 * The signal is a dispatch command's queue wait: the time from publishing it to its first reply,
 * less the time dispatch says it held the command (claim, provider call, records). What is left
 * is the two Kafka hops and every wait in front of a dispatcher. Under overload that wait grows
 * while the provider's time does not, and a client that gives up meanwhile leaves a provider call
 * nobody reads, paid for all the same.
 *
 * The law, per window: with at least `minReplies` replies in it, the smallest wait (a standing
 * queue, not one slow reply: every reply of the window waited at least that long) moves the share
 * by `step` × (wait / target − 1), that factor bounded to [−1, 4], except that a wait above the
 * target raises it only when the window before was above it too; a window with fewer replies
 * lowers it by `step` (no evidence of a queue, so refuse less). The share never passes
 * `maxShare`, so some requests always go through and keep the measurement alive. A request is
 * refused when a uniform draw falls below the share. Pure: the caller passes the time (a
 * monotonic clock, ms) and the draw.
 */
export interface ShedLaw {
  /** queue wait above which requests start to be refused, ms; 0 turns shedding off */
  targetMs: number;
  /** how often the share is revised, ms */
  windowMs: number;
  /** replies a window needs before its wait counts as evidence */
  minReplies: number;
  /** the largest share of requests ever refused */
  maxShare: number;
  /** how far one window moves the share, at a wait of twice the target */
  step: number;
}

export const SHED_LAW_DEFAULTS: Omit<ShedLaw, 'targetMs' | 'windowMs'> = { minReplies: 8, maxShare: 0.9, step: 0.05 };

export class QueueShedder {
  private share = 0;
  private windowStart: number | null = null;
  private replies = 0;
  private minWait = Infinity;
  /** consecutive windows, up to the last one closed, whose smallest wait was above the target */
  private standing = 0;

  constructor(private readonly law: ShedLaw) {}

  get enabled(): boolean {
    return this.law.targetMs > 0;
  }

  /** One reply's queue wait, ms, at `nowMs`. */
  observe(waitMs: number, nowMs: number): void {
    if (!this.enabled || !Number.isFinite(waitMs)) return;
    this.roll(nowMs);
    this.replies += 1;
    if (waitMs < this.minWait) this.minWait = Math.max(0, waitMs);
  }

  /** Whether to refuse a request arriving at `nowMs`; `draw` is uniform in [0, 1). */
  refuses(nowMs: number, draw: number): boolean {
    if (!this.enabled) return false;
    this.roll(nowMs);
    return draw < this.share;
  }

  /** The share of requests refused now. */
  shareAt(nowMs: number): number {
    if (this.enabled) this.roll(nowMs);
    return this.share;
  }

  /** Closes every window that ended by `nowMs`: the first with what it saw, the rest empty. */
  private roll(nowMs: number): void {
    if (this.windowStart === null) {
      this.windowStart = nowMs;
      return;
    }
    const elapsed = Math.floor((nowMs - this.windowStart) / this.law.windowMs);
    if (elapsed < 1) return;
    const { minReplies, maxShare, step, targetMs } = this.law;
    const evidence = this.replies >= minReplies;
    const above = evidence && this.minWait > targetMs;
    this.standing = above && elapsed === 1 ? this.standing + 1 : above ? 1 : 0;
    // A first window above the target waits for a second: the late replies of a backlog that
    // has just cleared (a dispatcher stalled, then caught up) all arrive in one burst.
    const factor = !evidence ? -1 : above && this.standing < 2 ? 0 : Math.min(4, Math.max(-1, this.minWait / targetMs - 1));
    // the windows after the first saw nothing: each lowers the share by a step
    const moved = this.share + step * factor - step * (elapsed - 1);
    this.share = Math.min(maxShare, Math.max(0, moved));
    this.windowStart += elapsed * this.law.windowMs;
    this.replies = 0;
    this.minWait = Infinity;
  }
}
