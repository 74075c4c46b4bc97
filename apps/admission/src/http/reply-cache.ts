import { Injectable } from '@nestjs/common';
import { DispatchReplyV1 } from '@gateway/contracts';
import { ContentCipher } from '@gateway/messaging';
import { Clock, InjectClock } from '@gateway/service-kit';

const TTL_MS = 10 * 60 * 1000;
const MAX_ENTRIES = 5000;

/**
 * Recent replies, encrypted in memory, so an Idempotency-Key retry gets the first action's
 * result without a second dispatch. Never written to Postgres (it holds completion text).
 */
@Injectable()
export class ReplyCache {
  private readonly entries = new Map<string, { at: number; sealed: ReturnType<ContentCipher['encrypt']> }>();

  constructor(
    private readonly cipher: ContentCipher,
    @InjectClock() private readonly clock: Clock,
  ) {}

  put(actionId: string, reply: DispatchReplyV1): void {
    this.evict();
    this.entries.set(actionId, { at: this.clock.now().getTime(), sealed: this.cipher.encrypt(reply, actionId) });
  }

  get(actionId: string): DispatchReplyV1 | null {
    const e = this.entries.get(actionId);
    if (!e || this.clock.now().getTime() - e.at > TTL_MS) return null;
    return this.cipher.decrypt(e.sealed, actionId) as DispatchReplyV1;
  }

  private evict(): void {
    const now = this.clock.now().getTime();
    for (const [k, v] of this.entries) {
      if (now - v.at > TTL_MS || this.entries.size >= MAX_ENTRIES) this.entries.delete(k);
      else break;
    }
  }
}
