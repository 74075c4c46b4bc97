import { Injectable } from '@nestjs/common';
import type { Pool } from 'pg';
import { FinanceDb } from './finance-db';
import type { SpendRow } from './spend-row';

export interface DailySpend {
  workload_id: string;
  /** integer micro-USD as a decimal string (a bigint does not fit a JSON number) */
  cost_microusd: string;
  /** settled attempts counted */
  attempts: number;
}

/**
 * Spend per workload and UTC day (FinanceDb's `settled_attempt` and `daily_spend`). Both change in
 * one statement, so a crash can never count an attempt without remembering it, or the reverse.
 */
@Injectable()
export class SpendStore {
  private readonly pool: Pool;
  private readonly s: string;

  constructor(db: FinanceDb) {
    this.pool = db.pool;
    this.s = db.s;
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
