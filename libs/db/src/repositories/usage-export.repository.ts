import { Database } from '../database';
import { EXPORT_MISMATCH } from './reconciliation.repository';

/** An operator's statement that an export is complete for some routes and a UTC day (issue 15). */
export interface ExportCompletionView {
  id: string;
  /** YYYY-MM-DD (UTC) */
  day: string;
  routeIds: string[];
  exportDigest: string;
  statedBy: string;
  statedAt: Date;
}

/** An attempt the complete rule may settle at zero: ended, unresolved on an open case, no export line. */
export interface UnresolvedWithoutLine {
  attemptId: string;
  caseId: string;
  caseReason: string;
  providerRequestId: string | null;
  exposureMicrousd: bigint;
}

/**
 * Provider usage exports as the gateway has seen them (issue 15): the operator's statements that an
 * export is complete for routes × day and, with the imported lines (`usage_export_line`, written by
 * `AuditRepository.recordExportLines` for every line of every import), which unresolved attempts
 * the provider billed nothing for.
 */
export class UsageExportRepository {
  constructor(private readonly db: Database) {}

  /**
   * Records the statement once per (day, routes, digest) and returns the recorded one: stating the
   * same again keeps who said it first and when.
   */
  async stateCompletion(c: ExportCompletionView): Promise<ExportCompletionView> {
    const routeIds = [...new Set(c.routeIds)].sort();
    await this.db.prisma.$executeRaw`
      INSERT INTO usage_export_completion (id, day, route_ids, export_digest, stated_by, stated_at)
      VALUES (${c.id}, ${c.day}::date, ${routeIds}::text[], ${c.exportDigest}, ${c.statedBy}, ${c.statedAt})
      ON CONFLICT (day, route_ids, export_digest) DO NOTHING`;
    const [row] = await this.db.prisma.$queryRaw<
      Array<{ id: string; day: string; route_ids: string[]; export_digest: string; stated_by: string; stated_at: Date }>
    >`
      SELECT id, to_char(day, 'YYYY-MM-DD') AS day, route_ids, export_digest, stated_by, stated_at
      FROM usage_export_completion
      WHERE day = ${c.day}::date AND route_ids = ${routeIds}::text[] AND export_digest = ${c.exportDigest}`;
    return {
      id: row.id,
      day: row.day,
      routeIds: row.route_ids,
      exportDigest: row.export_digest,
      statedBy: row.stated_by,
      statedAt: row.stated_at,
    };
  }

  /**
   * Attempts of these routes that started on the UTC day, are waiting for evidence (status
   * `reconciliation_required`, no ledger row) on an open case opened before `openedBefore`, and
   * that no imported export line named. Driven from the open cases (few, indexed by status).
   * `withinGrace` counts those left out only because their case is younger than the cut-off.
   */
  async unresolvedWithoutLine(q: {
    day: string;
    routeIds: readonly string[];
    openedBefore: Date;
  }): Promise<{ eligible: UnresolvedWithoutLine[]; withinGrace: number }> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{ attempt_id: string; case_id: string; reason: string; provider_request_id: string | null; exposure: bigint; opened_at: Date }>
    >`
      SELECT DISTINCT ON (at.id) at.id AS attempt_id, c.id AS case_id, c.reason, at.provider_request_id,
             c.exposure_microusd AS exposure, c.opened_at
      FROM reconciliation_case c
      JOIN attempt at ON at.id = c.attempt_id
      WHERE c.status = 'open' AND c.reason <> ${EXPORT_MISMATCH}
        AND at.status = 'reconciliation_required'
        AND at.route_id = ANY(${[...q.routeIds]}::text[])
        AND at.started_at >= ${q.day}::date AT TIME ZONE 'UTC'
        AND at.started_at < (${q.day}::date + 1) AT TIME ZONE 'UTC'
        AND NOT EXISTS (SELECT 1 FROM ledger_entry le WHERE le.attempt_id = at.id)
        AND NOT EXISTS (SELECT 1 FROM usage_export_line l WHERE l.attempt_id = at.id)
      ORDER BY at.id, c.opened_at, c.id`;
    const eligible: UnresolvedWithoutLine[] = [];
    let withinGrace = 0;
    for (const r of rows) {
      if (r.opened_at >= q.openedBefore) {
        withinGrace += 1;
        continue;
      }
      eligible.push({
        attemptId: r.attempt_id,
        caseId: r.case_id,
        caseReason: r.reason,
        providerRequestId: r.provider_request_id,
        exposureMicrousd: BigInt(r.exposure),
      });
    }
    return { eligible, withinGrace };
  }
}
