import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import OpenAI from 'openai';
import { Topics } from '@gateway/contracts';
import { Database } from '@gateway/db';
import { eventually, Seeder } from '@gateway/testing';

/** Everything an e2e test needs to reach the stack that `npm test` started. */
export const stack = {
  admission: required('E2E_ADMISSION_URL'),
  policy: process.env.E2E_POLICY_URL ?? '',
  providerSim: required('E2E_PROVIDER_SIM_URL'),
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

export function openai(key: string): OpenAI {
  return new OpenAI({ apiKey: key, baseURL: `${stack.admission}/v1` });
}

export async function simRequestsSince(seq: number): Promise<
  Array<{
    seq: number;
    model: string;
    candidateCount: number | null;
    maxTokens: number | null;
    stream: boolean;
    directives: string[];
    keyHeader: 'none' | 'authorization' | 'x-goog-api-key';
    keyVerdict: 'not_required' | 'matched' | 'mismatched' | 'missing';
    status: number;
  }>
> {
  const res = await fetch(`${stack.providerSim}/_sim/requests?since=${seq}`);
  const body = (await res.json()) as {
    requests: Array<{
      seq: number;
      model: string;
      candidateCount: number | null;
      maxTokens: number | null;
      stream: boolean;
      directives: string[];
      keyHeader: 'none' | 'authorization' | 'x-goog-api-key';
      keyVerdict: 'not_required' | 'matched' | 'mismatched' | 'missing';
      status: number;
    }>;
  };
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

  json<T = Record<string, unknown>>(): T[] {
    return this.messages.map((m) => JSON.parse(m.value) as T);
  }

  async waitFor<T = Record<string, unknown>>(pred: (m: T) => boolean, what: string): Promise<T> {
    return eventually(() => this.json<T>().find(pred), { timeoutMs: 20000, what });
  }

  async stop(): Promise<void> {
    await this.consumer.disconnect();
  }
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
