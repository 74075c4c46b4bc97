/** Settings from the environment; see the README's table. */
export interface FinanceConsumerConfig {
  port: number;
  host: string;
  brokers: string[];
  /** Nest's Kafka transport appends `-server` to it */
  groupId: string;
  databaseUrl: string;
  /** Postgres schema of this app's own tables */
  schema: string;
  /** the policy API and a token with role finance, to read an experiment's design (its report); null: no reports */
  policyUrl: string | null;
  policyToken: string | null;
}

export const FINANCE_CONFIG = Symbol('FINANCE_CONFIG');

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): FinanceConsumerConfig {
  const databaseUrl = env.FINANCE_DATABASE_URL ?? env.DATABASE_URL;
  if (!databaseUrl) throw new Error('FINANCE_DATABASE_URL (or DATABASE_URL) must name the Postgres database for the spend tables');
  const schema = env.FINANCE_DB_SCHEMA ?? 'finance_consumer';
  // The schema name is written into SQL, so only a plain identifier is accepted.
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error(`FINANCE_DB_SCHEMA must be a lower-case SQL identifier, not "${schema}"`);
  return {
    port: Number(env.FINANCE_CONSUMER_PORT ?? 3020),
    host: env.HOST ?? '127.0.0.1',
    brokers: (env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',').map((b) => b.trim()),
    groupId: env.FINANCE_CONSUMER_GROUP ?? 'finance-consumer',
    databaseUrl,
    schema,
    policyUrl: env.POLICY_URL ?? null,
    policyToken: env.FINANCE_POLICY_TOKEN ?? null,
  };
}
