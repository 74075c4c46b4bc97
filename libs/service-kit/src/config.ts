import { z } from 'zod';

/** Environment shared by every service, validated once at start-up. */
const schema = z.object({
  DATABASE_URL: z.string().min(1),
  KAFKA_BROKERS: z.string().min(1).default('127.0.0.1:9092'),
  GATEWAY_INSTANCE_ID: z.string().optional(),
  LOG_LEVEL: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
  HOST: z.string().default('127.0.0.1'),
});

export interface ServiceConfig {
  serviceName: string;
  databaseUrl: string;
  kafkaBrokers: string[];
  instanceId: string;
  logLevel: string;
  host: string;
}

export function loadConfig(serviceName: string, env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const parsed = schema.parse(env);
  return {
    serviceName,
    databaseUrl: parsed.DATABASE_URL,
    kafkaBrokers: parsed.KAFKA_BROKERS.split(',')
      .map((b) => b.trim())
      .filter(Boolean),
    instanceId: parsed.GATEWAY_INSTANCE_ID ?? `${serviceName}-${process.pid}`,
    logLevel: parsed.LOG_LEVEL,
    host: parsed.HOST,
  };
}

export function portFromEnv(name: string, fallback: number, env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(`${name} must be a port number, got ${raw}`);
  return n;
}
