import { decidePause, ExperimentPause, PauseDecision, PauseRule, pauseSampleOf, RecordedPrimary } from '@gateway/domain';
import { z } from 'zod';
import { Database, prismaTx, Tx } from '../database';
import type { ExperimentPause as PauseRow } from '../generated/prisma/client';

/** What one evaluation did: null `decision` when the experiment is not running (nothing judged). */
export interface PauseEvaluation {
  decision: PauseDecision | null;
  /** the experiment's open pause after the evaluation, if any */
  openPauseId: string | null;
}

/**
 * The hedging experiment's pauses (issue 11). The window is the experiment's most recent
 * `window_actions` holdout actions whose primary has ended (by the action index on experiment,
 * cohort, admission time), so every dispatch instance judges the same window. Evaluators lock the
 * experiment row, so two instances evaluating at once decide one after the other; the unique
 * `open_experiment_id` makes a second open pause impossible even so.
 */
export class ExperimentPauseRepository {
  constructor(private readonly db: Database) {}

  /** The experiment's open pause, if any (one unique-index lookup). */
  async openPauseId(experimentId: string): Promise<string | null> {
    const row = await this.db.prisma.experimentPause.findUnique({ where: { openExperimentId: experimentId }, select: { id: true } });
    return row?.id ?? null;
  }

  /**
   * Measures the window and applies the pause rule to the stored state, in one transaction under
   * the experiment row's lock: opens a pause (with the figures, thresholds and window) or closes
   * the open one (with its end figures).
   */
  async evaluate(experimentId: string, now: Date, newId: () => string): Promise<PauseEvaluation> {
    return this.db.transaction(async (tx) => {
      const p = prismaTx(tx);
      const locked = await p.$queryRaw<Array<{ status: string; p95: number; errors: number; window: number }>>`
        SELECT status, pause_holdout_p95_above_ms AS p95, pause_route_error_per_mille_above AS errors, pause_window_actions AS window
        FROM experiment WHERE id = ${experimentId} FOR NO KEY UPDATE`;
      const e = locked[0];
      const openRow = await p.experimentPause.findUnique({ where: { openExperimentId: experimentId } });
      const open = openRow ? pauseFromRow(openRow) : null;
      if (!e || e.status !== 'running') return { decision: null, openPauseId: open?.id ?? null };
      const rules = { holdoutP95AboveMs: e.p95, routeErrorPerMilleAbove: e.errors, windowActions: e.window };
      const window = await this.windowOf(experimentId, rules.windowActions, tx);
      const decision = decidePause({ experimentId, open, samples: window.map(pauseSampleOf), rules, now, newId });
      switch (decision.kind) {
        case 'none':
          return { decision, openPauseId: open?.id ?? null };
        case 'open':
          await p.experimentPause.create({ data: pauseToRow(decision.pause) });
          return { decision, openPauseId: decision.pause.id };
        case 'close':
          await p.experimentPause.update({ where: { id: decision.pause.id }, data: pauseToRow(decision.pause) });
          return { decision, openPauseId: null };
      }
    });
  }

  /**
   * The window: the last `size` holdout actions of the experiment whose primary attempt has ended,
   * oldest first (in admission order). Actions still in flight are skipped, not waited for.
   */
  async windowOf(experimentId: string, size: number, tx?: Tx): Promise<RecordedPrimary[]> {
    const client = tx ? prismaTx(tx) : this.db.prisma;
    const rows = await client.$queryRaw<Array<{ started_at: Date; ended_at: Date; status: string; http_status: number | null }>>`
      SELECT t.started_at, t.ended_at, t.status, t.http_status
      FROM action a JOIN attempt t ON t.action_id = a.id AND t.attempt_no = 1
      WHERE a.experiment_id = ${experimentId} AND a.cohort = 'holdout' AND t.role = 'primary' AND t.ended_at IS NOT NULL
      ORDER BY a.created_at DESC, a.id DESC
      LIMIT ${size}`;
    return rows.reverse().map((r) => ({ startedAt: r.started_at, endedAt: r.ended_at, status: r.status, httpStatus: r.http_status }));
  }

  /** The experiment's pauses, oldest first (the report's list). */
  async pausesOf(experimentId: string): Promise<ExperimentPause[]> {
    const rows = await this.db.prisma.experimentPause.findMany({ where: { experimentId }, orderBy: [{ startedAt: 'asc' }, { id: 'asc' }] });
    return rows.map(pauseFromRow);
  }
}

const rule = z.enum(['holdout_p95_above_ms', 'route_error_per_mille_above']) satisfies z.ZodType<PauseRule>;

/** The one mapping from an `experiment_pause` row to the domain. */
function pauseFromRow(r: PauseRow): ExperimentPause {
  const ended = r.endedAt !== null && r.endHoldoutP95Ms !== null && r.endRouteErrorPerMille !== null && r.endSamples !== null;
  return {
    id: r.id,
    experimentId: r.experimentId,
    rule: rule.parse(r.rule),
    startedAt: r.startedAt,
    endedAt: r.endedAt,
    atStart: { holdoutP95Ms: r.startHoldoutP95Ms, routeErrorPerMille: r.startRouteErrorPerMille, samples: r.startSamples },
    atEnd: ended ? { holdoutP95Ms: r.endHoldoutP95Ms!, routeErrorPerMille: r.endRouteErrorPerMille!, samples: r.endSamples! } : null,
    thresholds: { holdoutP95AboveMs: r.thresholdHoldoutP95Ms, routeErrorPerMilleAbove: r.thresholdRouteErrorPerMille },
    windowActions: r.windowActions,
  };
}

/** ... and back (`open_experiment_id` is the experiment id exactly while the pause is open). */
function pauseToRow(p: ExperimentPause): PauseRow {
  return {
    id: p.id,
    experimentId: p.experimentId,
    openExperimentId: p.endedAt === null ? p.experimentId : null,
    rule: p.rule,
    startedAt: p.startedAt,
    endedAt: p.endedAt,
    startHoldoutP95Ms: p.atStart.holdoutP95Ms,
    startRouteErrorPerMille: p.atStart.routeErrorPerMille,
    startSamples: p.atStart.samples,
    endHoldoutP95Ms: p.atEnd?.holdoutP95Ms ?? null,
    endRouteErrorPerMille: p.atEnd?.routeErrorPerMille ?? null,
    endSamples: p.atEnd?.samples ?? null,
    thresholdHoldoutP95Ms: p.thresholds.holdoutP95AboveMs,
    thresholdRouteErrorPerMille: p.thresholds.routeErrorPerMilleAbove,
    windowActions: p.windowActions,
  };
}
