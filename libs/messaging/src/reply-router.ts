import { DispatchReplyV1 } from '@gateway/contracts';

export type ReplyListener = (reply: DispatchReplyV1) => void;

/**
 * Hears how long each action's command queued: from `listen` (just before its publish) to its
 * first reply, less the time dispatch says it held the command (`held_ms` on the reply), in ms on
 * this process's monotonic clock, with that moment.
 */
export type QueueWaitObserver = (waitMs: number, atMs: number) => void;

/**
 * Correlates dispatch replies with the admission request waiting for them. Each admission
 * instance consumes the replies topic in its own consumer group and keeps only its own waiters;
 * a waiter ends at its deadline whether or not a reply came.
 */
export class ReplyRouter {
  private readonly waiters = new Map<string, { listener: ReplyListener; timer: NodeJS.Timeout; sentAtMs: number | null }>();
  private queueWaits: QueueWaitObserver | null = null;

  /** Where each action's queue wait goes (admission's load shedding); one observer. */
  observeQueueWaits(observer: QueueWaitObserver): void {
    this.queueWaits = observer;
  }

  /** Registers before the command is published, so an instant reply is never missed. */
  listen(actionId: string, deadline: Date, now: Date, listener: ReplyListener, onTimeout: () => void): () => void {
    const timer = setTimeout(
      () => {
        this.waiters.delete(actionId);
        onTimeout();
      },
      Math.max(0, deadline.getTime() - now.getTime()),
    );
    this.waiters.set(actionId, { listener, timer, sentAtMs: this.queueWaits ? performance.now() : null });
    return () => this.cancel(actionId);
  }

  /** Waits for one terminal (non-chunk) reply. */
  awaitReply(actionId: string, deadline: Date, now: Date): Promise<DispatchReplyV1 | 'timeout'> {
    return new Promise((resolve) => {
      this.listen(
        actionId,
        deadline,
        now,
        (reply) => {
          this.cancel(actionId);
          resolve(reply);
        },
        () => resolve('timeout'),
      );
    });
  }

  /** Whether a reply for the action would reach anyone: a waiter is registered for it. */
  wants(actionId: string): boolean {
    return this.waiters.has(actionId);
  }

  /** `heldMs`: how long dispatch held the command before this reply (absent: an older dispatcher). */
  deliver(actionId: string, reply: DispatchReplyV1, heldMs?: number): boolean {
    const waiter = this.waiters.get(actionId);
    if (!waiter) return false;
    if (waiter.sentAtMs !== null) {
      // the first reply only: a stream's later chunks say nothing more about the queue
      const sent = waiter.sentAtMs;
      waiter.sentAtMs = null;
      const at = performance.now();
      if (heldMs !== undefined) this.queueWaits?.(Math.max(0, at - sent - heldMs), at);
    }
    waiter.listener(reply);
    return true;
  }

  cancel(actionId: string): void {
    const waiter = this.waiters.get(actionId);
    if (waiter) clearTimeout(waiter.timer);
    this.waiters.delete(actionId);
  }

  get pending(): number {
    return this.waiters.size;
  }
}
