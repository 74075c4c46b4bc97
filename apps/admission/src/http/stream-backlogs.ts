/**
 * How much all of one admission instance's streams may hold for clients that do not take them as
 * fast as they come, in bytes. Each stream is bounded on its own (STREAM_CLIENT_BACKLOG_MAX_BYTES,
 * 8 MiB), but a key whose workload may hold many streams at once could open them all and read none:
 * 100 of them would be 800 MiB of admission's heap. Past this total the largest backlogs are cut
 * first, so a client that reads its stream keeps it. 32 MiB keeps admission inside a 256 MB
 * container beside its ~180 MB at saturation and the reply cache's 32 MiB at most in practice.
 */
export const STREAM_BACKLOG_TOTAL_MAX_BYTES = 32 * 1024 * 1024;

/** One open stream, as the instance-wide bound sees it. */
export interface BackloggedStream {
  /** the bytes waiting for this client now (unsent on its connection, and held-back chunks) */
  backlog(): number;
  /** closes the client's connection; `total` is what the instance's streams held when it was chosen */
  cut(total: number): void;
}

/**
 * The instance-wide bound on what streams hold for their clients. A stream reports when its
 * backlog may have grown (`grew`, after each write); the sum of what was last reported is never
 * below the truth (a client's reading is not reported), so only when it passes the bound are all
 * backlogs read again, and if the true total is over, the largest are cut until it is not.
 */
export class StreamBacklogs {
  private readonly streams = new Map<BackloggedStream, number>();
  private reported = 0;

  constructor(readonly maxBytes = STREAM_BACKLOG_TOTAL_MAX_BYTES) {
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 1) throw new RangeError(`maxBytes must be a positive integer, not ${maxBytes}`);
  }

  /** A stream opened; `close` it when it ends, however it ends. */
  open(stream: BackloggedStream): void {
    if (!this.streams.has(stream)) this.streams.set(stream, 0);
  }

  close(stream: BackloggedStream): void {
    const last = this.streams.get(stream);
    if (last === undefined) return;
    this.streams.delete(stream);
    this.reported -= last;
  }

  /** The bytes the open streams hold now, read from each. */
  get total(): number {
    let total = 0;
    for (const s of this.streams.keys()) total += s.backlog();
    return total;
  }

  grew(stream: BackloggedStream): void {
    const last = this.streams.get(stream);
    if (last === undefined) return;
    const now = stream.backlog();
    this.streams.set(stream, now);
    this.reported += now - last;
    if (this.reported <= this.maxBytes) return;
    this.reported = 0;
    for (const s of this.streams.keys()) {
      const b = s.backlog();
      this.streams.set(s, b);
      this.reported += b;
    }
    while (this.reported > this.maxBytes) {
      let largest: BackloggedStream | null = null;
      let most = -1;
      for (const [s, b] of this.streams) {
        if (b > most) [largest, most] = [s, b];
      }
      if (!largest) return;
      const total = this.reported;
      this.close(largest);
      largest.cut(total);
    }
  }
}
