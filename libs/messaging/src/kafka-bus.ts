import { Admin, Consumer, Kafka, logLevel, Producer, IHeaders, KafkaMessage } from 'kafkajs';
import { allTopics, TopicKey, TopicPayload, Topics } from '@gateway/contracts';

export interface BusLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface BusOptions {
  brokers: string[];
  clientId: string;
  logger: BusLogger;
}

export interface RawMessage {
  key: string;
  value: string;
  headers?: Record<string, string>;
}

export interface MessageMeta {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  headers: Record<string, string>;
}

export interface SubscribeOptions {
  groupId: string;
  fromBeginning?: boolean;
  /** partitions handled in parallel; ordering still holds within a partition */
  concurrency?: number;
}

/**
 * The one place that talks kafkajs. Settings favour latency on a small cluster: short fetch
 * waits, quick group joins, idempotent producer with acks=all.
 */
export class KafkaBus {
  private readonly kafka: Kafka;
  private producer?: Producer;
  private admin?: Admin;
  private readonly consumers: Consumer[] = [];

  constructor(private readonly opts: BusOptions) {
    this.kafka = new Kafka({
      clientId: opts.clientId,
      brokers: opts.brokers,
      logLevel: logLevel.WARN,
      connectionTimeout: 3000,
      requestTimeout: 10000,
      retry: { initialRetryTime: 100, retries: 8, maxRetryTime: 3000 },
      logCreator: () => (entry) => {
        const { message, ...rest } = entry.log;
        const fields = { kafka: entry.namespace, ...rest };
        if (entry.level <= logLevel.ERROR) opts.logger.error(fields, message);
        else opts.logger.warn(fields, message);
      },
    });
  }

  async connect(): Promise<void> {
    this.producer = this.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    });
    await this.producer.connect();
  }

  /** Creates every declared topic that does not exist yet, with its partitions and retention. */
  async ensureTopics(): Promise<void> {
    const admin = await this.getAdmin();
    const existing = new Set(await admin.listTopics());
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

  /** Validates against the topic's schema, then publishes (acks=all). */
  async publish<K extends TopicKey>(
    topicKey: K,
    messages: Array<{ key: string; value: TopicPayload<K>; headers?: Record<string, string> }>,
  ): Promise<void> {
    const spec = Topics[topicKey];
    const raw = messages.map((m) => ({
      key: m.key,
      value: JSON.stringify(spec.schema.parse(m.value)),
      headers: m.headers,
    }));
    await this.publishRaw(spec.name, raw);
  }

  /** For the outbox relay, whose payloads were validated when they were written. */
  async publishRaw(topicName: string, messages: RawMessage[]): Promise<void> {
    if (!this.producer) throw new Error('KafkaBus.publish before connect()');
    await this.producer.send({ topic: topicName, acks: -1, messages });
  }

  /**
   * Runs `handler` for every valid message. A message that fails its schema is logged (ids only)
   * and skipped so it cannot block its partition; a handler error is retried by kafkajs.
   */
  async subscribe<K extends TopicKey>(
    topicKey: K,
    options: SubscribeOptions,
    handler: (payload: TopicPayload<K>, meta: MessageMeta) => Promise<void>,
  ): Promise<Consumer> {
    const spec = Topics[topicKey];
    const consumer = this.kafka.consumer({
      groupId: options.groupId,
      allowAutoTopicCreation: false,
      maxWaitTimeInMs: 100,
      minBytes: 1,
      sessionTimeout: 6000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 500,
      retry: { initialRetryTime: 100, retries: 10 },
    });
    await consumer.connect();
    await consumer.subscribe({ topic: spec.name, fromBeginning: options.fromBeginning ?? true });
    // Ready means joined AND one fetch done: only then are "latest" offsets resolved, so a
    // message published after subscribe() returns is never skipped.
    const joined = new Promise<void>((resolve) => {
      consumer.on(consumer.events.GROUP_JOIN, () => {
        const off = consumer.on(consumer.events.FETCH, () => {
          off();
          resolve();
        });
      });
    });
    await consumer.run({
      partitionsConsumedConcurrently: options.concurrency ?? 3,
      eachMessage: async ({ topic, partition, message }) => {
        const meta = toMeta(topic, partition, message);
        let payload: TopicPayload<K>;
        try {
          payload = spec.schema.parse(JSON.parse(message.value?.toString('utf8') ?? 'null')) as TopicPayload<K>;
        } catch (err) {
          this.opts.logger.error(
            { topic, partition, offset: message.offset, error: (err as Error).name },
            'skipping message that does not match its topic schema',
          );
          return;
        }
        await handler(payload, meta);
      },
    });
    await joined;
    this.consumers.push(consumer);
    return consumer;
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

  async disconnect(): Promise<void> {
    await Promise.allSettled(this.consumers.map((c) => c.disconnect()));
    await Promise.allSettled([this.producer?.disconnect(), this.admin?.disconnect()]);
  }

  private async getAdmin(): Promise<Admin> {
    if (!this.admin) {
      this.admin = this.kafka.admin();
      await this.admin.connect();
    }
    return this.admin;
  }
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
