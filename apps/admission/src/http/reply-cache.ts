import { Injectable } from '@nestjs/common';
import { DispatchReplyV1 } from '@gateway/contracts';
import { ContentCipher } from '@gateway/messaging';
import { Clock, InjectClock, InjectConfig, REPLY_CACHE_MAX_BYTES_DEFAULT, ServiceConfig } from '@gateway/service-kit';

const TTL_MS = 10 * 60 * 1000;
const MAX_ENTRIES = 5000;
/** What one entry costs besides its ciphertext: the iv, tag and key id strings, the map entry. */
const ENTRY_OVERHEAD_BYTES = 200;
/** Retries of one running action that may wait for its answer at once; more are told to come back. */
export const MAX_WAITING_RETRIES = 8;

/**
 * What a request ended with: dispatch's reply, or `'timeout'` (no acceptable answer before the
 * workload's deadline: 504 `deadline_exceeded`).
 */
export type Reply = DispatchReplyV1 | 'timeout';

/** An answer as a retry gets it again: the reply and the x-gateway-* headers the first request had. */
export interface HeldAnswer {
  reply: Reply;
  headers: Record<string, string>;
}

type Waiter = (held: HeldAnswer | null) => void;

/**
 * Recent replies, encrypted in memory, so an Idempotency-Key retry gets the first action's
 * result without a second dispatch. Never written to Postgres (it holds completion text).
 * Bounded by age (10 minutes), count (5,000) and bytes (REPLY_CACHE_MAX_BYTES), the oldest going
 * first: an answer may be as large as the reply topic carries (~748 KiB, ~1 MB sealed), and 5,000
 * of them would be 5 GB of heap. An answer larger than the whole bound is not held.
 *
 * An action this instance is still waiting on (`expect`, until `settle`) can be waited for: a
 * retry that arrives while the first request runs (the client's own timeout fired, its connection
 * dropped) gets the first answer when it comes instead of a refusal.
 */
@Injectable()
export class ReplyCache {
  private readonly entries = new Map<
    string,
    { at: number; bytes: number; headers: Record<string, string>; sealed: ReturnType<ContentCipher['encrypt']> }
  >();
  private readonly running = new Map<string, { headers: Record<string, string>; waiters: Waiter[] }>();
  private readonly maxBytes: number;
  private held = 0;

  constructor(
    private readonly cipher: ContentCipher,
    @InjectClock() private readonly clock: Clock,
    @InjectConfig() config: Pick<ServiceConfig, 'replyCacheMaxBytes'> = {},
  ) {
    this.maxBytes = config.replyCacheMaxBytes ?? REPLY_CACHE_MAX_BYTES_DEFAULT;
  }

  /** Holds `reply` with the headers (counts and ids, never content) a replay answers with. */
  put(actionId: string, reply: Reply, headers: Record<string, string> = {}): void {
    const sealed = this.cipher.encrypt(reply, actionId);
    const bytes = sealed.ct.length + actionId.length + JSON.stringify(headers).length + ENTRY_OVERHEAD_BYTES;
    this.drop(actionId);
    if (bytes > this.maxBytes) return; // held, it would push out everything else
    this.evict(bytes);
    this.entries.set(actionId, { at: this.clock.now().getTime(), bytes, headers, sealed });
    this.held += bytes;
  }

  /** Bytes of sealed answers held now (never above REPLY_CACHE_MAX_BYTES). */
  get heldBytes(): number {
    return this.held;
  }

  get(actionId: string): HeldAnswer | null {
    const e = this.entries.get(actionId);
    if (!e || this.clock.now().getTime() - e.at > TTL_MS) return null;
    return { reply: this.cipher.decrypt(e.sealed, actionId) as Reply, headers: e.headers };
  }

  /**
   * The action's answer will come to this instance (its request carried an Idempotency-Key);
   * `headers` are the x-gateway-* headers its answer carries, and a replay too.
   */
  expect(actionId: string, headers: Record<string, string>): void {
    if (!this.running.has(actionId)) this.running.set(actionId, { headers, waiters: [] });
  }

  /**
   * The expected answer came (held, and handed to every retry waiting for it; the deadline's 504
   * is an answer too), or will not come here (`null`: the command was never sent).
   */
  settle(actionId: string, reply: Reply | null): void {
    const expected = this.running.get(actionId);
    this.running.delete(actionId);
    const headers = expected?.headers ?? {};
    if (reply) this.put(actionId, reply, headers);
    for (const w of expected?.waiters ?? []) w(reply ? { reply, headers } : null);
  }

  /**
   * The answer of an action this instance still expects, when it comes (`null` if it never does);
   * `'not_here'` when this instance expects nothing for it, `'busy'` when MAX_WAITING_RETRIES
   * already wait. Waiting ends with the first request's own deadline: `settle` always comes.
   */
  wait(actionId: string): Promise<HeldAnswer | null> | 'not_here' | 'busy' {
    const expected = this.running.get(actionId);
    if (!expected) return 'not_here';
    if (expected.waiters.length >= MAX_WAITING_RETRIES) return 'busy';
    return new Promise((resolve) => expected.waiters.push(resolve));
  }

  /** Makes room for `incoming` bytes: the expired, then the oldest past the count or the byte bound. */
  private evict(incoming: number): void {
    const now = this.clock.now().getTime();
    for (const [k, v] of this.entries) {
      if (now - v.at > TTL_MS || this.entries.size >= MAX_ENTRIES || this.held + incoming > this.maxBytes) this.drop(k);
      else break;
    }
  }

  private drop(actionId: string): void {
    const e = this.entries.get(actionId);
    if (!e) return;
    this.entries.delete(actionId);
    this.held -= e.bytes;
  }
}
