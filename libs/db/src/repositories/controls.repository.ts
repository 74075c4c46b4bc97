import type { ControlAlertV1 } from '@gateway/contracts';
import { countCategory, CountTotals, DayTally, EMPTY_TALLY, addTallies, ExceptionUsage, OutputStats, utcDayOf } from '@gateway/domain';
import { Database, Tx, prismaTx } from '../database';
import { OutboxRepository } from './outbox.repository';

/** One admission decision as the tallies need it (from `gateway.admission.decisions.v1`). */
export interface DecisionFact {
  at: Date;
  workloadId: string;
  /** '' when the decision came before a route was resolved */
  routeId: string;
  requested: number | null;
  effective: number | null;
  admitted: boolean;
  /** the refusal's stable code (null for an admission) */
  reason: string | null;
}

export interface AlertRow {
  alertId: string;
  day: string;
  workloadId: string;
  routeId: string;
  kind: string;
  details: ControlAlertV1;
  createdAt: Date;
}

export interface UnresolvedExposureRow {
  workloadId: string;
  /** age of the reservation at the end of the day: `<1d`, `1-7d`, `>7d` */
  age: string;
  reservations: number;
  unresolvedMicrousd: bigint;
}

type TallyKey = string;

/**
 * The daily controls' storage: per-day tallies (batched upserts from the decisions topic), the
 * per-workload thresholds, the alerts with their outbox rows, and the day's reads from the
 * ledger, exceptions and reservations.
 */
export class ControlsRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  /** Adds decisions to their day's tallies: one upsert statement for the whole batch. */
  async addDecisions(tx: Tx, facts: readonly DecisionFact[]): Promise<void> {
    const sums = new Map<TallyKey, number>();
    const bump = (f: DecisionFact, metric: string, key: string) => {
      const k = JSON.stringify([utcDayOf(f.at), f.workloadId, f.routeId, metric, key]);
      sums.set(k, (sums.get(k) ?? 0) + 1);
    };
    for (const f of facts) {
      bump(f, 'decision', f.admitted ? 'allow' : 'deny');
      if (f.requested === null || (Number.isInteger(f.requested) && f.requested >= 1)) bump(f, 'requested', countCategory(f.requested));
      if (f.admitted && f.effective !== null) bump(f, 'effective', String(f.effective));
      if (!f.admitted) bump(f, 'refusal', f.reason ?? 'unknown');
    }
    if (sums.size === 0) return;
    const rows = [...sums].map(([k, n]) => [...(JSON.parse(k) as string[]), n] as const);
    // sorted so concurrent batches take the row locks in one order
    rows.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    await prismaTx(tx).$executeRaw`
      INSERT INTO control_day_tally (day, workload_id, route_id, metric, key, n)
      SELECT d::date, w, r, m, k, n FROM unnest(${rows.map((r) => r[0])}::text[], ${rows.map((r) => r[1])}::text[],
        ${rows.map((r) => r[2])}::text[], ${rows.map((r) => r[3])}::text[], ${rows.map((r) => r[4])}::text[],
        ${rows.map((r) => BigInt(r[5]))}::bigint[]) AS t(d, w, r, m, k, n)
      ON CONFLICT (day, workload_id, route_id, metric, key) DO UPDATE SET n = control_day_tally.n + EXCLUDED.n`;
  }

  /** Tallies of the days [from, to] (inclusive), per day → workload → route. */
  async tallies(from: string, to: string, workloadId?: string): Promise<Map<string, Map<string, Map<string, DayTally>>>> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{ day: string; workload_id: string; route_id: string; metric: string; key: string; n: bigint }>
    >`
      SELECT to_char(day, 'YYYY-MM-DD') AS day, workload_id, route_id, metric, key, n FROM control_day_tally
      WHERE day BETWEEN ${from}::date AND ${to}::date AND (${workloadId ?? null}::text IS NULL OR workload_id = ${workloadId ?? null}::text)`;
    const out = new Map<string, Map<string, Map<string, DayTally>>>();
    for (const r of rows) {
      const n = Number(r.n);
      const add: DayTally =
        r.metric === 'requested'
          ? { ...EMPTY_TALLY, requested: { [r.key]: n } }
          : r.metric === 'decision'
            ? { ...EMPTY_TALLY, admitted: r.key === 'allow' ? n : 0, refused: r.key === 'deny' ? n : 0 }
            : r.metric === 'refusal'
              ? { ...EMPTY_TALLY, refusals: { [r.key]: n } }
              : EMPTY_TALLY;
      const byWorkload = out.get(r.day) ?? new Map<string, Map<string, DayTally>>();
      const byRoute = byWorkload.get(r.workload_id) ?? new Map<string, DayTally>();
      byRoute.set(r.route_id, addTallies(byRoute.get(r.route_id) ?? EMPTY_TALLY, add));
      byWorkload.set(r.workload_id, byRoute);
      out.set(r.day, byWorkload);
    }
    return out;
  }

  /**
   * The tallies of the days [from, to] (inclusive) summed per workload × route: decisions by the
   * requested count as sent, admitted and refused, and the sum of the effective counts admitted.
   */
  async countTotals(from: string, to: string, workloadId?: string): Promise<CountTotals[]> {
    const rows = await this.db.prisma.$queryRaw<Array<{ workload_id: string; route_id: string; metric: string; key: string; n: bigint }>>`
      SELECT workload_id, route_id, metric, key, sum(n)::bigint AS n FROM control_day_tally
      WHERE day BETWEEN ${from}::date AND ${to}::date AND metric IN ('requested', 'decision', 'effective')
        AND (${workloadId ?? null}::text IS NULL OR workload_id = ${workloadId ?? null}::text)
      GROUP BY workload_id, route_id, metric, key ORDER BY workload_id, route_id, metric, key`;
    const out = new Map<string, CountTotals & { requested: Record<string, number> }>();
    for (const r of rows) {
      const k = JSON.stringify([r.workload_id, r.route_id]);
      const t = out.get(k) ?? { workloadId: r.workload_id, routeId: r.route_id, requested: {}, admitted: 0, refused: 0, effectiveTotal: 0 };
      const n = Number(r.n);
      if (r.metric === 'requested') t.requested[r.key] = n;
      else if (r.metric === 'decision') {
        if (r.key === 'allow') t.admitted += n;
        else t.refused += n;
      } else if (/^\d+$/.test(r.key)) t.effectiveTotal += Number(r.key) * n;
      out.set(k, t);
    }
    return [...out.values()];
  }

  /** Effective counts admitted on a day per workload → route → count → requests (the report's column). */
  async effectiveCounts(
    day: string,
    workloadId?: string,
  ): Promise<Array<{ workloadId: string; routeId: string; effective: string; n: number }>> {
    const rows = await this.db.prisma.$queryRaw<Array<{ workload_id: string; route_id: string; key: string; n: bigint }>>`
      SELECT workload_id, route_id, key, n FROM control_day_tally WHERE day = ${day}::date AND metric = 'effective'
        AND (${workloadId ?? null}::text IS NULL OR workload_id = ${workloadId ?? null}::text)
      ORDER BY workload_id, route_id, key`;
    return rows.map((r) => ({ workloadId: r.workload_id, routeId: r.route_id, effective: r.key, n: Number(r.n) }));
  }

  /**
   * Output tokens per request (all attempts of an action) for actions whose ledger rows settled on
   * the day, per workload → route of the action, with returned counts. An action with a row whose
   * output is unknown (an operator release) is left out: unknown output is never zero.
   */
  async outputPerRequest(
    day: string,
    workloadId?: string,
  ): Promise<Array<{ workloadId: string; routeId: string; stats: OutputStats; returnedTotal: number }>> {
    // the UTC day as instants, whatever the session's time zone
    const from = new Date(`${day}T00:00:00.000Z`);
    return this.outputPerRequestBetween(from, new Date(from.getTime() + 24 * 60 * 60 * 1000), workloadId);
  }

  /** The same figures for actions whose ledger rows settled in [from, to) (the weekly audit's period). */
  async outputPerRequestBetween(
    from: Date,
    to: Date,
    workloadId?: string,
  ): Promise<Array<{ workloadId: string; routeId: string; stats: OutputStats; returnedTotal: number }>> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{ workload_id: string; route_id: string; requests: bigint; mean: number; p50: number; p95: number; returned_total: bigint }>
    >`
      WITH per_action AS (
        SELECT l.workload_id, a.route_id, l.action_id, sum(l.output_tokens_total)::bigint AS output,
          max(l.returned_candidates) AS returned
        FROM ledger_entry l JOIN action a ON a.id = l.action_id
        WHERE l.settled_at >= ${from} AND l.settled_at < ${to}
          AND (${workloadId ?? null}::text IS NULL OR l.workload_id = ${workloadId ?? null}::text)
        GROUP BY l.workload_id, a.route_id, l.action_id
        HAVING bool_and(l.output_tokens_total IS NOT NULL))
      SELECT workload_id, route_id, count(*) AS requests, avg(output)::float8 AS mean,
        percentile_disc(0.5) WITHIN GROUP (ORDER BY output)::float8 AS p50,
        percentile_disc(0.95) WITHIN GROUP (ORDER BY output)::float8 AS p95, sum(returned)::bigint AS returned_total
      FROM per_action GROUP BY workload_id, route_id ORDER BY workload_id, route_id`;
    return rows.map((r) => ({
      workloadId: r.workload_id,
      routeId: r.route_id,
      stats: { requests: Number(r.requests), mean: r.mean, p50: r.p50, p95: r.p95 },
      returnedTotal: Number(r.returned_total ?? 0n),
    }));
  }

  /** Active (approved, unexpired) exceptions at the start of the day, with their account's spend (pending + unresolved + settled). */
  async exceptionUsage(dayStart: Date, workloadId?: string): Promise<Array<ExceptionUsage & { workloadId: string }>> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{ id: string; workload_id: string; route_id: string | null; budget_microusd: bigint; spent: bigint | null; expires_at: Date }>
    >`
      SELECT e.id, e.workload_id, e.route_id, e.budget_microusd, e.expires_at,
        (b.pending_microusd + b.unresolved_microusd + b.settled_microusd) AS spent
      FROM candidate_exception e LEFT JOIN budget_account b ON b.scope = 'exception' AND b.scope_id = e.id
      WHERE e.status IN ('active', 'expired') AND e.expires_at > ${dayStart}
        AND (${workloadId ?? null}::text IS NULL OR e.workload_id = ${workloadId ?? null}::text)
      ORDER BY e.workload_id, e.id`;
    return rows.map((r) => ({
      exceptionId: r.id,
      workloadId: r.workload_id,
      routeId: r.route_id,
      budgetMicrousd: r.budget_microusd,
      spentMicrousd: r.spent ?? 0n,
      expiresAt: r.expires_at,
    }));
  }

  /** Unresolved exposure still held at `asOf`, per workload and the reservation's age. */
  async unresolvedExposure(asOf: Date, workloadId?: string): Promise<UnresolvedExposureRow[]> {
    const rows = await this.db.prisma.$queryRaw<Array<{ workload_id: string; age: string; reservations: bigint; unresolved: bigint }>>`
      SELECT a.workload_id,
        CASE WHEN r.created_at > ${asOf}::timestamptz - interval '1 day' THEN '<1d'
             WHEN r.created_at > ${asOf}::timestamptz - interval '7 days' THEN '1-7d' ELSE '>7d' END AS age,
        count(*) AS reservations, sum(r.unresolved_microusd)::bigint AS unresolved
      FROM reservation r JOIN action a ON a.id = r.action_id
      WHERE r.unresolved_microusd > 0 AND r.created_at < ${asOf}
        AND (${workloadId ?? null}::text IS NULL OR a.workload_id = ${workloadId ?? null}::text)
      GROUP BY 1, 2 ORDER BY 1, 2`;
    return rows.map((r) => ({
      workloadId: r.workload_id,
      age: r.age,
      reservations: Number(r.reservations),
      unresolvedMicrousd: r.unresolved,
    }));
  }

  /** Workloads' per-candidate output ceilings and stored thresholds (raw JSON, parsed by the caller). */
  async workloads(ids: readonly string[]): Promise<Map<string, { perCandidateOutputCeiling: number; thresholds: unknown }>> {
    if (ids.length === 0) return new Map();
    const rows = await this.db.prisma.$queryRaw<Array<{ id: string; ceiling: number; thresholds: unknown }>>`
      SELECT w.id, w.per_candidate_output_ceiling AS ceiling, t.thresholds FROM workload w
      LEFT JOIN control_threshold t ON t.workload_id = w.id WHERE w.id = ANY(${[...ids]}::text[])`;
    return new Map(rows.map((r) => [r.id, { perCandidateOutputCeiling: r.ceiling, thresholds: r.thresholds ?? null }]));
  }

  async thresholdsOf(
    workloadId: string,
  ): Promise<{ exists: boolean; thresholds: unknown; updatedAt: Date | null; updatedBy: string | null }> {
    const rows = await this.db.prisma.$queryRaw<Array<{ thresholds: unknown; updated_at: Date | null; updated_by: string | null }>>`
      SELECT t.thresholds, t.updated_at, t.updated_by FROM workload w LEFT JOIN control_threshold t ON t.workload_id = w.id WHERE w.id = ${workloadId}`;
    if (rows.length === 0) return { exists: false, thresholds: null, updatedAt: null, updatedBy: null };
    return { exists: true, thresholds: rows[0].thresholds ?? null, updatedAt: rows[0].updated_at, updatedBy: rows[0].updated_by };
  }

  /** Stores a workload's thresholds (stored in the API's snake_case shape) and announces the change. */
  async putThresholds(c: { workloadId: string; thresholds: unknown; actor: string; reason: string; now: Date }): Promise<void> {
    await this.db.transaction(async (tx) => {
      await prismaTx(tx).$executeRaw`
        INSERT INTO control_threshold (workload_id, thresholds, updated_at, updated_by, change_reason)
        VALUES (${c.workloadId}, ${JSON.stringify(c.thresholds)}::jsonb, ${c.now}, ${c.actor}, ${c.reason})
        ON CONFLICT (workload_id) DO UPDATE SET thresholds = EXCLUDED.thresholds, updated_at = EXCLUDED.updated_at,
          updated_by = EXCLUDED.updated_by, change_reason = EXCLUDED.change_reason`;
      await this.outbox.policyChanged(tx, {
        entity: 'workload',
        entityId: c.workloadId,
        change: 'controls_thresholds',
        actor: c.actor,
        now: c.now,
      });
    });
  }

  /**
   * Records alerts once per (day, workload, route, kind) and, for each one that is new, its
   * `gateway.controls.alerts.v1` outbox row in the same transaction. Returns the new ones.
   */
  async recordAlerts(alerts: readonly AlertRow[]): Promise<AlertRow[]> {
    if (alerts.length === 0) return [];
    return this.db.transaction(async (tx) => {
      const inserted = await prismaTx(tx).$queryRaw<Array<{ id: string }>>`
        INSERT INTO control_alert (id, day, workload_id, route_id, kind, details, created_at)
        SELECT i, d::date, w, r, k, j, ${alerts[0].createdAt} FROM unnest(${alerts.map((a) => a.alertId)}::text[],
          ${alerts.map((a) => a.day)}::text[], ${alerts.map((a) => a.workloadId)}::text[], ${alerts.map((a) => a.routeId)}::text[],
          ${alerts.map((a) => a.kind)}::text[], ${alerts.map((a) => JSON.stringify(a.details))}::jsonb[]) AS t(i, d, w, r, k, j)
        ON CONFLICT (day, workload_id, route_id, kind) DO NOTHING RETURNING id`;
      const fresh = new Set(inserted.map((r) => r.id));
      const added = alerts.filter((a) => fresh.has(a.alertId));
      await this.outbox.appendMany(
        tx,
        'controlAlerts',
        added.map((a) => ({ key: a.workloadId, payload: a.details })),
      );
      return added;
    });
  }

  async listAlerts(q: { day?: string; workloadId?: string; limit: number }): Promise<AlertRow[]> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{ id: string; day: string; workload_id: string; route_id: string; kind: string; details: ControlAlertV1; created_at: Date }>
    >`
      SELECT id, to_char(day, 'YYYY-MM-DD') AS day, workload_id, route_id, kind, details, created_at FROM control_alert
      WHERE (${q.day ?? null}::text IS NULL OR day = ${q.day ?? null}::date)
        AND (${q.workloadId ?? null}::text IS NULL OR workload_id = ${q.workloadId ?? null}::text)
      ORDER BY day DESC, workload_id, route_id, kind LIMIT ${q.limit}`;
    return rows.map((r) => ({
      alertId: r.id,
      day: r.day,
      workloadId: r.workload_id,
      routeId: r.route_id,
      kind: r.kind,
      details: r.details,
      createdAt: r.created_at,
    }));
  }
}
