import { applyDecorators, ArgumentsHost, Catch, Controller, RpcExceptionFilter, UseFilters } from '@nestjs/common';
import { BaseRpcContext, CustomTransportStrategy, MessageHandler, Server } from '@nestjs/microservices';
import { isObservable, lastValueFrom, Observable, throwError } from 'rxjs';
import { addressTo, allTopics, DeadLetterV1, RECIPIENT_HEADER, TopicKey, Topics } from '@gateway/contracts';
import { BatchOptions, ConsumerHandle, FetchOptions, KafkaBus, SubscribeOptions } from '../kafka-bus';
import { MessageMeta } from '../poison-guard';
import { PoisonPolicy } from '../poison-policy';

/**
 * `@nestjs/microservices` over our `KafkaBus`: consumers are `@EventPattern(Topics.x.name, extras)`
 * handlers in `@BusConsumer()` controllers, and this strategy subscribes each pattern through the
 * bus, so schema validation, the poison policy, self-recovery and readiness are the bus's. It is
 * the idiomatic Nest surface; kafkajs stays behind `KafkaBus`.
 */

/** What a consumer declares next to its pattern (the `extras` of `@EventPattern`). */
export interface ConsumerExtras {
  /** consumer group; with `perInstance` a unique suffix makes it a group of one instance */
  group: string;
  perInstance?: boolean;
  /**
   * The topic is `addressed` (libs/contracts): read only this instance's partition of it and skip,
   * unparsed, what is addressed to another instance there. Needs `perInstance`.
   */
  addressed?: boolean;
  fromBeginning?: boolean;
  concurrency?: number;
  /**
   * Commit offsets at most this often (default: `PER_INSTANCE_COMMIT_INTERVAL_MS` for
   * `perInstance` groups, after every batch otherwise). Only for a handler that is idempotent: a
   * rebalance or a crash hands up to this much of what it handled to a member again.
   */
  commitIntervalMs?: number;
  /** fetch settings for a consumer off the request path (`SubscribeOptions.fetch`) */
  fetch?: FetchOptions;
  poison?: Partial<PoisonPolicy>;
  /**
   * Batch consumption: the handler's payload is an array of up to `maxSize` events of one
   * partition (its context carries the last one's meta), and a failed batch comes again one event
   * at a time, so the handler must treat a batch of one as the single-event case.
   */
  batch?: BatchOptions;
}

/** A consumer's batch size from the environment (read when the consumer class loads), else `fallback`. */
export function batchMaxSize(envName: string, fallback: number, env: NodeJS.ProcessEnv = process.env): number {
  return consumerSetting(envName, fallback, 1, env);
}

/** An integer consumer setting from the environment (read when the consumer class loads), at least `min`. */
export function consumerSetting(envName: string, fallback: number, min: number, env: NodeJS.ProcessEnv = process.env): number {
  const n = Number(env[envName] ?? fallback);
  if (!Number.isInteger(n) || n < min) throw new Error(`${envName} must be an integer of at least ${min}`);
  return n;
}

/**
 * The pattern of a topic's poison hook: `@EventPattern(poisonPattern(Topics.x.name))` runs with
 * the dead-letter record (and the raw payload as context) before a message of that topic is
 * parked; a failure leaves the message unparked, to be delivered again.
 */
export function poisonPattern(topicName: string): string {
  return `${topicName}#poison`;
}

/** The message's place in the log, for handlers that want it (`@Ctx() ctx: BusContext`). */
export class BusContext extends BaseRpcContext<[MessageMeta, unknown]> {
  get meta(): MessageMeta {
    return this.args[0];
  }
  /** for poison hooks: the raw payload that was parked (may not match its schema) */
  get raw(): unknown {
    return this.args[1];
  }
}

/**
 * Nest turns handler errors into a generic RPC error by default; the poison policy needs the
 * error itself (its class decides retry or park), so consumers hand it back unchanged.
 */
@Catch()
export class RethrowToBus implements RpcExceptionFilter<unknown> {
  catch(exception: unknown, _host: ArgumentsHost): Observable<never> {
    return throwError(() => exception);
  }
}

/** A controller of bus consumers: `@Controller()` whose handler errors reach the poison policy. */
export const BusConsumer = () => applyDecorators(Controller(), UseFilters(RethrowToBus));

/** How often a per-instance group commits its offsets (every batch otherwise). */
export const PER_INSTANCE_COMMIT_INTERVAL_MS = 1000;

export interface BusTransportOptions {
  /** makes `perInstance` groups unique to this process */
  instanceSuffix: () => string;
  /** this instance's id: the recipient of `addressed` topics' messages */
  instanceId: string;
}

/** What the transport needs of the bus (narrow, so a spec can fake it). */
export type BusSubscriber = Pick<KafkaBus, 'subscribe' | 'subscribeBatch'>;

export class BusTransport extends Server implements CustomTransportStrategy {
  private readonly handles: ConsumerHandle[] = [];

  constructor(
    private readonly bus: BusSubscriber,
    private readonly opts: BusTransportOptions,
  ) {
    super();
  }

  /** Subscribes every pattern; calls back once all consumers have joined and fetched. */
  listen(callback: (err?: unknown) => void): void {
    this.subscribeAll().then(
      () => callback(),
      (err: unknown) => callback(err),
    );
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.handles.splice(0).map((h) => h.stop()));
  }

  on(): never {
    throw new Error('BusTransport has no events to listen to; see KafkaBus.consumerStatus()');
  }

  unwrap<T>(): T {
    return this.bus as T;
  }

  private async subscribeAll(): Promise<void> {
    const byName = new Map(Object.entries(Topics).map(([key, spec]) => [spec.name, key as TopicKey]));
    const poisonHooks = new Set(allTopics().map((t) => poisonPattern(t.name)));
    const subscriptions: Array<Promise<ConsumerHandle>> = [];
    for (const [pattern, handler] of this.messageHandlers) {
      if (poisonHooks.has(pattern)) continue;
      const topicKey = byName.get(pattern);
      if (!topicKey) throw new Error(`@EventPattern(${pattern}) is not a topic declared in libs/contracts`);
      const extras = handler.extras as ConsumerExtras | undefined;
      if (!extras?.group) throw new Error(`@EventPattern(${pattern}) needs { group } in its extras`);
      if (extras.addressed && !extras.perInstance) throw new Error(`@EventPattern(${pattern}) is addressed: it needs perInstance`);
      const hook = this.messageHandlers.get(poisonPattern(pattern));
      const options: SubscribeOptions = {
        groupId: extras.perInstance ? `${extras.group}-${this.opts.instanceSuffix()}` : extras.group,
        fromBeginning: extras.fromBeginning,
        concurrency: extras.concurrency,
        poison: extras.poison,
        // A group of one process: its offsets are only read again by this process (OffsetCommitter).
        commitIntervalMs: extras.commitIntervalMs ?? (extras.perInstance ? PER_INSTANCE_COMMIT_INTERVAL_MS : undefined),
        fetch: extras.fetch,
        onPoison: hook ? (record: DeadLetterV1, raw: unknown) => invoke(hook, record, new BusContext([metaOf(record), raw])) : undefined,
        recipient: extras.addressed ? recipientOf(topicKey, this.opts.instanceId) : undefined,
      };
      const batch = extras.batch;
      subscriptions.push(
        batch
          ? this.bus.subscribeBatch(topicKey, { ...options, batch }, (items) =>
              invoke(
                handler,
                items.map((i) => i.payload),
                new BusContext([items[items.length - 1].meta, null]),
              ),
            )
          : this.bus.subscribe(topicKey, options, (payload, meta) => invoke(handler, payload, new BusContext([meta, null]))),
      );
    }
    const settled = await Promise.allSettled(subscriptions);
    for (const s of settled) if (s.status === 'fulfilled') this.handles.push(s.value);
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

function recipientOf(topicKey: TopicKey, instanceId: string): SubscribeOptions['recipient'] {
  const { partition } = addressTo(topicKey, instanceId);
  return { id: instanceId, partitions: [partition], header: RECIPIENT_HEADER };
}

/** Runs a Nest handler (which may answer with a promise, an observable or both) to completion. */
async function invoke(handler: MessageHandler, data: unknown, ctx: BusContext): Promise<void> {
  const out: unknown = await handler(data, ctx);
  if (isObservable(out)) await lastValueFrom(out, { defaultValue: undefined });
}

function metaOf(record: DeadLetterV1): MessageMeta {
  return { topic: record.topic, partition: record.partition, offset: record.offset, key: record.key, headers: {} };
}
