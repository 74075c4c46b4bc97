/**
 * Where the server's WAL stands: `insertLsn` is past every commit that returned before it was
 * read, `flushLsn` is what is on disk, and `serverStartedAt` names the server's run (it changes
 * when Postgres restarts, crash recovery included).
 */
export interface WalPosition {
  insertLsn: bigint;
  flushLsn: bigint;
  serverStartedAt: string;
}

/** `pg_lsn` text (`16/B374D848`) as a number that orders like the LSN. */
export function parseLsn(text: string): bigint {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!m) throw new Error(`not an LSN: ${text}`);
  return (BigInt(`0x${m[1]}`) << 32n) | BigInt(`0x${m[2]}`);
}

/**
 * Why the gate gave items up without releasing them: it was stopped, the server restarted after
 * their commit, or the WAL position could not be read (`detail` then says why).
 */
export type FlushDropReason = 'stopped' | 'restarted' | 'unreadable';

interface Held<T> {
  items: T[];
  serverStartedAt: string;
  /** the insert position read after the commit returned; unset until the first look after it */
  target?: bigint;
}

/**
 * Holds what a commit made with `synchronous_commit = off` (on the server, not yet on its disk)
 * until the server's WAL flush has passed that commit, then releases it. An asynchronous commit
 * is visible at once but a crash of the server can still undo it, so nothing may leave the
 * process on its word before the flush.
 *
 * Each look reads the WAL position once: items handed in before it get the insert position as
 * their target (their commit records are below it), and items whose target the flush position has
 * reached are released. Postgres flushes an asynchronous commit within three `wal_writer_delay`s
 * (200 ms by default), and at once when any later synchronous commit flushes.
 *
 * Dropped, never released: items committed in another run of the server than the one the look
 * sees (a restart between the commit and the flush may have undone them), and everything held
 * when a look fails. Dropping is safe where the caller has a second path that reads what
 * survived from the table itself (the outbox sweep).
 */
export class WalFlushGate<T> {
  private held: Held<T>[] = [];
  private timer?: NodeJS.Timeout;
  private looking?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly position: () => Promise<WalPosition>,
    private readonly release: (items: T[]) => void,
    private readonly drop: (items: T[], reason: FlushDropReason, detail?: string) => void,
    private readonly intervalMs = 50,
  ) {}

  /** `serverStartedAt`: the run of the server that committed them, read in the committing statement. */
  add(items: T[], serverStartedAt: string): void {
    if (items.length === 0) return;
    if (this.stopped) return this.drop(items, 'stopped');
    this.held.push({ items, serverStartedAt });
    this.schedule();
  }

  /** How many items wait for the flush. */
  get waiting(): number {
    return this.held.reduce((n, h) => n + h.items.length, 0);
  }

  /** Stops looking; what is still held is dropped (the sweep finds it). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.looking;
    const left = this.held.splice(0);
    if (left.length > 0)
      this.drop(
        left.flatMap((h) => h.items),
        'stopped',
      );
  }

  /** One look now (tests; the timer calls it otherwise). */
  look(): Promise<void> {
    this.looking ??= this.lookOnce().finally(() => {
      this.looking = undefined;
      if (this.held.length > 0) this.schedule();
    });
    return this.looking;
  }

  private schedule(): void {
    if (this.timer || this.looking || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.look();
    }, this.intervalMs);
    // Nothing here must keep a process alive: what is held is in the table, for the sweep.
    this.timer.unref();
  }

  private async lookOnce(): Promise<void> {
    // Only items handed in before the read may take its insert position as their target.
    const before = this.held.length;
    let pos: WalPosition;
    try {
      pos = await this.position();
    } catch (err) {
      const all = this.held.splice(0);
      this.drop(
        all.flatMap((h) => h.items),
        'unreadable',
        (err as Error).message,
      );
      return;
    }
    const keep: Held<T>[] = [];
    const released: T[] = [];
    const lost: T[] = [];
    this.held.forEach((h, i) => {
      if (i >= before) return void keep.push(h); // handed in while the read was out: the next look
      if (h.serverStartedAt !== pos.serverStartedAt) return void lost.push(...h.items);
      h.target ??= pos.insertLsn;
      if (h.target <= pos.flushLsn) released.push(...h.items);
      else keep.push(h);
    });
    this.held = keep;
    if (lost.length > 0) this.drop(lost, 'restarted');
    if (released.length > 0) this.release(released);
  }
}
