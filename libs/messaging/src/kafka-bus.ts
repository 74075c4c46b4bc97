import {
  Admin,
  ConfigResourceTypes,
  Consumer,
  ConsumerConfig,
  ConsumerRunConfig,
  EachBatchPayload,
  EachMessagePayload,
  IHeaders,
  Kafka,
  KafkaConfig,
  KafkaMessage,
  LogEntry,
  logLevel,
  Partitioners,
  Producer,
} from 'kafkajs';
import { allTopics, TopicKey, TopicPayload, Topics } from '@gateway/contracts';
import { addressedElsewhere, partitionsOnly } from './addressed-consumer';
import { BatchGuard, BatchHandler } from './batch-guard';
import { BusLogger, DeadLetterCounter, Delivery, MessageMeta, PoisonGuard, PoisonHook } from './poison-guard';
import { quietKafkajsIdleTimers } from './kafkajs-idle-timers';
import { keepingMembership } from './keeping-membership';
import { OffsetCommitter } from './offset-committer';
import { PoisonPolicy } from './poison-policy';
import { ProduceCoalescer, RawMessage } from './produce-coalescer';

quietKafkajsIdleTimers();

export type { BusLogger, MessageMeta };

/** SCRAM mechanisms only: PLAIN would put the password on the wire as is. */
export type SaslMechanism = 'scram-sha-256' | 'scram-sha-512';

/**
 * How the bus reaches a secured cluster. `ssl: true` uses the system trust store; `ca` adds a
 * PEM bundle (a private CA). `sasl.password` must never reach a log: configs built by
 * service-kit hold it as a non-enumerable property, which JSON and pino serialisers skip.
 */
export interface KafkaSecurity {
  ssl?: boolean | { ca?: string };
  sasl?: { mechanism: SaslMechanism; username: string; password: string };
}

export interface BusOptions {
  brokers: string[];
  clientId: string;
  logger: BusLogger;
  /** TLS and SASL/SCRAM; omitted for a plaintext local broker */
  security?: KafkaSecurity;
  /** the injected clock: dead-letter timestamps and consumer liveness */
  now?: () => Date;
  /** counts messages parked on the dead-letter topic */
  deadLetterCounter?: DeadLetterCounter;
  /** a consumer without a fetch or heartbeat for this long is reported as not consuming */
  consumerStallMs?: number;
  /** kafkajs retry settings for connects and requests (tests shorten them) */
  retry?: { initialRetryTime?: number; retries?: number; maxRetryTime?: number };
  /** backoff between attempts to re-create a consumer that crashed for good */
  restartBackoff?: { initialMs: number; maxMs: number };
  /**
   * counts the requests this bus's producer and consumers send to the broker, by client and
   * kafkajs api name (Produce, Fetch, OffsetCommit, Heartbeat…): what each action costs in
   * broker round trips (kafkajs `*.network.request` instrumentation events)
   */
  requestCounter?: KafkaRequestCounter;
  /** publishes issued together share a produce request up to this many bytes of keys and values (default 512 KiB) */
  maxProduceRequestBytes?: number;
  /** every consumer's poison policy, under what a subscription sets itself (default `defaultPoisonPolicy`) */
  poison?: Partial<PoisonPolicy>;
}

export interface KafkaRequestCounter {
  inc(labels: { client: 'producer' | 'consumer'; api: string }): void;
}

export interface SubscribeOptions {
  groupId: string;
  fromBeginning?: boolean;
  /** partitions handled in parallel; ordering still holds within a partition */
  concurrency?: number;
  /** how handler errors are told apart and retried (defaults: `defaultPoisonPolicy`) */
  poison?: Partial<PoisonPolicy>;
  /** runs before a message that fails for good is parked (e.g. to open a reconciliation case) */
  onPoison?: PoisonHook;
  /**
   * Reads only the partition(s) of an addressed topic that carry this receiver's messages, and
   * skips, before parsing, any there whose recipient header names another instance (two ids on
   * one partition). Only for a group of one instance (`partitionsOnly`).
   */
  recipient?: { id: string; partitions: number[]; header: string };
  /**
   * Commit offsets at most this often instead of after every batch, for a group whose offsets
   * matter to this process alone, or whose handler is idempotent (`OffsetCommitter`).
   */
  commitIntervalMs?: number;
  /**
   * How the broker answers a fetch: at once when a record is there (the default, minBytes 1,
   * for consumers on the request path), or only once `minBytes` have gathered or `maxWaitMs`
   * has passed, so a consumer off the request path takes larger batches at a moderate rate.
   */
  fetch?: FetchOptions;
}

export interface FetchOptions {
  minBytes: number;
  maxWaitMs: number;
}

/** Batch consumption (`subscribeBatch`): at most `maxSize` messages of one partition per handler call. */
export interface BatchOptions {
  maxSize: number;
}

export type ConsumerState = 'starting' | 'consuming' | 'restarting' | 'stopped';

export interface ConsumerStatus {
  groupId: string;
  topic: string;
  state: ConsumerState;
  /** joined, fetched, and fetched or heartbeated within the stall window */
  consuming: boolean;
  lastActivityAt: string | null;
  restarts: number;
  lastError: string | null;
}

export interface ConsumerHandle {
  status(): ConsumerStatus;
  stop(): Promise<void>;
}

/**
 * The one place that talks kafkajs. Settings favour latency on a small cluster: short fetch
 * waits, quick group joins, idempotent producer with acks=all.
 */
export class KafkaBus {
  private readonly kafka: Kafka;
  private producer?: Promise<Producer>;
  private readonly produce: ProduceCoalescer;
  private admin?: Admin;
  private readonly consumers: ManagedConsumer[] = [];
  private readonly now: () => Date;

  constructor(private readonly opts: BusOptions) {
    this.now = opts.now ?? (() => new Date());
    this.produce = new ProduceCoalescer({
      producer: () => this.getProducer(),
      replaceProducer: () => this.replaceProducer(),
      maxRequestBytes: opts.maxProduceRequestBytes,
    });
    this.kafka = new Kafka({
      clientId: opts.clientId,
      brokers: opts.brokers,
      ...kafkaSecurityConfig(opts.security),
      logLevel: logLevel.WARN,
      connectionTimeout: 3000,
      requestTimeout: 10000,
      retry: { initialRetryTime: 100, retries: 8, maxRetryTime: 3000, ...opts.retry },
      logCreator: () => kafkajsLogLine(opts.logger),
    });
  }

  /** Connects the producer; `publish` also connects on first use (and again after a failed connect). */
  async connect(): Promise<void> {
    await this.getProducer();
  }

  private getProducer(): Promise<Producer> {
    this.producer ??= (async () => {
      // The partitioner kafkajs 2 uses by default (Java's murmur2), named so that it does not warn
      // about the change from kafkajs 1 every time a producer is made.
      const producer = this.kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
      const counter = this.opts.requestCounter;
      if (counter) producer.on(producer.events.REQUEST, (e) => counter.inc({ client: 'producer', api: e.payload.apiName }));
      await producer.connect();
      return producer;
    })().catch((err: unknown) => {
      this.producer = undefined;
      throw err;
    });
    return this.producer;
  }

  /** After a failed send the producer's idempotent sequences are unknown: the next send uses a new producer. */
  private replaceProducer(): void {
    const old = this.producer;
    this.producer = undefined;
    void old?.then((p) => p.disconnect()).catch(() => undefined);
  }

  /**
   * Creates every declared topic that does not exist yet, with its partitions and retention, and
   * gives an existing `addressed` topic its declared partitions if it has fewer: senders write to
   * `recipientPartition(id, declared)`, which must exist.
   */
  async ensureTopics(): Promise<void> {
    const admin = await this.getAdmin();
    const existing = new Set(await admin.listTopics());
    const addressed = allTopics().filter((t) => t.addressed && existing.has(t.name));
    if (addressed.length > 0) {
      const { topics } = await admin.fetchTopicMetadata({ topics: addressed.map((t) => t.name) });
      const short = addressed.filter((t) => (topics.find((m) => m.name === t.name)?.partitions.length ?? 0) < t.partitions);
      if (short.length > 0) {
        await admin.createPartitions({ topicPartitions: short.map((t) => ({ topic: t.name, count: t.partitions })) });
      }
    }
    const missing = allTopics().filter((t) => !existing.has(t.name));
    if (missing.length === 0) return;
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((t) => ({
        topic: t.name,
        numPartitions: t.partitions,
        replicationFactor: 1,
        configEntries: [{ name: 'retention.ms', value: String(t.retentionMs) }],
      })),
    });
  }

  /** The largest record batch the broker accepts on `topicName` (its `max.message.bytes`). */
  async maxMessageBytes(topicName: string): Promise<number> {
    const admin = await this.getAdmin();
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topicName, configNames: ['max.message.bytes'] }],
    });
    const value = resources[0]?.configEntries.find((e) => e.configName === 'max.message.bytes')?.configValue;
    if (!value) throw new Error(`broker did not report max.message.bytes for ${topicName}`);
    return Number(value);
  }

  /**
   * Records retained on `topicName`, summed over its partitions (high watermark minus log start):
   * what was published, on a topic no retention has trimmed yet and no transaction wrote to.
   */
  async retainedRecords(topicName: string): Promise<number> {
    const admin = await this.getAdmin();
    const offsets = await admin.fetchTopicOffsets(topicName);
    return offsets.reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
  }

  /** Validates against the topic's schema, then publishes (acks=all). */
  async publish<K extends TopicKey>(
    topicKey: K,
    messages: Array<{ key: string; value: TopicPayload<K>; headers?: Record<string, string>; partition?: number }>,
  ): Promise<void> {
    const spec = Topics[topicKey];
    const raw = messages.map((m) => ({
      key: m.key,
      value: JSON.stringify(spec.schema.parse(m.value)),
      headers: m.headers,
      partition: m.partition,
    }));
    await this.publishRaw(spec.name, raw);
  }

  /**
   * For the outbox relay, whose payloads were validated when they were written. Sends issued
   * together share produce requests (`ProduceCoalescer`). A refusal of the messages themselves
   * (too large, rejected record) is thrown as `PermanentPublishError`: sending them again cannot
   * succeed. Anything else (broker down, leader moving, timeouts) is thrown as is and is worth
   * retrying.
   */
  publishRaw(topicName: string, messages: RawMessage[]): Promise<void> {
    return this.produce.send(topicName, messages);
  }

  /**
   * Runs `handler` for every message that matches the topic's schema, under the poison policy:
   * transient failures retry in place, messages that cannot succeed (schema-invalid included) are
   * parked on the dead-letter topic, so no message blocks its partition. Resolves once the
   * consumer has joined its group and fetched (so "latest" offsets are resolved); a consumer that
   * crashes later is re-created with backoff, and `consumerStatus()` says whether it consumes.
   */
  async subscribe<K extends TopicKey>(
    topicKey: K,
    options: SubscribeOptions,
    handler: (payload: TopicPayload<K>, meta: MessageMeta) => Promise<void>,
  ): Promise<ConsumerHandle> {
    const guard = this.poisonGuard(topicKey, options, handler);
    const forOthers = options.recipient ? addressedElsewhere(options.recipient) : () => false;
    return this.run(Topics[topicKey].name, options, (stopping) => ({
      eachMessage: async (payload) => {
        if (forOthers(payload.message)) return;
        await keepingMembership(payload.heartbeat, () =>
          guard.deliver(delivery(payload.topic, payload.partition, payload.message, payload.heartbeat, stopping)),
        );
      },
    }));
  }

  /**
   * As `subscribe`, but the handler takes up to `batch.maxSize` messages of one partition at a
   * time (kafkajs `eachBatch`), so it can settle them in one transaction. A batch's offsets are
   * resolved and committed only after the handler returns; a failed batch is handled one message
   * at a time under the poison policy (`BatchGuard`), the handler seeing a batch of one.
   */
  async subscribeBatch<K extends TopicKey>(
    topicKey: K,
    options: SubscribeOptions & { batch: BatchOptions },
    handler: BatchHandler<TopicPayload<K>>,
  ): Promise<ConsumerHandle> {
    // Skipping others' messages by header happens per message (`subscribe`); not built for batches.
    if (options.recipient) throw new Error('an addressed consumer takes one message at a time: use subscribe');
    const spec = Topics[topicKey];
    const guard = this.poisonGuard(topicKey, options, (payload, meta) => handler([{ payload, meta }]));
    const batches = new BatchGuard(guard, (raw) => spec.schema.parse(raw) as TopicPayload<K>, handler, this.opts.logger);
    const maxSize = Math.max(1, options.batch.maxSize);
    return this.run(spec.name, options, (stopping) => ({
      eachBatchAutoResolve: false,
      eachBatch: async (p: EachBatchPayload) => {
        const { topic, partition, messages } = p.batch;
        for (let i = 0; i < messages.length; i += maxSize) {
          if (!p.isRunning() || p.isStale() || stopping()) return;
          const chunk = messages.slice(i, i + maxSize);
          // a batch transaction can outlast the session timeout on a busy box
          await keepingMembership(p.heartbeat, () =>
            batches.deliver(chunk.map((m) => delivery(topic, partition, m, p.heartbeat, stopping))),
          );
          p.resolveOffset(chunk[chunk.length - 1].offset);
          await p.commitOffsetsIfNecessary();
          await p.heartbeat();
        }
      },
    }));
  }

  private poisonGuard<K extends TopicKey>(
    topicKey: K,
    options: SubscribeOptions,
    handler: (payload: TopicPayload<K>, meta: MessageMeta) => Promise<void>,
  ): PoisonGuard<TopicPayload<K>> {
    const spec = Topics[topicKey];
    return new PoisonGuard(
      options.groupId,
      (raw) => spec.schema.parse(raw) as TopicPayload<K>,
      handler,
      {
        logger: this.opts.logger,
        now: this.now,
        publishDeadLetter: (record) => this.publish('deadLetters', [{ key: record.consumer_group, value: record }]),
        counter: this.opts.deadLetterCounter,
      },
      { ...this.opts.poison, ...options.poison },
      options.onPoison,
    );
  }

  private async run(topicName: string, options: SubscribeOptions, runner: Runner): Promise<ConsumerHandle> {
    const managed = new ManagedConsumer(this.kafka, topicName, options, runner, {
      logger: this.opts.logger,
      now: this.now,
      stallMs: this.opts.consumerStallMs ?? 15_000,
      backoff: this.opts.restartBackoff ?? { initialMs: 500, maxMs: 15_000 },
      requestCounter: this.opts.requestCounter,
    });
    this.consumers.push(managed);
    try {
      await managed.start();
    } catch (err) {
      await managed.stop();
      this.consumers.splice(this.consumers.indexOf(managed), 1);
      throw err;
    }
    return managed;
  }

  /** Every consumer this bus runs, and whether it is consuming (readiness reports these). */
  consumerStatus(): ConsumerStatus[] {
    return this.consumers.map((c) => c.status());
  }

  async healthy(): Promise<boolean> {
    try {
      const admin = await this.getAdmin();
      const cluster = await admin.describeCluster();
      return cluster.brokers.length > 0;
    } catch {
      return false;
    }
  }

  /** Stops every consumer (their handlers finish; no new message is taken). */
  async stopConsumers(): Promise<void> {
    await Promise.allSettled(this.consumers.map((c) => c.stop()));
  }

  async disconnect(): Promise<void> {
    await this.stopConsumers();
    await Promise.allSettled([this.producer?.then((p) => p.disconnect()), this.admin?.disconnect()]);
  }

  private async getAdmin(): Promise<Admin> {
    if (!this.admin) {
      this.admin = this.kafka.admin();
      await this.admin.connect();
    }
    return this.admin;
  }
}

/** The handler half of kafkajs' run config; `stopping` says the consumer is shutting down. */
type Runner = (stopping: () => boolean) => Pick<ConsumerRunConfig, 'eachMessage' | 'eachBatch' | 'eachBatchAutoResolve'>;

interface ManagedDeps {
  logger: BusLogger;
  now: () => Date;
  stallMs: number;
  backoff: { initialMs: number; maxMs: number };
  requestCounter?: KafkaRequestCounter;
}

/**
 * One kafkajs consumer that stays alive. kafkajs restarts a consumer itself after retriable
 * errors, but a non-retriable one (e.g. "Failed to find group coordinator" after a broker
 * restart) crashes it for good and leaves its group empty; then this re-creates the consumer,
 * with backoff, until it runs again. Its state and last fetch/heartbeat feed readiness.
 */
class ManagedConsumer implements ConsumerHandle {
  private consumer?: Consumer;
  private state: ConsumerState = 'starting';
  private stopped = false;
  private recovering = false;
  private awaitingFetch = false;
  private lastActivityAt: Date | null = null;
  private restarts = 0;
  private lastError: string | null = null;
  private onReady: Array<() => void> = [];
  private wake?: () => void;
  private committer?: OffsetCommitter;

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
    private readonly options: SubscribeOptions,
    private readonly runner: Runner,
    private readonly deps: ManagedDeps,
  ) {}

  /** First start: failures propagate (the service does not come up without its consumers). */
  async start(): Promise<void> {
    const ready = new Promise<void>((resolve) => this.onReady.push(resolve));
    await this.launch();
    await ready;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.state = 'stopped';
    this.wake?.();
    const c = this.consumer;
    this.consumer = undefined;
    await this.committer?.flush();
    await c?.disconnect().catch(() => undefined);
  }

  status(): ConsumerStatus {
    const now = this.deps.now().getTime();
    const fresh = this.lastActivityAt !== null && now - this.lastActivityAt.getTime() <= this.deps.stallMs;
    return {
      groupId: this.options.groupId,
      topic: this.topic,
      state: this.state,
      consuming: this.state === 'consuming' && fresh,
      lastActivityAt: this.lastActivityAt?.toISOString() ?? null,
      restarts: this.restarts,
      lastError: this.lastError,
    };
  }

  private async launch(): Promise<void> {
    const config: ConsumerConfig = {
      groupId: this.options.groupId,
      allowAutoTopicCreation: false,
      // An empty fetch waits up to 1 s on the broker; a record ends the wait at once (minBytes 1),
      // so this costs no latency, only how often an idle consumer asks (issue 12: idle cost).
      maxWaitTimeInMs: this.options.fetch?.maxWaitMs ?? 1000,
      minBytes: this.options.fetch?.minBytes ?? 1,
      // A dead consumer is noticed after 6 s; a heartbeat every 2 s leaves two to spare.
      sessionTimeout: 6000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 2000,
      retry: { initialRetryTime: 100, retries: 10 },
    };
    const only = this.options.recipient?.partitions;
    if (only) config.partitionAssigners = [partitionsOnly(only)];
    const consumer = this.kafka.consumer(config);
    this.consumer = consumer;
    this.state = 'starting';
    const mine = () => this.consumer === consumer && !this.stopped;
    const run = this.runner(() => this.stopped || this.consumer !== consumer);
    const each = run.eachMessage;
    const batch = run.eachBatch;
    const interval = this.options.commitIntervalMs;
    const committer =
      interval !== undefined && (each || batch)
        ? new OffsetCommitter(
            interval,
            (offsets) => consumer.commitOffsets(offsets),
            (err) => this.deps.logger.warn({ group: this.options.groupId, topic: this.topic, error: err.message }, 'offset commit failed'),
          )
        : undefined;
    this.committer = committer;
    consumer.on(consumer.events.GROUP_JOIN, (event) => {
      if (!mine()) return;
      this.awaitingFetch = true;
      committer?.retain(Object.entries(event.payload.memberAssignment).map(([topic, partitions]) => ({ topic, partitions })));
    });
    // Ready means joined AND one fetch done: only then are "latest" offsets resolved, so a
    // message published after subscribe() returns is never skipped.
    consumer.on(consumer.events.FETCH, () => {
      if (!mine()) return;
      this.lastActivityAt = this.deps.now();
      if (!this.awaitingFetch) return;
      this.awaitingFetch = false;
      this.state = 'consuming';
      for (const resolve of this.onReady.splice(0)) resolve();
    });
    const counter = this.deps.requestCounter;
    if (counter) consumer.on(consumer.events.REQUEST, (e) => counter.inc({ client: 'consumer', api: e.payload.apiName }));
    consumer.on(consumer.events.HEARTBEAT, () => {
      if (mine()) this.lastActivityAt = this.deps.now();
    });
    consumer.on(consumer.events.CRASH, (event) => {
      if (!mine()) return;
      const { error, restart } = event.payload;
      this.state = 'restarting';
      this.lastError = error.name;
      this.deps.logger.error(
        { group: this.options.groupId, topic: this.topic, error: error.name, message: error.message, restart },
        'consumer crashed',
      );
      if (!restart) void this.recover();
    });
    await consumer.connect();
    await consumer.subscribe({ topic: this.topic, fromBeginning: this.options.fromBeginning ?? true });
    await consumer.run({
      partitionsConsumedConcurrently: this.options.concurrency ?? 3,
      ...run,
      ...(committer && each
        ? {
            autoCommit: false,
            eachMessage: async (p: EachMessagePayload) => {
              await each(p);
              committer.handled(p.topic, p.partition, p.message.offset);
            },
          }
        : {}),
      ...(committer && batch
        ? {
            autoCommit: false,
            // The handler resolves what it handled, then asks for a commit: the committer takes it.
            eachBatch: async (p: EachBatchPayload) => {
              let resolved: string | undefined;
              await batch({
                ...p,
                resolveOffset: (offset: string) => {
                  resolved = offset;
                  p.resolveOffset(offset);
                },
                commitOffsetsIfNecessary: async () => {
                  if (resolved !== undefined) committer.handled(p.batch.topic, p.batch.partition, resolved);
                },
              });
            },
          }
        : {}),
    });
    // stop() during a re-creation saw no consumer yet: take this one down too.
    if (this.stopped) await consumer.disconnect().catch(() => undefined);
  }

  /** Re-creates the consumer until it runs again (or the bus stops). */
  private async recover(): Promise<void> {
    if (this.recovering) return;
    this.recovering = true;
    try {
      for (let attempt = 1; !this.stopped; attempt++) {
        const old = this.consumer;
        this.consumer = undefined;
        await this.committer?.flush();
        await old?.disconnect().catch(() => undefined);
        await this.sleep(Math.min(this.deps.backoff.maxMs, this.deps.backoff.initialMs * 2 ** (attempt - 1)));
        if (this.stopped) return;
        try {
          this.restarts += 1;
          this.deps.logger.warn({ group: this.options.groupId, topic: this.topic, attempt }, 're-creating crashed consumer');
          await this.launch();
          return;
        } catch (err) {
          this.state = 'restarting';
          this.lastError = (err as Error).name;
        }
      }
    } finally {
      this.recovering = false;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      timer.unref();
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

function kafkaSecurityConfig(security: KafkaSecurity | undefined): Pick<KafkaConfig, 'ssl' | 'sasl'> {
  if (!security) return {};
  const out: Pick<KafkaConfig, 'ssl' | 'sasl'> = {};
  if (security.ssl) out.ssl = security.ssl === true ? true : { ca: security.ssl.ca ? [security.ssl.ca] : undefined };
  if (security.sasl) {
    const { mechanism, username, password } = security.sasl;
    out.sasl = mechanism === 'scram-sha-256' ? { mechanism, username, password } : { mechanism, username, password };
  }
  return out;
}

function delivery(
  topic: string,
  partition: number,
  message: KafkaMessage,
  heartbeat: () => Promise<void>,
  stopping: () => boolean,
): Delivery {
  return { meta: toMeta(topic, partition, message), value: message.value?.toString('utf8') ?? null, heartbeat, stopping };
}

function toMeta(topic: string, partition: number, message: KafkaMessage): MessageMeta {
  return {
    topic,
    partition,
    offset: message.offset,
    key: message.key?.toString('utf8') ?? null,
    headers: headersToStrings(message.headers),
  };
}

function headersToStrings(headers: IHeaders | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers ?? {})) {
    if (v !== undefined) out[k] = Array.isArray(v) ? String(v[0]) : String(v);
  }
  return out;
}

/** kafkajs's own warning for an idempotent producer whose retries are limited (see kafkajsLogLine). */
const LIMITED_RETRIES_WARNING = 'Limiting retries for the idempotent producer may invalidate EoS guarantees';

/**
 * kafkajs's log lines into the service's log: errors as errors, the rest as warnings (kafkajs logs
 * at WARN and above here). One exception: the warning kafkajs writes for every idempotent producer
 * whose retries are limited is the design, not a fault. The retries are limited on purpose, and a
 * send that fails after them replaces the producer (`replaceProducer`), so the next one starts with
 * new sequences; the warning, written again at each start and after each broker outage, goes to info.
 */
export function kafkajsLogLine(logger: BusLogger): (entry: LogEntry) => void {
  return (entry) => {
    const { message, ...rest } = entry.log;
    const fields = { kafka: entry.namespace, ...rest };
    if (entry.level <= logLevel.ERROR) logger.error(fields, message);
    else if (message === LIMITED_RETRIES_WARNING) logger.info(fields, message);
    else logger.warn(fields, message);
  };
}
