import fs from 'node:fs';
import { z } from 'zod';
import { IDLE_IN_TRANSACTION_DEFAULT_MS, LONGEST_TRANSACTION_MS, STATEMENT_ANSWER_DEFAULT_MS } from '@gateway/db';
import type { KafkaSecurity, SaslMechanism } from '@gateway/messaging';

const flag = z
  .enum(['true', 'false', '1', '0', ''])
  .optional()
  .transform((v) => v === 'true' || v === '1');

/** Kafka's own default `message.max.bytes` (1 MiB + 12 bytes of record-batch overhead). */
export const KAFKA_DEFAULT_MESSAGE_MAX_BYTES = 1_048_588;

/** Fixed bytes around the client's body in a dispatch command: record batch and headers, key, envelope, the command's own fields. */
const DISPATCH_MESSAGE_OVERHEAD_BYTES = 16_384;
const DISPATCH_COMMAND_FIELDS_BYTES = 8_192;

/**
 * The largest request body that still fits one dispatch command on a broker whose
 * `message.max.bytes` is `messageMaxBytes`: the command (body + its own fields) is encrypted and
 * base64-encoded (4/3 of its size) inside an envelope. A body above it would be admitted and
 * reserved, then fail to publish; it is refused with 413 instead.
 */
export function maxBodyBytesFor(messageMaxBytes: number): number {
  return Math.floor(((messageMaxBytes - DISPATCH_MESSAGE_OVERHEAD_BYTES) * 3) / 4) - DISPATCH_COMMAND_FIELDS_BYTES;
}

export const ADMISSION_DECIDE_TIMEOUT_DEFAULT_MS = 3000;
/**
 * The dispatch queue wait above which admission starts refusing a share of new requests
 * (ADMISSION_SHED_QUEUE_MS; 0, the default, turns it off: the right value depends on how long
 * the clients wait), and how often that share is revised (ADMISSION_SHED_WINDOW_MS):
 * docs/decisions.md, "Shedding on the dispatch queue".
 */
export const ADMISSION_SHED_QUEUE_DEFAULT_MS = 0;
export const ADMISSION_SHED_WINDOW_DEFAULT_MS = 250;
/** How much of one provider answer dispatch reads (UPSTREAM_ANSWER_MAX_BYTES): 8 MiB. */
export const UPSTREAM_ANSWER_MAX_BYTES_DEFAULT = 8 * 1024 * 1024;
/** How many bytes of sealed answers one admission instance holds for Idempotency-Key retries (REPLY_CACHE_MAX_BYTES): 32 MiB. */
export const REPLY_CACHE_MAX_BYTES_DEFAULT = 32 * 1024 * 1024;
/** How long past the action's deadline dispatch keeps reading an answer for its usage (UPSTREAM_READ_AFTER_DEADLINE_MS): 2 min. */
export const UPSTREAM_READ_AFTER_DEADLINE_DEFAULT_MS = 120_000;

/** HTTP input limits from the environment. */
/**
 * Connections the kernel holds for a service before it has accepted them (GATEWAY_LISTEN_BACKLOG).
 * Node's own default is 511. libuv (since 1.45) accepts one connection per event-loop turn, so a
 * busy service drains that queue slowly: under overload it filled with connections whose clients
 * had given up while waiting in it, and each live one waited behind them (docs/decisions.md, "A
 * queue nobody sees: connections not yet accepted").
 */
export const LISTEN_BACKLOG_DEFAULT = 64;

const httpSchema = z.object({
  KAFKA_MESSAGE_MAX_BYTES: z.coerce.number().int().min(65_536).default(KAFKA_DEFAULT_MESSAGE_MAX_BYTES),
  GATEWAY_MAX_BODY_BYTES: z.coerce.number().int().min(1024).optional(),
  GATEWAY_AUTH_FAILURE_BURST: z.coerce.number().int().min(1).default(30),
  GATEWAY_AUTH_FAILURES_PER_MINUTE: z.coerce.number().positive().default(30),
  GATEWAY_TRUST_PROXY: z.string().min(1).optional(),
  GATEWAY_LISTEN_BACKLOG: z.coerce.number().int().min(1).max(65_535).default(LISTEN_BACKLOG_DEFAULT),
});

/** Environment shared by every service, validated once at start-up. */
const schema = httpSchema.extend({
  DATABASE_URL: z.string().min(1),
  KAFKA_BROKERS: z.string().min(1).default('127.0.0.1:9092'),
  GATEWAY_INSTANCE_ID: z.string().optional(),
  LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  HOST: z.string().default('127.0.0.1'),
  KAFKA_SSL: flag,
  KAFKA_SSL_CA_FILE: z.string().min(1).optional(),
  KAFKA_SASL_MECHANISM: z
    .string()
    .transform((v) => v.toLowerCase())
    .pipe(z.enum(['scram-sha-256', 'scram-sha-512']))
    .optional(),
  KAFKA_SASL_USERNAME: z.string().min(1).optional(),
  KAFKA_SASL_PASSWORD: z.string().min(1).optional(),
  KAFKA_SASL_PASSWORD_FILE: z.string().min(1).optional(),
  OUTBOX_SWEEP_IDLE_MAX_MS: z.coerce.number().int().nonnegative().optional(),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(100).default(10),
  // at most a timer's range (~24.8 days): node fires a longer setTimeout after 1 ms
  DATABASE_POOL_IDLE_MS: z.coerce.number().int().nonnegative().max(2_147_483_647).default(0),
  DATABASE_ANSWER_TIMEOUT_MS: z.coerce.number().int().min(1_000).max(2_147_483_647).default(STATEMENT_ANSWER_DEFAULT_MS),
  DATABASE_IDLE_IN_TRANSACTION_MS: z.coerce
    .number()
    .int()
    .nonnegative()
    .max(2_147_483_647)
    .refine((ms) => ms === 0 || ms > LONGEST_TRANSACTION_MS, `0 (no bound) or above the longest transaction, ${LONGEST_TRANSACTION_MS} ms`)
    .default(IDLE_IN_TRANSACTION_DEFAULT_MS),
  ADMISSION_DECIDE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(ADMISSION_DECIDE_TIMEOUT_DEFAULT_MS),
  ADMISSION_SHED_QUEUE_MS: z.coerce.number().int().min(0).max(600_000).default(ADMISSION_SHED_QUEUE_DEFAULT_MS),
  ADMISSION_SHED_WINDOW_MS: z.coerce.number().int().min(10).max(60_000).default(ADMISSION_SHED_WINDOW_DEFAULT_MS),
  UPSTREAM_ANSWER_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(64 * 1024)
    .max(256 * 1024 * 1024)
    .default(UPSTREAM_ANSWER_MAX_BYTES_DEFAULT),
  UPSTREAM_READ_AFTER_DEADLINE_MS: z.coerce.number().int().min(0).max(600_000).default(UPSTREAM_READ_AFTER_DEADLINE_DEFAULT_MS),
  REPLY_CACHE_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024)
    .max(4 * 1024 * 1024 * 1024)
    .default(REPLY_CACHE_MAX_BYTES_DEFAULT),
});

export interface ServiceConfig {
  serviceName: string;
  databaseUrl: string;
  kafkaBrokers: string[];
  instanceId: string;
  logLevel: string;
  host: string;
  /** TLS / SASL for Kafka; undefined for a plaintext broker */
  kafkaSecurity?: KafkaSecurity;
  /** the longest wait between outbox sweeps once idle (the relay's default, 30 s, when unset) */
  outboxSweepIdleMaxMs?: number;
  /** connections this process's one pg pool may open (DATABASE_POOL_MAX, default 10; docs/scaling.md, connection budget) */
  databasePoolMax?: number;
  /**
   * how long an idle pool connection stays open (DATABASE_POOL_IDLE_MS); 0, the default, keeps it
   * until it fails: each new connection is a new Postgres backend (docs/decisions.md, "A pool that keeps its connections")
   */
  databasePoolIdleMs?: number;
  /**
   * how long one statement may go unanswered before its connection is closed as dead
   * (DATABASE_ANSWER_TIMEOUT_MS, default 30000; libs/db `boundedClient`): above the longest
   * statement the service runs, below the ~15 minutes a kernel waits on a dropped flow
   */
  databaseAnswerTimeoutMs?: number;
  /**
   * how long the server lets a session of this process sit idle inside a transaction before it
   * ends it (DATABASE_IDLE_IN_TRANSACTION_MS, default 15000; 0 sends none, for PgBouncer; libs/db
   * `Database`): a process stopped inside a transaction must not hold its row locks for hours
   */
  databaseIdleInTransactionMs?: number;
  /**
   * how long admission's own work on a request (key, contract, reservation) may take before the
   * client gets 503 service_unavailable (ADMISSION_DECIDE_TIMEOUT_MS, default 3000; hand-made test
   * configs may leave it out: the default): a database that stops answering must not hold clients
   */
  admissionDecideTimeoutMs?: number;
  /**
   * admission's load shedding (ADMISSION_SHED_QUEUE_MS, default 0 = off; ADMISSION_SHED_WINDOW_MS,
   * default 250; hand-made test configs may leave it out: the defaults): while dispatch commands
   * queue longer than `targetMs`, a growing share of new requests gets 503 service_unavailable
   * before anything is reserved
   */
  admissionShed?: { targetMs: number; windowMs: number };
  /**
   * how much of one provider answer dispatch reads, a whole body or one stream event
   * (UPSTREAM_ANSWER_MAX_BYTES, default 8 MiB, 64 KiB–256 MiB; hand-made test configs may leave it
   * out: the default): past it the attempt ends without usage and the client gets 502
   */
  upstreamAnswerMaxBytes?: number;
  /**
   * how long past the action's deadline dispatch keeps reading one upstream answer for its usage
   * (UPSTREAM_READ_AFTER_DEADLINE_MS, default 120000, 0–600000): the time limits between bytes do
   * not stop an upstream that trickles, so the whole exchange ends then, usage unknown
   */
  upstreamReadAfterDeadlineMs?: number;
  /**
   * how many bytes of sealed answers admission holds for Idempotency-Key retries
   * (REPLY_CACHE_MAX_BYTES, default 32 MiB, 1 MiB–4 GiB; hand-made test configs may leave it out:
   * the default): the oldest go first, so keyed requests with large answers cannot fill the heap
   */
  replyCacheMaxBytes?: number;
  /** what HTTP clients may send (filled by loadConfig; hand-made test configs may leave it out: defaults) */
  http?: HttpInputConfig;
}

/** Limits on HTTP input, shared by every service (docs/decisions.md, "Inputs that hurt the service"). */
export interface HttpInputConfig {
  /** request bodies above this are 413 payload_too_large (default: what fits one Kafka message) */
  maxBodyBytes: number;
  /** failed authentications per source address and instance: burst, then per minute */
  authFailureBurst: number;
  authFailuresPerMinute: number;
  /** Express `trust proxy` (hop count, `loopback`, a list of addresses); null trusts no proxy */
  trustProxy: string | null;
  /** connections the kernel queues before the service accepts them (GATEWAY_LISTEN_BACKLOG, default 64) */
  listenBacklog: number;
}

export function loadConfig(serviceName: string, env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const parsed = schema.parse(env);
  return {
    kafkaSecurity: kafkaSecurity(parsed),
    outboxSweepIdleMaxMs: parsed.OUTBOX_SWEEP_IDLE_MAX_MS,
    databasePoolMax: parsed.DATABASE_POOL_MAX,
    databasePoolIdleMs: parsed.DATABASE_POOL_IDLE_MS,
    databaseAnswerTimeoutMs: parsed.DATABASE_ANSWER_TIMEOUT_MS,
    databaseIdleInTransactionMs: parsed.DATABASE_IDLE_IN_TRANSACTION_MS,
    admissionDecideTimeoutMs: parsed.ADMISSION_DECIDE_TIMEOUT_MS,
    admissionShed: { targetMs: parsed.ADMISSION_SHED_QUEUE_MS, windowMs: parsed.ADMISSION_SHED_WINDOW_MS },
    upstreamAnswerMaxBytes: parsed.UPSTREAM_ANSWER_MAX_BYTES,
    upstreamReadAfterDeadlineMs: parsed.UPSTREAM_READ_AFTER_DEADLINE_MS,
    replyCacheMaxBytes: parsed.REPLY_CACHE_MAX_BYTES,
    serviceName,
    databaseUrl: parsed.DATABASE_URL,
    kafkaBrokers: parsed.KAFKA_BROKERS.split(',')
      .map((b) => b.trim())
      .filter(Boolean),
    instanceId: parsed.GATEWAY_INSTANCE_ID ?? `${serviceName}-${process.pid}`,
    logLevel: parsed.LOG_LEVEL,
    host: parsed.HOST,
    http: httpInputFrom(parsed),
  };
}

/** The HTTP input limits alone (defaults for an empty environment). */
export function loadHttpInputConfig(env: NodeJS.ProcessEnv = process.env): HttpInputConfig {
  return httpInputFrom(httpSchema.parse(env));
}

function httpInputFrom(parsed: z.infer<typeof httpSchema>): HttpInputConfig {
  return {
    maxBodyBytes: parsed.GATEWAY_MAX_BODY_BYTES ?? maxBodyBytesFor(parsed.KAFKA_MESSAGE_MAX_BYTES),
    authFailureBurst: parsed.GATEWAY_AUTH_FAILURE_BURST,
    authFailuresPerMinute: parsed.GATEWAY_AUTH_FAILURES_PER_MINUTE,
    trustProxy: parsed.GATEWAY_TRUST_PROXY ?? null,
    listenBacklog: parsed.GATEWAY_LISTEN_BACKLOG,
  };
}

/**
 * TLS when KAFKA_SSL is set or a CA file is given; SCRAM when a mechanism is given, which then
 * needs a user and exactly one of KAFKA_SASL_PASSWORD / KAFKA_SASL_PASSWORD_FILE. Error messages
 * name the variables, never their values.
 */
function kafkaSecurity(parsed: z.infer<typeof schema>): KafkaSecurity | undefined {
  const security: KafkaSecurity = {};
  if (parsed.KAFKA_SSL || parsed.KAFKA_SSL_CA_FILE) {
    security.ssl = parsed.KAFKA_SSL_CA_FILE ? { ca: fs.readFileSync(parsed.KAFKA_SSL_CA_FILE, 'utf8') } : true;
  }
  const mechanism: SaslMechanism | undefined = parsed.KAFKA_SASL_MECHANISM;
  if (mechanism) {
    if (!parsed.KAFKA_SASL_USERNAME) throw new Error('KAFKA_SASL_MECHANISM is set: KAFKA_SASL_USERNAME is required');
    if (!parsed.KAFKA_SASL_PASSWORD === !parsed.KAFKA_SASL_PASSWORD_FILE) {
      throw new Error('KAFKA_SASL_MECHANISM is set: give exactly one of KAFKA_SASL_PASSWORD and KAFKA_SASL_PASSWORD_FILE');
    }
    const password = parsed.KAFKA_SASL_PASSWORD ?? fs.readFileSync(parsed.KAFKA_SASL_PASSWORD_FILE ?? '', 'utf8').trim();
    const sasl = { mechanism, username: parsed.KAFKA_SASL_USERNAME, password: '' };
    // Not enumerable: a config logged or serialised by mistake does not carry the password.
    Object.defineProperty(sasl, 'password', { value: password, enumerable: false });
    security.sasl = sasl;
  } else if (parsed.KAFKA_SASL_USERNAME || parsed.KAFKA_SASL_PASSWORD || parsed.KAFKA_SASL_PASSWORD_FILE) {
    throw new Error('KAFKA_SASL_USERNAME / KAFKA_SASL_PASSWORD need KAFKA_SASL_MECHANISM (scram-sha-256 or scram-sha-512)');
  }
  return security.ssl || security.sasl ? security : undefined;
}

export function portFromEnv(name: string, fallback: number, env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${name} must be a port number, got ${raw}`);
  return n;
}
