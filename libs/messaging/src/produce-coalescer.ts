import type { Message, ProducerBatch } from 'kafkajs';

export interface RawMessage {
  key: string;
  value: string;
  headers?: Record<string, string>;
  /** an explicit partition (addressed topics); otherwise the key's */
  partition?: number;
}

/** The part of a kafkajs producer the coalescer uses. */
export interface BatchProducer {
  sendBatch(batch: ProducerBatch): Promise<unknown>;
}

export interface ProduceCoalescerDeps {
  /** the current producer (connects on first use) */
  producer: () => Promise<BatchProducer>;
  /**
   * Drops the current producer so the next `producer()` is a new one (new producer id, sequences
   * from 0). Called after every failed send: kafkajs has then rolled back the idempotent
   * sequence of every partition in the request, including partitions the broker appended to, so
   * the old producer's next, different, send on them would be dropped as a duplicate or refused
   * as out of order (docs/decisions.md, "Kafka produce path").
   */
  replaceProducer: () => void;
  /** one produce request carries at most this many bytes of keys and values (callers larger than this go alone) */
  maxRequestBytes?: number;
}

/** The broker refused the messages themselves; the same messages can never be published. */
export class PermanentPublishError extends Error {
  constructor(
    /** the broker's error type, e.g. MESSAGE_TOO_LARGE */
    readonly refusal: string,
    cause: Error,
  ) {
    super(`broker refused the messages: ${refusal}`, { cause });
    this.name = 'PermanentPublishError';
  }
}

interface Pending {
  topic: string;
  messages: RawMessage[];
  bytes: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/**
 * Gathers the sends issued while the previous produce request was in flight (or within the same
 * tick) into one `sendBatch`, so concurrent actions share produce requests. Order is kept: sends
 * go out in the order they were issued, one request at a time, and messages of one topic keep
 * their order inside a request. Each caller gets its own outcome: a request the broker refuses
 * for its content is sent again caller by caller (on a new producer), so only the caller whose
 * messages are refused sees `PermanentPublishError`.
 */
export class ProduceCoalescer {
  private queue: Pending[] = [];
  private scheduled = false;
  private flushing = false;

  constructor(private readonly deps: ProduceCoalescerDeps) {}

  send(topic: string, messages: RawMessage[]): Promise<void> {
    if (messages.length === 0) return Promise.resolve();
    let bytes = 0;
    for (const m of messages) bytes += Buffer.byteLength(m.value) + Buffer.byteLength(m.key);
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ topic, messages, bytes, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.flushing) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) await this.sendMerged(this.takeRequest());
    } finally {
      this.flushing = false;
    }
  }

  /** The oldest sends that fit in one request (always at least one). */
  private takeRequest(): Pending[] {
    const max = this.deps.maxRequestBytes ?? 512 * 1024;
    let bytes = this.queue[0].bytes;
    let n = 1;
    while (n < this.queue.length && bytes + this.queue[n].bytes <= max) bytes += this.queue[n++].bytes;
    return this.queue.splice(0, n);
  }

  private async sendMerged(callers: Pending[]): Promise<void> {
    try {
      const producer = await this.deps.producer();
      await producer.sendBatch({ acks: -1, topicMessages: mergeByTopic(callers) });
    } catch (err) {
      this.deps.replaceProducer();
      const refusal = messageRefusal(err);
      if (refusal && callers.length > 1) {
        // Whose messages were refused is not in the error: each caller again, alone, in order.
        for (const caller of callers) await this.sendMerged([caller]);
        return;
      }
      const error = refusal ? new PermanentPublishError(refusal, err as Error) : (err as Error);
      for (const caller of callers) caller.reject(error);
      return;
    }
    for (const caller of callers) caller.resolve();
  }
}

/** One entry per topic, in order of first appearance; each topic's messages in the callers' order. */
function mergeByTopic(callers: Pending[]): Array<{ topic: string; messages: Message[] }> {
  const byTopic = new Map<string, Message[]>();
  for (const c of callers) {
    const list = byTopic.get(c.topic);
    if (list) list.push(...c.messages);
    else byTopic.set(c.topic, [...c.messages]);
  }
  return [...byTopic].map(([topic, messages]) => ({ topic, messages }));
}

/** Broker answers that concern the records sent, not the broker's state (kafkajs protocol error types). */
const MESSAGE_REFUSALS = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD']);

/** The refusal type when `err` (or an error it wraps) is a broker refusal of the records. */
export function messageRefusal(err: unknown): string | null {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length > 0) {
    const e = queue.shift();
    if (!e || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    const { type, cause, errors } = e as { type?: unknown; cause?: unknown; errors?: unknown };
    if (typeof type === 'string' && MESSAGE_REFUSALS.has(type)) return type;
    queue.push(cause);
    if (Array.isArray(errors)) queue.push(...(errors as unknown[]));
  }
  return null;
}
