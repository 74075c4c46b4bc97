/** One partition's next offset to read, as kafkajs' `commitOffsets` takes it. */
export interface PartitionOffset {
  topic: string;
  partition: number;
  offset: string;
}

/**
 * Commits a consumer's offsets at most once per `intervalMs` instead of after every fetched
 * batch (kafkajs' default), for consumers whose committed offset only ever matters to their own
 * process: a per-instance group (`perInstance`) is new in every process, so its offsets are read
 * again only when the consumer is re-created inside the same process (a crash the bus recovers
 * from). That consumer then resumes at most `intervalMs` of messages back, which it would also
 * get again after a crash between a batch and its commit; replies already answered find no
 * waiter. At a reply per action, a commit per batch was one more broker request per action for
 * admission and for policy (docs/decisions.md, "CPU per action"). Nothing is timed while nothing
 * is consumed.
 *
 * Also for a shared group whose handler is idempotent (dispatch's commands: the single-use claim
 * refuses a command seen again), where the commit per batch sat inside every fetch cycle
 * (docs/decisions.md, "Latency at a moderate rate"). There a rebalance may move a partition to
 * another member before its pending offset went out: `retain` drops it, so a late commit never
 * moves back an offset the new owner committed; the new owner reads again from the last commit.
 */
export class OffsetCommitter {
  private readonly pending = new Map<string, PartitionOffset>();
  /** partitions with a commit attempted: a partition's first offset is committed at once */
  private readonly started = new Set<string>();
  private timer?: NodeJS.Timeout;
  /** bumped by each `retain` (a rebalance) */
  private assignment = 0;

  constructor(
    private readonly intervalMs: number,
    private readonly commit: (offsets: PartitionOffset[]) => Promise<void>,
    private readonly onError: (err: Error) => void,
  ) {}

  /**
   * `offset` was handled: the group may resume after it. A partition's first handled offset is
   * committed at once, as kafkajs would: a new group (`fromBeginning: false`) whose consumer is
   * re-created before its first commit starts again at "latest" and would skip what came between.
   */
  handled(topic: string, partition: number, offset: string): void {
    const key = keyOf(topic, partition);
    this.pending.set(key, { topic, partition, offset: (BigInt(offset) + 1n).toString() });
    if (!this.started.has(key)) {
      this.started.add(key);
      this.arm(0);
    } else {
      this.arm(this.intervalMs);
    }
  }

  private arm(delayMs: number): void {
    if (this.timer) {
      if (delayMs > 0) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs);
    this.timer.unref();
  }

  /**
   * After a rebalance: forgets the pending offsets of partitions this member no longer holds
   * (another member resumes them from their last commit and may have committed further since).
   */
  retain(assigned: Array<{ topic: string; partitions: number[] }>): void {
    this.assignment += 1;
    const keep = new Set(assigned.flatMap((a) => a.partitions.map((p) => keyOf(a.topic, p))));
    for (const key of [...this.pending.keys()]) if (!keep.has(key)) this.pending.delete(key);
  }

  /** Commits what was handled and not yet committed (also before the consumer disconnects). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.size === 0) return;
    const offsets = [...this.pending.values()];
    this.pending.clear();
    const assignment = this.assignment;
    try {
      await this.commit(offsets);
    } catch (err) {
      // A newer offset handled meanwhile supersedes this one; otherwise try again next time,
      // unless a rebalance came in between (the partition may be another member's now).
      for (const o of offsets) {
        const key = keyOf(o.topic, o.partition);
        if (assignment === this.assignment && !this.pending.has(key)) this.pending.set(key, o);
      }
      this.onError(err as Error);
    }
  }
}

const keyOf = (topic: string, partition: number): string => `${topic}\u0000${partition}`;
