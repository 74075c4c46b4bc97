import { DeadLetterReasonClass, DeadLetterV1 } from '@gateway/contracts';
import { backoffMs, deadLetterId, defaultPoisonPolicy, errorClass, ErrorKind, PoisonPolicy, sanitisedReason } from './poison-policy';

export interface BusLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface MessageMeta {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  headers: Record<string, string>;
}

/** Counts parked messages; a prom-client Counter with these labels fits. */
export interface DeadLetterCounter {
  inc(labels: { topic: string; consumer: string; reason_class: string }): void;
}

/** Runs before a message is parked; if it throws, the message is not parked and comes again. */
export type PoisonHook = (record: DeadLetterV1, payload: unknown) => Promise<void>;

export interface GuardDeps {
  logger: BusLogger;
  now: () => Date;
  publishDeadLetter: (record: DeadLetterV1) => Promise<void>;
  counter?: DeadLetterCounter;
}

export interface Delivery {
  meta: MessageMeta;
  value: string | null;
  /** keeps the group membership alive while the guard waits between retries */
  heartbeat: () => Promise<void>;
  /** the consumer is shutting down: stop retrying and leave the offset uncommitted */
  stopping: () => boolean;
}

/**
 * One message through the consumer's poison policy: validate against the topic schema, run the
 * handler, retry transient failures in place, park what cannot succeed. Returns normally when
 * the offset may be committed (handled or parked); throws when it must not be (parking failed,
 * or the consumer is stopping), so the message is delivered again.
 */
export class PoisonGuard<P> {
  private readonly policy: PoisonPolicy;

  constructor(
    private readonly groupId: string,
    /** the topic schema's parse: throws on a message that does not match */
    private readonly parse: (raw: unknown) => P,
    private readonly handler: (payload: P, meta: MessageMeta) => Promise<void>,
    private readonly deps: GuardDeps,
    policy: Partial<PoisonPolicy> = {},
    private readonly onPoison?: PoisonHook,
  ) {
    this.policy = { ...defaultPoisonPolicy, ...policy };
  }

  async deliver(d: Delivery): Promise<void> {
    const firstSeen = this.deps.now();
    let raw: unknown = null;
    let payload: P;
    try {
      raw = JSON.parse(d.value ?? 'null');
    } catch {
      // JSON.parse quotes the text it choked on: never let that reach the dead-letter record.
      return this.park(d.meta, null, new SyntaxError('message value is not JSON'), 'schema_invalid', 1, firstSeen);
    }
    try {
      payload = this.parse(raw);
    } catch (err) {
      return this.park(d.meta, raw, err, 'schema_invalid', 1, firstSeen);
    }
    let transient = 0;
    let unavailableSince: number | undefined;
    let lastUnavailableLog: number | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.handler(payload, d.meta);
        return;
      } catch (err) {
        const kind: ErrorKind = this.policy.classify(err);
        if (kind === 'poison') return this.park(d.meta, raw, err, 'deterministic_error', attempt, firstSeen);
        if (kind === 'unavailable') {
          unavailableSince ??= this.deps.now().getTime();
          if (this.deps.now().getTime() - unavailableSince > this.policy.maxUnavailableMs)
            return this.park(d.meta, raw, err, 'retries_exhausted', attempt, firstSeen);
        } else if (++transient > this.policy.maxTransientRetries) {
          return this.park(d.meta, raw, err, 'retries_exhausted', attempt, firstSeen);
        }
        if (d.stopping()) throw err;
        // A transient error is retried a few times and each retry is logged; an outage is retried
        // for minutes, so it is logged when it starts and then once per `unavailableLogEveryMs`.
        const at = this.deps.now().getTime();
        if (kind !== 'unavailable' || lastUnavailableLog === undefined || at - lastUnavailableLog >= this.policy.unavailableLogEveryMs) {
          if (kind === 'unavailable') lastUnavailableLog = at;
          this.deps.logger.warn(
            {
              topic: d.meta.topic,
              partition: d.meta.partition,
              offset: d.meta.offset,
              group: this.groupId,
              attempt,
              kind,
              error: errorClass(err),
              ...(kind === 'unavailable' ? { unavailable_for_ms: at - (unavailableSince ?? at) } : {}),
            },
            `${kind} consumer error; retrying in place`,
          );
        }
        await this.wait(backoffMs(this.policy, kind === 'unavailable' ? attempt : transient), d);
      }
    }
  }

  private async park(
    meta: MessageMeta,
    raw: unknown,
    err: unknown,
    reasonClass: DeadLetterReasonClass,
    attempts: number,
    firstSeen: Date,
  ): Promise<void> {
    const record: DeadLetterV1 = {
      event_id: deadLetterId(this.groupId, meta.topic, meta.partition, meta.offset),
      topic: meta.topic,
      partition: meta.partition,
      offset: meta.offset,
      key: meta.key,
      consumer_group: this.groupId,
      source_event_id: idField(raw, 'event_id'),
      action_id: idField(raw, 'action_id'),
      attempt_id: idField(raw, 'attempt_id'),
      reason_class: reasonClass,
      error_class: errorClass(err),
      reason: sanitisedReason(err),
      attempts,
      first_seen_at: firstSeen.toISOString(),
      parked_at: this.deps.now().toISOString(),
    };
    // The hook (a reconciliation case where money is involved) first: if it fails, nothing was
    // parked and the message comes again; if the publish below fails, the hook runs again and
    // must be idempotent.
    if (this.onPoison && reasonClass !== 'schema_invalid') await this.onPoison(record, raw);
    await this.deps.publishDeadLetter(record);
    this.deps.counter?.inc({ topic: meta.topic, consumer: this.groupId, reason_class: reasonClass });
    this.deps.logger.error(
      {
        topic: meta.topic,
        partition: meta.partition,
        offset: meta.offset,
        group: this.groupId,
        action_id: record.action_id,
        attempt_id: record.attempt_id,
        reason_class: reasonClass,
        error: record.error_class,
        reason: record.reason,
      },
      'message parked on the dead-letter topic',
    );
  }

  /** Sleeps in slices, heartbeating, so a long backoff does not cost the partition. */
  private async wait(ms: number, d: Delivery): Promise<void> {
    const until = Date.now() + ms;
    while (!d.stopping()) {
      const left = until - Date.now();
      if (left <= 0) return;
      await new Promise((r) => setTimeout(r, Math.min(left, 500)));
      await d.heartbeat().catch(() => undefined);
    }
  }
}

function idField(raw: unknown, field: string): string | null {
  if (raw === null || typeof raw !== 'object') return null;
  const v = (raw as Record<string, unknown>)[field];
  return typeof v === 'string' && v.length <= 200 ? v : null;
}
