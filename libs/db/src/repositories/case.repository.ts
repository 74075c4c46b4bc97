import { CaseReason, LateEvidence, lateEvidence, ReconciliationRequiredV1, SanitisedFields } from '@gateway/contracts';
import { Database, prismaTx, Tx } from '../database';
import { Prisma } from '../generated/prisma/client';
import { OutboxRepository } from './outbox.repository';

export interface ReconciliationCaseView {
  id: string;
  actionId: string;
  attemptId: string | null;
  workloadId: string | null;
  reason: CaseReason;
  status: 'open' | 'resolved';
  providerRequestId: string | null;
  exposureMicrousd: bigint;
  details: Record<string, unknown>;
  openedAt: Date;
  resolvedAt: Date | null;
  resolvedBy: string | null;
  resolution: string | null;
}

export interface NewCase {
  id: string;
  actionId: string;
  attemptId: string;
  reason: CaseReason;
  providerRequestId: string | null;
  exposureMicrousd: bigint;
  details: Record<string, unknown>;
  openedAt: Date;
}

export interface CaseResolution {
  resolution: string;
  resolvedBy: string;
  resolvedAt: Date;
  /** merged into the case's details (what was settled, released, overrun) */
  details: Record<string, unknown>;
}

export interface CaseQuery {
  status: 'open' | 'resolved' | null;
  workloadId: string | null;
  limit: number;
}

/**
 * Reconciliation cases. `open` is the one case writer (settlement and reconciliation alike): a
 * case opens once per (attempt, reason) (`ON CONFLICT DO NOTHING`), and only when it opened is
 * `reconciliation.required` appended to the outbox, in the same transaction.
 */
export class CaseRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: Pick<OutboxRepository, 'append'>,
  ) {}

  /** false when this attempt already has a case for this reason (nothing written). */
  async open(tx: Tx, c: NewCase, announce: { eventId: string; fields: SanitisedFields }): Promise<boolean> {
    const inserted = await prismaTx(tx).$executeRaw`
      INSERT INTO reconciliation_case (id, action_id, attempt_id, reason, status, provider_request_id, exposure_microusd, details, opened_at)
      VALUES (${c.id}, ${c.actionId}, ${c.attemptId}, ${c.reason}, 'open', ${c.providerRequestId}, ${c.exposureMicrousd},
              ${JSON.stringify(c.details)}::jsonb, ${c.openedAt})
      ON CONFLICT (attempt_id, reason) DO NOTHING`;
    if (inserted !== 1) return false;
    const event: ReconciliationRequiredV1 = {
      ...announce.fields,
      event_id: announce.eventId,
      case_id: c.id,
      reason: c.reason,
      exposure_microusd: c.exposureMicrousd.toString(),
    };
    await this.outbox.append(tx, 'reconciliationRequired', announce.fields.workload_id ?? 'unknown', event);
    return true;
  }

  async lock(tx: Tx, caseId: string): Promise<ReconciliationCaseView | null> {
    const rows = await prismaTx(tx).$queryRaw<CaseRowRaw[]>`
      SELECT c.*, a.workload_id FROM reconciliation_case c LEFT JOIN action a ON a.id = c.action_id
      WHERE c.id = ${caseId} FOR UPDATE OF c`;
    return rows.length === 0 ? null : toCaseView(rows[0]);
  }

  async resolve(tx: Tx, caseId: string, r: CaseResolution): Promise<void> {
    await prismaTx(tx).$executeRaw`
      UPDATE reconciliation_case SET
        status = 'resolved', resolved_at = ${r.resolvedAt}, resolved_by = ${r.resolvedBy}, resolution = ${r.resolution},
        details = details || ${JSON.stringify(r.details)}::jsonb
      WHERE id = ${caseId}`;
  }

  /**
   * Dispatch's evidence for an attempt the orphan sweep cut first: kept on the attempt's open
   * `orphaned_attempt` case for reconciliation to settle from (`withLateEvidence`). The case id, or
   * null when there is no such open case (or it already holds evidence: the first offer stands).
   */
  async offerLateEvidence(attemptId: string, evidence: LateEvidence): Promise<string | null> {
    const rows = await this.db.prisma.$queryRaw<Array<{ id: string }>>`
      UPDATE reconciliation_case SET late_evidence = ${JSON.stringify(evidence)}::jsonb
      WHERE attempt_id = ${attemptId} AND reason = 'orphaned_attempt' AND status = 'open' AND late_evidence IS NULL
      RETURNING id`;
    return rows[0]?.id ?? null;
  }

  /**
   * Open cases holding late evidence, oldest first (the partial index
   * `reconciliation_case_late_evidence_idx` holds only these). Evidence that no longer parses is
   * returned as its parse error, so the caller sets it aside instead of meeting it every sweep.
   */
  async withLateEvidence(limit: number): Promise<Array<{ caseId: string; evidence: LateEvidence | { unreadable: string } }>> {
    const rows = await this.db.prisma.$queryRaw<Array<{ id: string; late_evidence: unknown }>>`
      SELECT id, late_evidence FROM reconciliation_case
      WHERE status = 'open' AND late_evidence IS NOT NULL
      ORDER BY opened_at LIMIT ${limit}`;
    return rows.map((r) => {
      const parsed = lateEvidence.safeParse(r.late_evidence);
      return { caseId: r.id, evidence: parsed.success ? parsed.data : { unreadable: parsed.error.message.slice(0, 500) } };
    });
  }

  /**
   * Moves an open case's late evidence into its details with why it was not used; the case stays
   * open. A case another pass resolved meanwhile (from this very evidence) is left as it is.
   */
  async setLateEvidenceAside(caseId: string, why: string): Promise<void> {
    await this.db.prisma.$executeRaw`
      UPDATE reconciliation_case
      SET details = details || jsonb_build_object('late_evidence_not_used', jsonb_build_object('evidence', late_evidence, 'why', ${why}::text)),
          late_evidence = NULL
      WHERE id = ${caseId} AND status = 'open' AND late_evidence IS NOT NULL`;
  }

  /** Exposure still held by the action's other open cases. */
  async openExposureOnAction(tx: Tx, actionId: string, exceptCaseId: string): Promise<bigint> {
    const agg = await prismaTx(tx).reconciliationCase.aggregate({
      where: { actionId, status: 'open', id: { not: exceptCaseId } },
      _sum: { exposureMicrousd: true },
    });
    return agg._sum.exposureMicrousd ?? 0n;
  }

  async list(q: CaseQuery): Promise<ReconciliationCaseView[]> {
    const status = q.status ? Prisma.sql`AND c.status = ${q.status}` : Prisma.empty;
    const workload = q.workloadId ? Prisma.sql`AND a.workload_id = ${q.workloadId}` : Prisma.empty;
    const rows = await this.db.prisma.$queryRaw<CaseRowRaw[]>`
      SELECT c.*, a.workload_id FROM reconciliation_case c LEFT JOIN action a ON a.id = c.action_id
      WHERE TRUE ${status} ${workload}
      ORDER BY c.opened_at DESC, c.id
      LIMIT ${q.limit}`;
    return rows.map(toCaseView);
  }
}

interface CaseRowRaw {
  id: string;
  action_id: string;
  attempt_id: string | null;
  workload_id: string | null;
  reason: string;
  status: string;
  provider_request_id: string | null;
  exposure_microusd: bigint;
  details: unknown;
  opened_at: Date;
  resolved_at: Date | null;
  resolved_by: string | null;
  resolution: string | null;
}

function toCaseView(r: CaseRowRaw): ReconciliationCaseView {
  return {
    id: r.id,
    actionId: r.action_id,
    attemptId: r.attempt_id,
    workloadId: r.workload_id,
    reason: r.reason as CaseReason,
    status: r.status === 'resolved' ? 'resolved' : 'open',
    providerRequestId: r.provider_request_id,
    exposureMicrousd: BigInt(r.exposure_microusd),
    details: r.details && typeof r.details === 'object' && !Array.isArray(r.details) ? (r.details as Record<string, unknown>) : {},
    openedAt: r.opened_at,
    resolvedAt: r.resolved_at,
    resolvedBy: r.resolved_by,
    resolution: r.resolution,
  };
}
