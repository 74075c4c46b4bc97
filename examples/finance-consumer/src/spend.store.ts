import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { Pool } from 'pg';
import { FINANCE_CONFIG, FinanceConsumerConfig } from './config';
import type { SpendRow } from './spend-row';

export interface DailySpend {
  workload_id: string;
  /** integer micro-USD as a decimal string (a bigint does not fit a JSON number) */
  cost_microusd: string;
  /** settled attempts counted */
  attempts: number;
}

/**
 * This app's own tables, in a schema of their own, created on start. `settled_attempt` remembers
 * every attempt counted (so a redelivered or replayed event is recognised), `daily_spend` holds the
 * running totals per workload and UTC day. Both change in one statement, so a crash can never
 * count an attempt without remembering it, or the reverse.
 */
@Injectable()
export class SpendStore implements OnModuleInit, OnModuleDestroy {
  private readonly pool: Pool;
  private readonly s: string;

  constructor(@Inject(FINANCE_CONFIG) config: FinanceConsumerConfig) {
    this.pool = new Pool({ connectionString: config.databaseUrl, max: 4 });
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

  /** true when the attempt was counted now; false when it had been counted before (a redelivery). */
  async record(row: SpendRow): Promise<boolean> {
    const res = await this.pool.query(
      `WITH fresh AS (
         INSERT INTO ${this.s}.settled_attempt (settlement_key, event_id, workload_id, day, cost_microusd)
         VALUES ($1, $2, $3, $4::date, $5::bigint)
         ON CONFLICT (settlement_key) DO NOTHING
         RETURNING workload_id, day, cost_microusd)
       INSERT INTO ${this.s}.daily_spend (workload_id, day, cost_microusd, attempts)
       SELECT workload_id, day, cost_microusd, 1 FROM fresh
       ON CONFLICT (workload_id, day) DO UPDATE
         SET cost_microusd = daily_spend.cost_microusd + EXCLUDED.cost_microusd, attempts = daily_spend.attempts + 1`,
      [row.settlementKey, row.eventId, row.workloadId, row.day, row.costMicrousd.toString()],
    );
    return res.rowCount === 1;
  }

  /** Spend per workload on one UTC day, largest first. */
  async spendOn(day: string): Promise<DailySpend[]> {
    const res = await this.pool.query<DailySpend>(
      `SELECT workload_id, cost_microusd::text AS cost_microusd, attempts
         FROM ${this.s}.daily_spend WHERE day = $1::date ORDER BY cost_microusd DESC, workload_id`,
      [day],
    );
    return res.rows;
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }
}
