import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { Pool } from 'pg';
import { FINANCE_CONFIG, FinanceConsumerConfig } from './config';

/**
 * This app's own Postgres: one pool, and its tables in a schema of their own, created on start.
 * `settled_attempt` remembers every attempt counted (so a redelivered or replayed event is
 * recognised), `daily_spend` holds the running totals per workload and UTC day, and
 * `experiment_attempt` the experiment facts of each settled attempt of an experiment action.
 */
@Injectable()
export class FinanceDb implements OnModuleInit, OnModuleDestroy {
  readonly pool: Pool;
  /** the quoted schema name, for SQL */
  readonly s: string;

  constructor(@Inject(FINANCE_CONFIG) config: FinanceConsumerConfig) {
    this.pool = new Pool({ connectionString: config.databaseUrl, max: 4 });
    // A restart of Postgres closes every connection. pg reports that as an 'error' event, on the
    // pool for an idle connection and on the connection itself for one in use; unheard, either
    // ends the process. The statement in flight fails all the same, and the pool reconnects.
    this.pool.on('error', () => undefined);
    this.pool.on('connect', (client) => client.on('error', () => undefined));
    this.s = `"${config.schema}"`;
  }

  async onModuleInit(): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      // Two instances starting together would race on CREATE … IF NOT EXISTS; one waits here.
      await client.query(`SELECT pg_advisory_xact_lock(hashtext('finance-consumer:' || $1))`, [this.s]);
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${this.s}`);
      await client.query(`
        CREATE TABLE IF NOT EXISTS ${this.s}.settled_attempt (
          settlement_key text PRIMARY KEY,
          event_id uuid NOT NULL,
          workload_id text NOT NULL,
          day date NOT NULL,
          cost_microusd bigint NOT NULL,
          counted_at timestamptz NOT NULL DEFAULT now()
        )`);
      await client.query(`
        CREATE TABLE IF NOT EXISTS ${this.s}.daily_spend (
          workload_id text NOT NULL,
          day date NOT NULL,
          cost_microusd bigint NOT NULL,
          attempts integer NOT NULL,
          PRIMARY KEY (workload_id, day)
        )`);
      await client.query(`
        CREATE TABLE IF NOT EXISTS ${this.s}.experiment_attempt (
          attempt_id text PRIMARY KEY,
          event_id uuid NOT NULL,
          experiment_id text NOT NULL,
          action_id text NOT NULL,
          cohort text NOT NULL,
          winner boolean NOT NULL,
          attempts_total integer,
          admitted_at timestamptz NOT NULL,
          ended_at timestamptz,
          acceptance_verdict text,
          candidates jsonb,
          cost_microusd bigint NOT NULL
        )`);
      // added after the table was first published: a store created before it gains the column
      await client.query(`ALTER TABLE ${this.s}.experiment_attempt ADD COLUMN IF NOT EXISTS pause_id text`);
      await client.query(`CREATE INDEX IF NOT EXISTS experiment_attempt_experiment ON ${this.s}.experiment_attempt (experiment_id)`);
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    } finally {
      client.release();
    }
  }

  async onModuleDestroy(): Promise<void> {
    await this.pool.end();
  }
}
