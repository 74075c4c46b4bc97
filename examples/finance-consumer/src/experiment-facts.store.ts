import { Injectable } from '@nestjs/common';
import type { Pool } from 'pg';
import { FinanceDb } from './finance-db';
import type { ExperimentAttemptFact } from './experiment-rows';

interface FactRow {
  attempt_id: string;
  event_id: string;
  experiment_id: string;
  action_id: string;
  cohort: ExperimentAttemptFact['cohort'];
  winner: boolean;
  attempts_total: number | null;
  admitted_at: Date;
  ended_at: Date | null;
  acceptance_verdict: string | null;
  candidates: ExperimentAttemptFact['candidates'];
  cost_microusd: string;
  pause_id: string | null;
}

/**
 * The experiment facts of every settled attempt of an experiment action, one row per attempt
 * (FinanceDb's `experiment_attempt`). A redelivered or replayed event finds its attempt there and
 * changes nothing (`ON CONFLICT DO NOTHING`): the facts of one settled attempt never change.
 */
@Injectable()
export class ExperimentFactsStore {
  private readonly pool: Pool;
  private readonly s: string;

  constructor(db: FinanceDb) {
    this.pool = db.pool;
    this.s = db.s;
  }

  /** true when the attempt's facts were stored now; false when they had been (a redelivery). */
  async record(f: ExperimentAttemptFact): Promise<boolean> {
    const res = await this.pool.query(
      `INSERT INTO ${this.s}.experiment_attempt (attempt_id, event_id, experiment_id, action_id, cohort, winner, attempts_total,
         admitted_at, ended_at, acceptance_verdict, candidates, cost_microusd, pause_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12::bigint, $13)
       ON CONFLICT (attempt_id) DO NOTHING`,
      [
        f.attemptId,
        f.eventId,
        f.experimentId,
        f.actionId,
        f.cohort,
        f.winner,
        f.attemptsTotal,
        f.admittedAt,
        f.endedAt,
        f.acceptanceVerdict,
        f.candidates === null ? null : JSON.stringify(f.candidates),
        f.costMicrousd.toString(),
        f.pauseId,
      ],
    );
    return res.rowCount === 1;
  }

  /** Every settled attempt of the experiment known here. */
  async ofExperiment(experimentId: string): Promise<ExperimentAttemptFact[]> {
    const res = await this.pool.query<FactRow>(
      `SELECT attempt_id, event_id, experiment_id, action_id, cohort, winner, attempts_total, admitted_at, ended_at,
         acceptance_verdict, candidates, cost_microusd::text AS cost_microusd, pause_id
       FROM ${this.s}.experiment_attempt WHERE experiment_id = $1 ORDER BY action_id, attempt_id`,
      [experimentId],
    );
    return res.rows.map((r) => ({
      attemptId: r.attempt_id,
      eventId: r.event_id,
      experimentId: r.experiment_id,
      actionId: r.action_id,
      cohort: r.cohort,
      winner: r.winner,
      attemptsTotal: r.attempts_total,
      admittedAt: r.admitted_at,
      endedAt: r.ended_at,
      acceptanceVerdict: r.acceptance_verdict,
      candidates: r.candidates,
      costMicrousd: BigInt(r.cost_microusd),
      pauseId: r.pause_id,
    }));
  }
}
