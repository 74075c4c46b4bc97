import type { ActionState, AttemptState } from '@gateway/domain';
import { Database, Tx } from '../database';
import { Prisma } from '../generated/prisma/client';
import type { LedgerRow } from './settlement.repository';
import { applyHoldMovement, HoldMovement, lockReservationOf, ReservationView } from './reservation-holds';

export type { HoldMovement };

/** The action fields reconciliation reads: ids, counts, deadlines, never content. */
export interface ReconciliationActionView {
  id: string;
  workloadId: string;
  environment: string;
  routeId: string;
  routeVersion: number;
  modelAlias: string;
  streamMode: 'none' | 'sse';
  requestedCandidates: number | null;
  effectiveCandidates: number;
  status: ActionState;
  deadlineAt: Date;
  dispatchDeadlineAt: Date;
}

export interface ReconciliationAttemptView {
  id: string;
  actionId: string;
  attemptNo: number;
  role: 'primary' | 'hedge' | 'retry' | 'fallback';
  routeId: string;
  routeVersion: number;
  status: AttemptState;
  providerRequestId: string | null;
  returnedCandidates: number | null;
  startedAt: Date;
}

export interface ReconciliationCaseView {
  id: string;
  actionId: string;
  attemptId: string | null;
  workloadId: string | null;
  reason: string;
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
  reason: string;
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

/**
 * A movement of one reservation between its buckets, mirrored on every budget account it holds.
 * Released money leaves the account (pending or unresolved shrink without anything growing).
 */
export interface BudgetAccountView {
  id: string;
  scope: string;
  scopeId: string;
  periodStart: Date;
  budgetMicrousd: bigint;
  pendingMicrousd: bigint;
  unresolvedMicrousd: bigint;
  settledMicrousd: bigint;
  updatedAt: Date;
}

export interface CaseQuery {
  status: 'open' | 'resolved' | null;
  workloadId: string | null;
  limit: number;
}

/** The operations reconciliation's use cases need; the class below implements them on Postgres. */
export interface ReconciliationStore {
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  admittedPastDispatchDeadline(cutoff: Date, limit: number): Promise<string[]>;
  actionsWithInFlightAttemptsPastDeadline(cutoff: Date, limit: number): Promise<string[]>;
  lockUndispatchedExpiredAction(tx: Tx, actionId: string, cutoff: Date): Promise<ReconciliationActionView | null>;
  lockOrphanedAttempts(tx: Tx, actionId: string, cutoff: Date): Promise<ReconciliationAttemptView[]>;
  lockAction(tx: Tx, actionId: string): Promise<ReconciliationActionView | null>;
  lockReservation(tx: Tx, actionId: string): Promise<ReservationView | null>;
  hasDispatchClaim(tx: Tx, actionId: string): Promise<boolean>;
  attempt(tx: Tx, attemptId: string): Promise<ReconciliationAttemptView | null>;
  attemptsAwaitingSettlement(tx: Tx, actionId: string): Promise<number>;
  setActionStatus(tx: Tx, actionId: string, status: ActionState, reason: string, now: Date): Promise<void>;
  setAttemptStatus(tx: Tx, attemptId: string, status: AttemptState, reason: string, now: Date, evidence?: AttemptEvidence): Promise<void>;
  releaseInFlightSlot(tx: Tx, workloadId: string): Promise<void>;
  moveHold(tx: Tx, r: ReservationView, m: HoldMovement): Promise<void>;
  openCase(tx: Tx, c: NewCase): Promise<boolean>;
  lockCase(tx: Tx, caseId: string): Promise<ReconciliationCaseView | null>;
  resolveCase(tx: Tx, caseId: string, r: CaseResolution): Promise<void>;
  openExposureOnAction(tx: Tx, actionId: string, exceptCaseId: string): Promise<bigint>;
  insertLedger(tx: Tx, row: LedgerRow): Promise<boolean>;
  listCases(q: CaseQuery): Promise<ReconciliationCaseView[]>;
  budgetAccounts(workloadId: string | null, limit: number): Promise<BudgetAccountView[]>;
}

/** What a late piece of evidence records on the attempt row. */
export interface AttemptEvidence {
  usageSource: 'provider_export' | 'operator';
  providerRequestId?: string | null;
  inputTokens?: number;
  cachedInputTokens?: number;
  outputTokensTotal?: number;
  reasoningTokens?: number;
}

const NO_WINDOW = new Date(0);

/**
 * Reconciliation's reads and writes: the sweeper's locked look-ups (actions whose command can no
 * longer be dispatched, attempts whose dispatcher died), case handling, exposure per budget
 * account. Every write takes the caller's transaction, so one use case commits the state change,
 * the budget movement and its outbox event together.
 */
export class ReconciliationRepository implements ReconciliationStore {
  constructor(private readonly db: Database) {}

  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Candidates only; the decision is re-checked under a row lock. */
  async admittedPastDispatchDeadline(cutoff: Date, limit: number): Promise<string[]> {
    const rows = await this.db.prisma.action.findMany({
      where: { status: 'admitted', dispatchDeadlineAt: { lt: cutoff } },
      select: { id: true },
      orderBy: { dispatchDeadlineAt: 'asc' },
      take: limit,
    });
    return rows.map((r) => r.id);
  }

  /** Candidates only; the decision is re-checked under a row lock. */
  async actionsWithInFlightAttemptsPastDeadline(cutoff: Date, limit: number): Promise<string[]> {
    const rows = await this.db.prisma.$queryRaw<Array<{ action_id: string }>>`
      SELECT DISTINCT t.action_id FROM attempt t JOIN action a ON a.id = t.action_id
      WHERE t.status = 'in_flight' AND a.deadline_at < ${cutoff}
      LIMIT ${limit}`;
    return rows.map((r) => r.action_id);
  }

  /**
   * Locks the action when it is still admitted and past its dispatch deadline. A row another
   * sweeper (or a dispatcher) holds is skipped: whoever holds it decides, and the next sweep
   * re-checks.
   */
  async lockUndispatchedExpiredAction(tx: Tx, actionId: string, cutoff: Date): Promise<ReconciliationActionView | null> {
    const rows = await tx.$queryRaw<Array<{ id: string }>>`
      SELECT id FROM action
      WHERE id = ${actionId} AND status = 'admitted' AND dispatch_deadline_at < ${cutoff}
      FOR UPDATE SKIP LOCKED`;
    if (rows.length === 0) return null;
    return this.readAction(tx, actionId);
  }

  /** Locks the action's attempts still in flight past the action deadline; skips rows being written. */
  async lockOrphanedAttempts(tx: Tx, actionId: string, cutoff: Date): Promise<ReconciliationAttemptView[]> {
    const rows = await tx.$queryRaw<Array<{ id: string }>>`
      SELECT t.id FROM attempt t JOIN action a ON a.id = t.action_id
      WHERE t.action_id = ${actionId} AND t.status = 'in_flight' AND a.deadline_at < ${cutoff}
      ORDER BY t.attempt_no
      FOR UPDATE OF t SKIP LOCKED`;
    if (rows.length === 0) return [];
    const attempts = await tx.attempt.findMany({ where: { id: { in: rows.map((r) => r.id) } }, orderBy: { attemptNo: 'asc' } });
    return attempts.map(toAttemptView);
  }

  async lockAction(tx: Tx, actionId: string): Promise<ReconciliationActionView | null> {
    const rows = await tx.$queryRaw<Array<{ id: string }>>`SELECT id FROM action WHERE id = ${actionId} FOR UPDATE`;
    if (rows.length === 0) return null;
    return this.readAction(tx, actionId);
  }

  lockReservation(tx: Tx, actionId: string): Promise<ReservationView | null> {
    return lockReservationOf(tx, actionId);
  }

  async hasDispatchClaim(tx: Tx, actionId: string): Promise<boolean> {
    return (await tx.dispatchClaim.count({ where: { actionId } })) > 0;
  }

  async attempt(tx: Tx, attemptId: string): Promise<ReconciliationAttemptView | null> {
    const a = await tx.attempt.findUnique({ where: { id: attemptId } });
    return a ? toAttemptView(a) : null;
  }

  /** Attempts that may still bring usage through settlement (not settled, not under reconciliation). */
  async attemptsAwaitingSettlement(tx: Tx, actionId: string): Promise<number> {
    return tx.attempt.count({ where: { actionId, status: { notIn: ['settled', 'reconciliation_required'] } } });
  }

  async setActionStatus(tx: Tx, actionId: string, status: ActionState, reason: string, now: Date): Promise<void> {
    await tx.action.update({ where: { id: actionId }, data: { status, statusReason: reason, updatedAt: now } });
  }

  async setAttemptStatus(
    tx: Tx,
    attemptId: string,
    status: AttemptState,
    reason: string,
    now: Date,
    evidence?: AttemptEvidence,
  ): Promise<void> {
    await tx.attempt.update({
      where: { id: attemptId },
      data: {
        status,
        statusReason: reason,
        updatedAt: now,
        ...(evidence
          ? {
              usageSource: evidence.usageSource,
              ...(evidence.providerRequestId ? { providerRequestId: evidence.providerRequestId } : {}),
              ...(evidence.inputTokens !== undefined ? { inputTokens: evidence.inputTokens } : {}),
              ...(evidence.cachedInputTokens !== undefined ? { cachedInputTokens: evidence.cachedInputTokens } : {}),
              ...(evidence.outputTokensTotal !== undefined ? { outputTokensTotal: evidence.outputTokensTotal } : {}),
              ...(evidence.reasoningTokens !== undefined ? { reasoningTokens: evidence.reasoningTokens } : {}),
            }
          : {}),
      },
    });
  }

  /** The workload's in-flight counter (admission takes one slot per action), never below zero. */
  async releaseInFlightSlot(tx: Tx, workloadId: string): Promise<void> {
    await tx.$executeRaw`
      UPDATE quota_counter SET in_flight = GREATEST(in_flight - 1, 0), updated_at = now()
      WHERE scope = 'workload' AND scope_id = ${workloadId} AND window_start = ${NO_WINDOW}`;
  }

  moveHold(tx: Tx, r: ReservationView, m: HoldMovement): Promise<void> {
    return applyHoldMovement(tx, r, m);
  }

  /** false when this attempt already has a case for this reason (a case opens once). */
  async openCase(tx: Tx, c: NewCase): Promise<boolean> {
    const inserted = await tx.$executeRaw`
      INSERT INTO reconciliation_case (id, action_id, attempt_id, reason, status, provider_request_id, exposure_microusd, details, opened_at)
      VALUES (${c.id}, ${c.actionId}, ${c.attemptId}, ${c.reason}, 'open', ${c.providerRequestId}, ${c.exposureMicrousd},
              ${JSON.stringify(c.details)}::jsonb, ${c.openedAt})
      ON CONFLICT (attempt_id, reason) DO NOTHING`;
    return inserted === 1;
  }

  async lockCase(tx: Tx, caseId: string): Promise<ReconciliationCaseView | null> {
    const rows = await tx.$queryRaw<CaseRowRaw[]>`
      SELECT c.*, a.workload_id FROM reconciliation_case c LEFT JOIN action a ON a.id = c.action_id
      WHERE c.id = ${caseId} FOR UPDATE OF c`;
    return rows.length === 0 ? null : toCaseView(rows[0]);
  }

  async resolveCase(tx: Tx, caseId: string, r: CaseResolution): Promise<void> {
    await tx.$executeRaw`
      UPDATE reconciliation_case SET
        status = 'resolved', resolved_at = ${r.resolvedAt}, resolved_by = ${r.resolvedBy}, resolution = ${r.resolution},
        details = details || ${JSON.stringify(r.details)}::jsonb
      WHERE id = ${caseId}`;
  }

  /** Exposure still held by the action's other open cases. */
  async openExposureOnAction(tx: Tx, actionId: string, exceptCaseId: string): Promise<bigint> {
    const agg = await tx.reconciliationCase.aggregate({
      where: { actionId, status: 'open', id: { not: exceptCaseId } },
      _sum: { exposureMicrousd: true },
    });
    return agg._sum.exposureMicrousd ?? 0n;
  }

  /** false when this attempt already has its ledger row (an attempt settles once). */
  async insertLedger(tx: Tx, row: LedgerRow): Promise<boolean> {
    const existing = await tx.ledgerEntry.findUnique({ where: { attemptId: row.attemptId }, select: { id: true } });
    if (existing) return false;
    await tx.ledgerEntry.create({ data: row });
    return true;
  }

  async listCases(q: CaseQuery): Promise<ReconciliationCaseView[]> {
    const status = q.status ? Prisma.sql`AND c.status = ${q.status}` : Prisma.empty;
    const workload = q.workloadId ? Prisma.sql`AND a.workload_id = ${q.workloadId}` : Prisma.empty;
    const rows = await this.db.prisma.$queryRaw<CaseRowRaw[]>`
      SELECT c.*, a.workload_id FROM reconciliation_case c LEFT JOIN action a ON a.id = c.action_id
      WHERE TRUE ${status} ${workload}
      ORDER BY c.opened_at DESC, c.id
      LIMIT ${q.limit}`;
    return rows.map(toCaseView);
  }

  /** The workload's own accounts and those of its exceptions; every account when no workload is given. */
  async budgetAccounts(workloadId: string | null, limit: number): Promise<BudgetAccountView[]> {
    const where = workloadId
      ? Prisma.sql`WHERE (b.scope = 'workload' AND b.scope_id = ${workloadId})
          OR (b.scope = 'exception' AND b.scope_id IN (SELECT id FROM candidate_exception WHERE workload_id = ${workloadId}))`
      : Prisma.empty;
    const rows = await this.db.prisma.$queryRaw<
      Array<{
        id: string;
        scope: string;
        scope_id: string;
        period_start: Date;
        budget_microusd: bigint;
        pending_microusd: bigint;
        unresolved_microusd: bigint;
        settled_microusd: bigint;
        updated_at: Date;
      }>
    >`
      SELECT b.id, b.scope, b.scope_id, b.period_start, b.budget_microusd, b.pending_microusd,
             b.unresolved_microusd, b.settled_microusd, b.updated_at
      FROM budget_account b ${where}
      ORDER BY b.scope DESC, b.scope_id, b.period_start DESC
      LIMIT ${limit}`;
    return rows.map((b) => ({
      id: b.id,
      scope: b.scope,
      scopeId: b.scope_id,
      periodStart: b.period_start,
      budgetMicrousd: BigInt(b.budget_microusd),
      pendingMicrousd: BigInt(b.pending_microusd),
      unresolvedMicrousd: BigInt(b.unresolved_microusd),
      settledMicrousd: BigInt(b.settled_microusd),
      updatedAt: b.updated_at,
    }));
  }

  private async readAction(tx: Tx, actionId: string): Promise<ReconciliationActionView> {
    const a = await tx.action.findUniqueOrThrow({ where: { id: actionId } });
    return {
      id: a.id,
      workloadId: a.workloadId,
      environment: a.environment,
      routeId: a.routeId,
      routeVersion: a.routeVersion,
      modelAlias: a.modelAlias,
      streamMode: a.streamMode === 'sse' ? 'sse' : 'none',
      requestedCandidates: a.requestedCandidates,
      effectiveCandidates: a.effectiveCandidates,
      status: a.status as ActionState,
      deadlineAt: a.deadlineAt,
      dispatchDeadlineAt: a.dispatchDeadlineAt,
    };
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
    reason: r.reason,
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

function toAttemptView(a: {
  id: string;
  actionId: string;
  attemptNo: number;
  role: string;
  routeId: string;
  routeVersion: number;
  status: string;
  providerRequestId: string | null;
  returnedCandidates: number | null;
  startedAt: Date;
}): ReconciliationAttemptView {
  return {
    id: a.id,
    actionId: a.actionId,
    attemptNo: a.attemptNo,
    role: a.role as ReconciliationAttemptView['role'],
    routeId: a.routeId,
    routeVersion: a.routeVersion,
    status: a.status as AttemptState,
    providerRequestId: a.providerRequestId,
    returnedCandidates: a.returnedCandidates,
    startedAt: a.startedAt,
  };
}
