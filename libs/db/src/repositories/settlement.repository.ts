import type { ReservationState } from '@gateway/domain';
import { Tx } from '../database';

export interface ReservationView {
  id: string;
  actionId: string;
  status: ReservationState;
  reservedMicrousd: bigint;
  settledMicrousd: bigint;
  unresolvedMicrousd: bigint;
  releasedMicrousd: bigint;
  priceRevisionId: string;
  accountIds: string[];
}

export interface LedgerRow {
  id: string;
  attemptId: string;
  actionId: string;
  attemptRole: string;
  workloadId: string;
  environment: string;
  routeId: string;
  routeVersion: number;
  modelAlias: string;
  providerRequestId: string | null;
  requestedCandidates: number | null;
  effectiveCandidates: number;
  returnedCandidates: number;
  inputTokens: number;
  cachedInputTokens: number;
  outputTokensTotal: number;
  reasoningTokens: number;
  totalTokens: number;
  streamMode: string;
  usageSource: string;
  priceRevisionId: string;
  inputMicrousd: bigint;
  cachedInputMicrousd: bigint;
  outputMicrousd: bigint;
  reasoningMicrousd: bigint;
  costMicrousd: bigint;
  settledAt: Date;
}

export interface CaseRow {
  id: string;
  actionId: string;
  attemptId: string | null;
  reason: string;
  providerRequestId: string | null;
  exposureMicrousd: bigint;
  details: Record<string, unknown>;
  openedAt: Date;
}

/** A movement of one reservation between its buckets, mirrored on its budget accounts. */
export interface ReservationMovement {
  fromPendingMicrousd: bigint;
  toSettledMicrousd: bigint;
  toUnresolvedMicrousd: bigint;
  fromUnresolvedMicrousd: bigint;
  toReleasedMicrousd: bigint;
  status: ReservationState;
  reason: string;
  now: Date;
}

/** Settlement's writes; the settle use case runs them inside one idempotent transaction. */
export class SettlementRepository {
  async lockReservation(tx: Tx, actionId: string): Promise<ReservationView | null> {
    const rows = await tx.$queryRaw<Array<{ id: string }>>`
      SELECT id FROM reservation WHERE action_id = ${actionId} FOR UPDATE`;
    if (rows.length === 0) return null;
    const r = await tx.reservation.findUniqueOrThrow({ where: { actionId } });
    return {
      id: r.id,
      actionId: r.actionId,
      status: r.status as ReservationState,
      reservedMicrousd: r.reservedMicrousd,
      settledMicrousd: r.settledMicrousd,
      unresolvedMicrousd: r.unresolvedMicrousd,
      releasedMicrousd: r.releasedMicrousd,
      priceRevisionId: r.priceRevisionId,
      accountIds: [r.workloadAccountId, ...(r.exceptionAccountId ? [r.exceptionAccountId] : [])],
    };
  }

  /** false when this attempt already has its ledger row (it settles once). */
  async insertLedger(tx: Tx, row: LedgerRow): Promise<boolean> {
    const existing = await tx.ledgerEntry.findUnique({ where: { attemptId: row.attemptId }, select: { id: true } });
    if (existing) return false;
    await tx.ledgerEntry.create({ data: row });
    return true;
  }

  async openCase(tx: Tx, c: CaseRow): Promise<boolean> {
    const existing = await tx.reconciliationCase.findFirst({
      where: { attemptId: c.attemptId, reason: c.reason },
      select: { id: true },
    });
    if (existing) return false;
    await tx.reconciliationCase.create({
      data: { ...c, details: c.details as object, status: 'open' },
    });
    return true;
  }

  async setAttemptStatus(tx: Tx, attemptId: string, status: string, reason: string, now: Date): Promise<void> {
    await tx.attempt.update({ where: { id: attemptId }, data: { status, statusReason: reason, updatedAt: now } });
  }

  async attemptStatus(tx: Tx, attemptId: string): Promise<string | null> {
    const a = await tx.attempt.findUnique({ where: { id: attemptId }, select: { status: true } });
    return a?.status ?? null;
  }

  /** Attempts of the action that have not reached a resolved state (settled or under reconciliation). */
  async unresolvedAttemptCount(tx: Tx, actionId: string): Promise<number> {
    return tx.attempt.count({
      where: { actionId, status: { notIn: ['settled', 'reconciliation_required'] } },
    });
  }

  async moveReservation(tx: Tx, r: ReservationView, m: ReservationMovement): Promise<void> {
    await tx.reservation.update({
      where: { id: r.id },
      data: {
        settledMicrousd: { increment: m.toSettledMicrousd },
        unresolvedMicrousd: { increment: m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd },
        releasedMicrousd: { increment: m.toReleasedMicrousd },
        status: m.status,
        statusReason: m.reason,
        updatedAt: m.now,
      },
    });
    for (const accountId of r.accountIds) {
      await tx.$executeRaw`
        UPDATE budget_account SET
          pending_microusd = pending_microusd - ${m.fromPendingMicrousd},
          settled_microusd = settled_microusd + ${m.toSettledMicrousd},
          unresolved_microusd = unresolved_microusd + ${m.toUnresolvedMicrousd} - ${m.fromUnresolvedMicrousd},
          updated_at = now()
        WHERE id = ${accountId}`;
    }
  }
}

/** Finance's read side of the ledger. */
export class LedgerQueryRepository {
  constructor(private readonly db: import('../database').Database) {}

  async list(q: { workloadId: string | null; actionId: string | null; limit: number }): Promise<LedgerRow[]> {
    return this.db.prisma.ledgerEntry.findMany({
      where: { ...(q.workloadId ? { workloadId: q.workloadId } : {}), ...(q.actionId ? { actionId: q.actionId } : {}) },
      orderBy: { settledAt: 'desc' },
      take: q.limit,
    });
  }
}
