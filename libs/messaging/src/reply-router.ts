import { DispatchReplyV1 } from '@gateway/contracts';

export type ReplyListener = (reply: DispatchReplyV1) => void;

/**
 * Correlates dispatch replies with the admission request waiting for them. Each admission
 * instance consumes the replies topic in its own consumer group and keeps only its own waiters;
 * a waiter ends at its deadline whether or not a reply came.
 */
export class ReplyRouter {
  private readonly waiters = new Map<string, { listener: ReplyListener; timer: NodeJS.Timeout }>();

  /** Registers before the command is published, so an instant reply is never missed. */
  listen(actionId: string, deadline: Date, now: Date, listener: ReplyListener, onTimeout: () => void): () => void {
    const timer = setTimeout(
      () => {
        this.waiters.delete(actionId);
        onTimeout();
      },
      Math.max(0, deadline.getTime() - now.getTime()),
    );
    this.waiters.set(actionId, { listener, timer });
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

  deliver(actionId: string, reply: DispatchReplyV1): boolean {
    const waiter = this.waiters.get(actionId);
    if (!waiter) return false;
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
