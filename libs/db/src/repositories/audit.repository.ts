import type { AttemptComparison, ReservationTotals, SourceTotals, UnmatchedExportLine, UnresolvedReservation } from '@gateway/domain';
import { Database } from '../database';
import { Prisma } from '../generated/prisma/client';

/** One `gateway.usage.settled.v1` event as the audit keeps it (no text: ids, money, time). */
export interface SettledEventFact {
  eventId: string;
  attemptId: string | null;
  actionId: string;
  workloadId: string;
  routeId: string;
  costMicrousd: bigint;
  settledAt: Date;
}

/** One imported provider-export line as the audit keeps it (ids, counts, the import's price of it). */
export interface ExportLineFact {
  providerRequestId: string;
  clientRequestId: string | null;
  attemptId: string | null;
  outcome: string;
  inputTokens: number;
  cachedInputTokens: number;
  outputTokensTotal: number;
  reasoningTokens: number;
  exportCostMicrousd: bigint | null;
  lineAt: Date | null;
}

export interface AuditPeriod {
  /** [from, to) as instants */
  from: Date;
  to: Date;
  workloadId?: string;
  /** the most comparison rows (and as many unmatched lines and unresolved reservations) to read */
  limit: number;
}

/**
 * The weekly audit's storage (issue 13): the settled events reconciliation received, the export
 * lines it imported, and the period's totals and disagreeing items read from those, the ledger and
 * the reservations. Each total is grouped per workload × route; nothing is subtracted here.
 */
export class AuditRepository {
  constructor(private readonly db: Database) {}

  /** Inserts the events not stored yet (the event id is the key): one statement; returns how many were new. */
  async recordSettled(facts: readonly SettledEventFact[], receivedAt: Date): Promise<number> {
    if (facts.length === 0) return 0;
    return this.db.prisma.$executeRaw`
      INSERT INTO audit_settled_event (event_id, attempt_id, action_id, workload_id, route_id, cost_microusd, settled_at, received_at)
      SELECT e, a, ac, w, r, c, s, ${receivedAt} FROM unnest(${facts.map((f) => f.eventId)}::text[],
        ${facts.map((f) => f.attemptId)}::text[], ${facts.map((f) => f.actionId)}::text[], ${facts.map((f) => f.workloadId)}::text[],
        ${facts.map((f) => f.routeId)}::text[], ${facts.map((f) => f.costMicrousd)}::bigint[],
        ${facts.map((f) => f.settledAt.toISOString())}::timestamptz[]) AS t(e, a, ac, w, r, c, s)
      ON CONFLICT (event_id) DO NOTHING`;
  }

  /**
   * Stores each line once per provider request id: a line imported again (the same export, or a
   * corrected one) rewrites its row with what the latest import saw, so the audit totals one line
   * per provider request however often the export was imported.
   */
  async recordExportLines(lines: readonly ExportLineFact[], importedAt: Date, importedBy: string): Promise<void> {
    const seen = new Set<string>();
    // the last occurrence of an id wins within one call too (the parser refuses repeats anyway)
    const unique = [...lines].reverse().filter((l) => !seen.has(l.providerRequestId) && seen.add(l.providerRequestId));
    if (unique.length === 0) return;
    unique.sort((a, b) => a.providerRequestId.localeCompare(b.providerRequestId));
    await this.db.prisma.$executeRaw`
      INSERT INTO usage_export_line (provider_request_id, client_request_id, attempt_id, outcome, input_tokens, cached_input_tokens,
        output_tokens_total, reasoning_tokens, export_cost_microusd, line_at, imported_at, imported_by)
      SELECT p, c, a, o, i, ci, ot, rt, x, l, ${importedAt}, ${importedBy} FROM unnest(${unique.map((l) => l.providerRequestId)}::text[],
        ${unique.map((l) => l.clientRequestId)}::text[], ${unique.map((l) => l.attemptId)}::text[], ${unique.map((l) => l.outcome)}::text[],
        ${unique.map((l) => l.inputTokens)}::int[], ${unique.map((l) => l.cachedInputTokens)}::int[],
        ${unique.map((l) => l.outputTokensTotal)}::int[], ${unique.map((l) => l.reasoningTokens)}::int[],
        ${unique.map((l) => l.exportCostMicrousd)}::bigint[], ${unique.map((l) => l.lineAt?.toISOString() ?? null)}::timestamptz[]) AS t(p, c, a, o, i, ci, ot, rt, x, l)
      ON CONFLICT (provider_request_id) DO UPDATE SET client_request_id = EXCLUDED.client_request_id, attempt_id = EXCLUDED.attempt_id,
        outcome = EXCLUDED.outcome, input_tokens = EXCLUDED.input_tokens, cached_input_tokens = EXCLUDED.cached_input_tokens,
        output_tokens_total = EXCLUDED.output_tokens_total, reasoning_tokens = EXCLUDED.reasoning_tokens,
        export_cost_microusd = EXCLUDED.export_cost_microusd, line_at = EXCLUDED.line_at, imported_at = EXCLUDED.imported_at,
        imported_by = EXCLUDED.imported_by`;
  }

  /** Reservations created in the period, per workload × route of their action, by their state now. */
  async reservationTotals(p: AuditPeriod): Promise<ReservationTotals[]> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{
        workload_id: string;
        route_id: string;
        made: bigint;
        pending: bigint;
        settled: bigint;
        released: bigint;
        unresolved: bigint;
        voided: bigint;
        reserved: bigint;
        settled_m: bigint;
        released_m: bigint;
        unresolved_m: bigint;
      }>
    >`
      SELECT a.workload_id, a.route_id, count(*) AS made,
        count(*) FILTER (WHERE r.status = 'pending') AS pending, count(*) FILTER (WHERE r.status = 'settled') AS settled,
        count(*) FILTER (WHERE r.status = 'released') AS released, count(*) FILTER (WHERE r.status = 'unresolved') AS unresolved,
        count(*) FILTER (WHERE r.status = 'voided') AS voided,
        sum(r.reserved_microusd)::bigint AS reserved, sum(r.settled_microusd)::bigint AS settled_m,
        sum(r.released_microusd)::bigint AS released_m, sum(r.unresolved_microusd)::bigint AS unresolved_m
      FROM reservation r JOIN action a ON a.id = r.action_id
      WHERE r.created_at >= ${p.from} AND r.created_at < ${p.to}
        AND (${p.workloadId ?? null}::text IS NULL OR a.workload_id = ${p.workloadId ?? null}::text)
      GROUP BY a.workload_id, a.route_id`;
    return rows.map((r) => ({
      workloadId: r.workload_id,
      routeId: r.route_id,
      made: Number(r.made),
      pending: Number(r.pending),
      settled: Number(r.settled),
      released: Number(r.released),
      unresolved: Number(r.unresolved),
      voided: Number(r.voided),
      reservedMicrousd: r.reserved,
      settledMicrousd: r.settled_m,
      releasedMicrousd: r.released_m,
      unresolvedMicrousd: r.unresolved_m,
    }));
  }

  /** Ledger rows settled in the period, per workload × route of the attempt. */
  async ledgerTotals(p: AuditPeriod): Promise<SourceTotals[]> {
    const rows = await this.db.prisma.$queryRaw<Array<{ workload_id: string; route_id: string; n: bigint; cost: bigint }>>`
      SELECT workload_id, route_id, count(*) AS n, sum(cost_microusd)::bigint AS cost FROM ledger_entry
      WHERE settled_at >= ${p.from} AND settled_at < ${p.to}
        AND (${p.workloadId ?? null}::text IS NULL OR workload_id = ${p.workloadId ?? null}::text)
      GROUP BY workload_id, route_id`;
    return rows.map(sourceTotals);
  }

  /** Settled events received whose `settled_at` is in the period, per workload × route they name. */
  async topicTotals(p: AuditPeriod): Promise<SourceTotals[]> {
    const rows = await this.db.prisma.$queryRaw<Array<{ workload_id: string; route_id: string; n: bigint; cost: bigint }>>`
      SELECT workload_id, route_id, count(*) AS n, sum(cost_microusd)::bigint AS cost FROM audit_settled_event
      WHERE settled_at >= ${p.from} AND settled_at < ${p.to}
        AND (${p.workloadId ?? null}::text IS NULL OR workload_id = ${p.workloadId ?? null}::text)
      GROUP BY workload_id, route_id`;
    return rows.map(sourceTotals);
  }

  /**
   * Imported export lines of the period, per workload × route of their attempt ('' / '' when they
   * matched none; those are left out when a workload is asked for). A line's time is its attempt's
   * ledger row's, so a row and its line fall in one period; else the line's own, else its import's.
   * An unpriced line counts as a line at no cost here and is listed as a difference.
   */
  async exportTotals(p: AuditPeriod): Promise<SourceTotals[]> {
    const rows = await this.db.prisma.$queryRaw<Array<{ workload_id: string; route_id: string; n: bigint; cost: bigint }>>`
      WITH x AS (${exportLinesInPeriod(p)})
      SELECT workload_id, route_id, count(*) AS n, coalesce(sum(export_cost_microusd), 0)::bigint AS cost FROM x
      GROUP BY workload_id, route_id`;
    return rows.map(sourceTotals);
  }

  /**
   * Per attempt named by a ledger row, a settled event or an export line of the period, the three
   * sides, only where they might disagree: no ledger row, not exactly one event, an event's cost
   * other than the row's, or an export line (not exactly one, unpriced, or another cost). Attempts
   * without an export line are compared on ledger and topic only (exports are partial by nature).
   */
  async comparisons(p: AuditPeriod): Promise<{ rows: AttemptComparison[]; truncated: boolean }> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{
        attempt_id: string;
        action_id: string | null;
        workload_id: string;
        route_id: string;
        ledger_entry_id: string | null;
        ledger_cost: bigint | null;
        event_ids: string[] | null;
        event_costs: string[] | null;
        line_ids: string[] | null;
        line_costs: Array<string | null> | null;
      }>
    >`
      WITH l AS (
        SELECT id, attempt_id, action_id, workload_id, route_id, cost_microusd FROM ledger_entry
        WHERE settled_at >= ${p.from} AND settled_at < ${p.to}
          AND (${p.workloadId ?? null}::text IS NULL OR workload_id = ${p.workloadId ?? null}::text)),
      e AS (
        SELECT coalesce(attempt_id, event_id) AS attempt_id, min(action_id) AS action_id, min(workload_id) AS workload_id,
          min(route_id) AS route_id, array_agg(event_id ORDER BY event_id) AS ids,
          array_agg(cost_microusd::text ORDER BY event_id) AS costs, count(*) AS n, sum(cost_microusd) AS total
        FROM audit_settled_event
        WHERE settled_at >= ${p.from} AND settled_at < ${p.to}
          AND (${p.workloadId ?? null}::text IS NULL OR workload_id = ${p.workloadId ?? null}::text)
        GROUP BY coalesce(attempt_id, event_id)),
      xl AS (
        SELECT attempt_id, min(action_id) AS action_id, min(workload_id) AS workload_id, min(route_id) AS route_id,
          array_agg(provider_request_id ORDER BY provider_request_id) AS ids,
          array_agg(export_cost_microusd::text ORDER BY provider_request_id) AS costs, count(*) AS n,
          bool_or(export_cost_microusd IS NULL) AS unpriced, min(export_cost_microusd) AS lo, max(export_cost_microusd) AS hi
        FROM (${exportLinesInPeriod(p)}) x WHERE attempt_id IS NOT NULL GROUP BY attempt_id),
      k AS (SELECT attempt_id FROM l UNION SELECT attempt_id FROM e UNION SELECT attempt_id FROM xl)
      SELECT k.attempt_id, coalesce(l.action_id, e.action_id, xl.action_id) AS action_id,
        coalesce(l.workload_id, e.workload_id, xl.workload_id, '') AS workload_id, coalesce(l.route_id, e.route_id, xl.route_id, '') AS route_id,
        l.id AS ledger_entry_id, l.cost_microusd AS ledger_cost, e.ids AS event_ids, e.costs AS event_costs,
        xl.ids AS line_ids, xl.costs AS line_costs
      FROM k LEFT JOIN l ON l.attempt_id = k.attempt_id LEFT JOIN e ON e.attempt_id = k.attempt_id
        LEFT JOIN xl ON xl.attempt_id = k.attempt_id
      WHERE l.id IS NULL OR e.attempt_id IS NULL OR e.n <> 1 OR e.total <> l.cost_microusd
        OR (xl.attempt_id IS NOT NULL AND (xl.n <> 1 OR xl.unpriced OR xl.lo <> l.cost_microusd OR xl.hi <> l.cost_microusd))
      ORDER BY 3, 4, 1 LIMIT ${p.limit + 1}`;
    return {
      truncated: rows.length > p.limit,
      rows: rows.slice(0, p.limit).map((r) => ({
        attemptId: r.attempt_id,
        actionId: r.action_id,
        workloadId: r.workload_id,
        routeId: r.route_id,
        ledger: r.ledger_entry_id === null ? null : { entryId: r.ledger_entry_id, costMicrousd: r.ledger_cost ?? 0n },
        events: (r.event_ids ?? []).map((id, i) => ({ eventId: id, costMicrousd: BigInt((r.event_costs ?? [])[i] ?? '0') })),
        exportLines: (r.line_ids ?? []).map((id, i) => {
          const c = (r.line_costs ?? [])[i];
          return { providerRequestId: id, costMicrousd: c === null || c === undefined ? null : BigInt(c) };
        }),
      })),
    };
  }

  /** Export lines of the period that matched no attempt (not when a workload is asked for: they name none). */
  async unmatchedExportLines(p: AuditPeriod): Promise<{ rows: UnmatchedExportLine[]; truncated: boolean }> {
    if (p.workloadId !== undefined) return { rows: [], truncated: false };
    const rows = await this.db.prisma.$queryRaw<Array<{ provider_request_id: string; client_request_id: string | null }>>`
      SELECT provider_request_id, client_request_id FROM usage_export_line
      WHERE attempt_id IS NULL AND coalesce(line_at, imported_at) >= ${p.from} AND coalesce(line_at, imported_at) < ${p.to}
      ORDER BY provider_request_id LIMIT ${p.limit + 1}`;
    return {
      truncated: rows.length > p.limit,
      rows: rows.slice(0, p.limit).map((r) => ({ providerRequestId: r.provider_request_id, clientRequestId: r.client_request_id })),
    };
  }

  /** Reservations created in the period that still hold unresolved exposure. */
  async unresolvedReservations(p: AuditPeriod): Promise<{ rows: UnresolvedReservation[]; truncated: boolean }> {
    const rows = await this.db.prisma.$queryRaw<
      Array<{ id: string; action_id: string; workload_id: string; route_id: string; unresolved_microusd: bigint }>
    >`
      SELECT r.id, r.action_id, a.workload_id, a.route_id, r.unresolved_microusd
      FROM reservation r JOIN action a ON a.id = r.action_id
      WHERE r.created_at >= ${p.from} AND r.created_at < ${p.to} AND r.unresolved_microusd > 0
        AND (${p.workloadId ?? null}::text IS NULL OR a.workload_id = ${p.workloadId ?? null}::text)
      ORDER BY a.workload_id, a.route_id, r.id LIMIT ${p.limit + 1}`;
    return {
      truncated: rows.length > p.limit,
      rows: rows.slice(0, p.limit).map((r) => ({
        reservationId: r.id,
        actionId: r.action_id,
        workloadId: r.workload_id,
        routeId: r.route_id,
        unresolvedMicrousd: r.unresolved_microusd,
      })),
    };
  }
}

function sourceTotals(r: { workload_id: string; route_id: string; n: bigint; cost: bigint }): SourceTotals {
  return { workloadId: r.workload_id, routeId: r.route_id, items: Number(r.n), costMicrousd: r.cost };
}

/** The export lines of the period with the workload × route of their attempt (a fragment both reads share). */
function exportLinesInPeriod(p: AuditPeriod) {
  return Prisma.sql`
    SELECT x.provider_request_id, x.attempt_id, x.export_cost_microusd, coalesce(le.action_id, at.action_id) AS action_id,
      coalesce(le.workload_id, ac.workload_id, '') AS workload_id, coalesce(le.route_id, at.route_id, '') AS route_id
    FROM usage_export_line x LEFT JOIN ledger_entry le ON le.attempt_id = x.attempt_id
      LEFT JOIN attempt at ON at.id = x.attempt_id LEFT JOIN action ac ON ac.id = at.action_id
    WHERE coalesce(le.settled_at, x.line_at, x.imported_at) >= ${p.from} AND coalesce(le.settled_at, x.line_at, x.imported_at) < ${p.to}
      AND (${p.workloadId ?? null}::text IS NULL OR coalesce(le.workload_id, ac.workload_id) = ${p.workloadId ?? null}::text)`;
}
