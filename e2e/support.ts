import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ApiError, GoogleGenAI } from '@google/genai';
import { ApiError as ApiErrorNext, GoogleGenAI as GoogleGenAINext } from '@google/genai-next';
import { Kafka, logLevel } from 'kafkajs';
import OpenAI, { APIError } from 'openai';
import OpenAINext, { APIError as APIErrorNext } from 'openai-next';
import { Topics } from '@gateway/contracts';
import { Database } from '@gateway/db';
import { eventually, Seeder } from '@gateway/testing';

/** Everything an e2e test needs to reach the stack that `npm test` started. */
export const stack = {
  admission: required('E2E_ADMISSION_URL'),
  policy: process.env.E2E_POLICY_URL ?? '',
  providerSim: required('E2E_PROVIDER_SIM_URL'),
  /** the stack's (first) dispatch instance, for its /metrics */
  dispatch: `http://127.0.0.1:${process.env.DISPATCH_PORT ?? 13002}`,
  logDir: required('E2E_LOG_DIR'),
  databaseUrl: required('DATABASE_URL'),
  brokers: required('KAFKA_BROKERS').split(','),
};

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run e2e tests through \`npm test\` (scripts/test.mjs starts the stack)`);
  return v;
}

export const uid = () => randomUUID().slice(0, 8);

/** A Prometheus counter's value at `url`, summed over its series that carry `labels` (every series also has `service`). */
export async function counter(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(url)).text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.includes(w)))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/**
 * The SDK majors the e2e tier drives: `current` is what devDependencies `openai` and
 * `@google/genai` install (every suite), `next` the newest majors installed beside them as npm
 * aliases `openai-next` and `@google/genai-next` (e2e/sdk-compat.e2e-spec.ts runs with both).
 */
export type SdkMajor = 'current' | 'next';
export const SDK_MAJORS: readonly SdkMajor[] = ['current', 'next'];

const PACKAGES: Record<SdkMajor, { openai: string; genai: string }> = {
  current: { openai: 'openai', genai: '@google/genai' },
  next: { openai: 'openai-next', genai: '@google/genai-next' },
};

/** `openai@6.49.0`, `@google/genai@3.3.0`: what a major resolves to (the packages do not export package.json). */
export function sdkVersions(major: SdkMajor): { openai: string; genai: string } {
  const version = (pkg: string) =>
    JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'node_modules', pkg, 'package.json'), 'utf8')) as {
      name: string;
      version: string;
    };
  const o = version(PACKAGES[major].openai);
  const g = version(PACKAGES[major].genai);
  return { openai: `${o.name}@${o.version}`, genai: `${g.name}@${g.version}` };
}

/**
 * What the suites use of an OpenAI client, met by every tested major. The majors' classes are
 * declared apart (private members, widened enums), so neither is assignable to the other; the
 * shapes below are the part of the public API the gateway must keep working.
 */
type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };
type ChatBody = {
  model: string;
  messages: Array<{ role: 'user'; content: string }>;
  n?: number;
  max_tokens?: number;
  stream_options?: { include_usage?: boolean };
};
type RequestOpts = { headers?: Record<string, string>; maxRetries?: number };
interface WithResponse<T> extends PromiseLike<T> {
  withResponse(): Promise<{ data: T; response: Response }>;
}
export interface ChatCompletionLike {
  id: string;
  choices: Array<{ index: number; message: { content: string | null }; finish_reason: string }>;
  usage?: Usage;
}
export interface ChatChunkLike {
  choices: Array<{ delta: { content?: string | null }; finish_reason: string | null }>;
  usage?: Usage | null;
}
export interface OpenAiClientLike {
  chat: {
    completions: {
      create(body: ChatBody & { stream?: false }, options?: RequestOpts): WithResponse<ChatCompletionLike>;
      create(body: ChatBody & { stream: true }, options?: RequestOpts): WithResponse<AsyncIterable<ChatChunkLike>>;
    };
  };
}

/** Extra client settings for one test: a `fetch` that observes the SDK's HTTP calls; another admission instance's URL. */
export interface ClientOverrides {
  fetch?: typeof fetch;
  admission?: string;
}

/** The OpenAI SDK's own request timeout (ms) and retry count. */
export interface OpenAiTuning {
  timeout?: number;
  maxRetries?: number;
}

/** The official OpenAI SDK of the given major, pointed at admission with a workload key. */
export function openai(key: string): OpenAI;
export function openai(key: string, major: SdkMajor, overrides?: ClientOverrides & OpenAiTuning): OpenAiClientLike;
export function openai(
  key: string,
  major: SdkMajor = 'current',
  { admission, ...overrides }: ClientOverrides & OpenAiTuning = {},
): OpenAI | OpenAiClientLike {
  const options = { apiKey: key, baseURL: `${admission ?? stack.admission}/v1`, ...overrides };
  return major === 'next' ? new OpenAINext(options) : new OpenAI(options);
}

type GenerateParams = { model: string; contents: string; config?: { candidateCount?: number; maxOutputTokens?: number } };
export interface GenerateResponseLike {
  candidates?: Array<{ finishReason?: string; content?: { parts?: Array<{ text?: string }> } }>;
  text?: string;
  usageMetadata?: { promptTokenCount?: number; candidatesTokenCount?: number; totalTokenCount?: number };
  sdkHttpResponse?: { headers?: Record<string, string> };
}
/** What the suites use of a @google/genai client, met by every tested major (see OpenAiClientLike). */
export interface GeminiClientLike {
  models: {
    generateContent(params: GenerateParams): Promise<GenerateResponseLike>;
    generateContentStream(params: GenerateParams): Promise<AsyncGenerator<GenerateResponseLike>>;
  };
}

/**
 * The official @google/genai SDK of the given major, pointed at admission with a workload key (sent
 * as `x-goog-api-key`). `apiVersion` unset means the SDK's own default: `v1beta` for 2.x, `v1` for 3.x.
 */
export function gemini(key: string): GoogleGenAI;
export function gemini(key: string, major: SdkMajor, overrides?: ClientOverrides & { apiVersion?: string }): GeminiClientLike;
export function gemini(
  key: string,
  major: SdkMajor = 'current',
  { apiVersion, fetch, admission }: ClientOverrides & { apiVersion?: string } = {},
): GoogleGenAI | GeminiClientLike {
  const options = {
    apiKey: key,
    ...(apiVersion ? { apiVersion } : {}),
    httpOptions: { baseUrl: admission ?? stack.admission, ...(fetch ? { fetch } : {}) },
  };
  return major === 'next' ? new GoogleGenAINext(options) : new GoogleGenAI(options);
}

/** The error classes of each major, for `instanceof`. */
export const SDK_ERRORS = {
  current: { openai: APIError, genai: ApiError },
  next: { openai: APIErrorNext, genai: ApiErrorNext },
} as const;

/** Awaits an SDK call or iteration to its end: what it threw, or null when it ended normally. */
export function failureOf(work: PromiseLike<unknown>): Promise<unknown> {
  return Promise.resolve(work).then(
    () => null,
    (e: unknown) => e,
  );
}

/** A verified openai-chat route and a gemini-generate route on the provider simulator (alias = route id). */
export async function seedSimRoutes(seed: Seeder, routes: { chat: string; gemini: string }): Promise<void> {
  const sim = { upstreamBaseUrl: stack.providerSim };
  await seed.route({ routeId: routes.chat, alias: routes.chat, providerKind: 'openai-chat', upstreamModel: 'sim-gpt', ...sim });
  await seed.route({ routeId: routes.gemini, alias: routes.gemini, providerKind: 'gemini-generate', upstreamModel: 'gemini-sim', ...sim });
}

/** An openai-chat route on the provider simulator (alias = route id) and a workload allowed it; its key. */
export async function seedSimRouteWorkload(seed: Seeder, route: string, upstreamModel: string, workloadId: string): Promise<string> {
  await seed.route({ routeId: route, alias: route, providerKind: 'openai-chat', upstreamBaseUrl: stack.providerSim, upstreamModel });
  return (await seed.workload({ id: workloadId, allowedAliases: [route] })).key;
}

/** A `fetch` that counts the HTTP calls an SDK makes (retries included). */
export function countingFetch(): { fetch: typeof fetch; calls: () => number; urls: string[] } {
  const urls: string[] = [];
  return {
    fetch: (input, init) => {
      urls.push(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
      return fetch(input, init);
    },
    calls: () => urls.length,
    urls,
  };
}

/** What the provider simulator logged of one request (no prompt text), as `/_sim/requests` lists it. */
export interface SimRequest {
  seq: number;
  model: string;
  candidateCount: number | null;
  maxTokens: number | null;
  stream: boolean;
  directives: string[];
  keyHeader: 'none' | 'authorization' | 'x-goog-api-key';
  keyVerdict: 'not_required' | 'matched' | 'mismatched' | 'missing';
  status: number;
  /** the `Idempotency-Key` header the provider received, if any */
  idempotencyKey: string | null;
  /** the `x-client-request-id` header the provider received: the gateway's attempt id */
  clientRequestId: string | null;
  /** the id the provider answered with (its request id, or Gemini's responseId) */
  providerRequestId: string | null;
}

export async function simRequestsSince(seq: number): Promise<SimRequest[]> {
  const res = await fetch(`${stack.providerSim}/_sim/requests?since=${seq}`);
  const body = (await res.json()) as { requests: SimRequest[] };
  return body.requests;
}

export async function simLastSeq(): Promise<number> {
  const all = await simRequestsSince(0);
  return all.length ? all[all.length - 1].seq : 0;
}

/** A plain kafkajs consumer, as finance would write one, collecting raw messages of one topic. */
export class TopicReader {
  readonly messages: Array<{ key: string | null; value: string; partition: number }> = [];
  private readonly kafka = new Kafka({ clientId: `e2e-${uid()}`, brokers: stack.brokers, logLevel: logLevel.NOTHING });
  private consumer = this.kafka.consumer({ groupId: `e2e-reader-${uid()}`, maxWaitTimeInMs: 100 });

  constructor(private readonly topics: string[]) {}

  async start(): Promise<void> {
    await this.consumer.connect();
    await this.consumer.subscribe({ topics: this.topics, fromBeginning: true });
    const joined = new Promise<void>((resolve) => this.consumer.on(this.consumer.events.GROUP_JOIN, () => resolve()));
    await this.consumer.run({
      eachMessage: async ({ partition, message }) => {
        this.messages.push({ key: message.key?.toString() ?? null, value: message.value?.toString('utf8') ?? '', partition });
      },
    });
    await joined;
  }

  /**
   * The messages that are JSON. The broker is shared with the integration tests, and some of them
   * put malformed records on a topic on purpose (e.g. dispatch-controls.int-spec.ts): those are
   * not what a test here waits for, and are skipped.
   */
  json<T = Record<string, unknown>>(): T[] {
    return this.messages.flatMap((m) => {
      try {
        return [JSON.parse(m.value) as T];
      } catch {
        return [];
      }
    });
  }

  async waitFor<T = Record<string, unknown>>(pred: (m: T) => boolean, what: string): Promise<T> {
    return eventually(() => this.json<T>().find(pred), { timeoutMs: 20000, what });
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
}

/**
 * How to start a service of the stack as a process of its own: the compiled tree the stack runs
 * (GATEWAY_SERVICE_BUILD, set by scripts/test.mjs), else its TypeScript through @swc-node/register.
 */
export function serviceArgs(service: 'admission' | 'dispatch' | 'settlement'): string[] {
  const build = process.env.GATEWAY_SERVICE_BUILD;
  return build ? [path.join(build, 'apps', service, 'src', 'main.js')] : ['-r', '@swc-node/register', `apps/${service}/src/main.ts`];
}

/**
 * One more instance of a stack service next to the stack's own (the stack runs one of each),
 * named and numbered as `npm start -- --scale=N` names its instances (scripts/services.mjs,
 * instancesOf): instance id `<GATEWAY_INSTANCE_ID>-<service>-<n>`, port + 100 × (n − 1), log in the
 * stack's log folder; `env` adds to the stack's environment. The child joins `spawned` at once (so a caller can kill it even when it never
 * becomes healthy); resolves once its /health answers.
 */
export async function spawnInstance(
  service: 'admission' | 'dispatch' | 'settlement',
  n: number,
  spawned: ChildProcess[],
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; instanceId: string; port: number; url: string }> {
  const portEnv = `${service.toUpperCase()}_PORT`;
  const port = Number(process.env[portEnv]) + 100 * (n - 1);
  const instanceId = `${process.env.GATEWAY_INSTANCE_ID ?? 'e2e'}-${service}-${n}`;
  const log = fs.openSync(path.join(stack.logDir, `${service}-${n}.log`), 'a');
  const child = spawn(process.execPath, serviceArgs(service), {
    cwd: path.resolve(__dirname, '..'),
    env: { ...process.env, ...env, GATEWAY_INSTANCE_ID: instanceId, [portEnv]: String(port) },
    stdio: ['ignore', log, log],
  });
  spawned.push(child);
  const url = `http://127.0.0.1:${port}`;
  await eventually(
    async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${service}-${n} exited: see ${service}-${n}.log`);
      return (await fetch(`${url}/health`).catch(() => undefined))?.ok ? true : undefined;
    },
    { timeoutMs: 120000, what: `${service}-${n} healthy` },
  );
  return { child, instanceId, port, url };
}

/**
 * Stops the instances a suite started (spawnInstance) that still run: SIGTERM, so they leave their
 * consumer groups at once and the suites after it do not wait a session timeout for the
 * partitions they held; SIGKILL for one that has not exited 15 s later.
 */
export async function stopInstances(spawned: ChildProcess[]): Promise<void> {
  const running = spawned.filter((c) => c.exitCode === null && c.signalCode === null);
  await Promise.all(
    running.map(
      (child) =>
        new Promise<void>((resolve) => {
          const force = setTimeout(() => child.kill('SIGKILL'), 15000);
          child.once('exit', () => {
            clearTimeout(force);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}

export async function withSeeder<T>(fn: (seed: Seeder, db: Database) => Promise<T>): Promise<T> {
  const db = new Database(stack.databaseUrl);
  try {
    return await fn(new Seeder(db), db);
  } finally {
    await db.close();
  }
}

export function serviceLogs(): string {
  return fs
    .readdirSync(stack.logDir)
    .filter((f) => f.endsWith('.log'))
    .map((f) => fs.readFileSync(path.join(stack.logDir, f), 'utf8'))
    .join('\n');
}

/** A textual dump of every row of every table in the public schema. */
export async function databaseDump(db: Database): Promise<string> {
  const tables = await db.prisma.$queryRaw<Array<{ table_name: string }>>`
    SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`;
  const parts: string[] = [];
  for (const { table_name } of tables) {
    const rows = await db.prisma.$queryRawUnsafe<Array<{ row: string }>>(`SELECT t::text AS row FROM "${table_name}" t`);
    parts.push(`-- ${table_name}\n${rows.map((r) => r.row).join('\n')}`);
  }
  return parts.join('\n');
}

/**
 * Where any of `needles` occurs: every topic read from the beginning (once the messages keyed by
 * `untilKeys` have arrived, so the read is not vacuous), every row of every table, every service
 * log. Empty lists mean found nowhere.
 */
export async function searchEverywhere(
  needles: string[],
  untilKeys: string[],
): Promise<{ topics: string[]; database: string[]; logs: string[]; sawKeys: { database: boolean; logs: boolean } }> {
  const found = (text: string) => needles.filter((n) => text.includes(n));
  const everything = new TopicReader(Object.values(Topics).map((t) => t.name));
  await everything.start();
  let topics: string[];
  try {
    await eventually(() => (untilKeys.every((k) => everything.messages.some((m) => m.key === k)) ? true : undefined), {
      what: 'topic messages for the keys',
      timeoutMs: 30_000,
    });
    topics = found(everything.messages.map((m) => m.value).join('\n'));
  } finally {
    await everything.stop();
  }
  const dump = await withSeeder((_seed, db) => databaseDump(db));
  const logs = serviceLogs();
  return {
    topics,
    database: found(dump),
    logs: found(logs),
    sawKeys: { database: untilKeys.every((k) => dump.includes(k)), logs: untilKeys.some((k) => logs.includes(k)) },
  };
}

export { eventually };
