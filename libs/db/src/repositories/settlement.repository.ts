import { attemptMachine, InvalidTransitionError, transitionGuard } from '@gateway/domain';
import { Tx } from '../database';
import { applyHoldMovement, HoldMovement, lockReservationOf, ReservationView } from './reservation-holds';

export type { ReservationView };

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

export type ReservationMovement = HoldMovement;

/** Settlement's writes; the settle use case runs them inside one idempotent transaction. */
export class SettlementRepository {
  lockReservation(tx: Tx, actionId: string): Promise<ReservationView | null> {
    return lockReservationOf(tx, actionId);
  }

  /** false when this attempt already has its ledger row (it settles once). */
  async insertLedger(tx: Tx, row: LedgerRow): Promise<boolean> {
    // One statement: the unique attempt_id makes a second settlement of the same attempt a no-op.
    const { count } = await tx.ledgerEntry.createMany({ data: [row], skipDuplicates: true });
    return count === 1;
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

  /** Compare-and-set on the states libs/domain allows for `event`; throws when the attempt is elsewhere. */
  async transitionAttempt(tx: Tx, attemptId: string, event: 'settle' | 'require_reconciliation', reason: string, now: Date): Promise<void> {
    const guard = transitionGuard(attemptMachine, event);
    const updated = await tx.$executeRaw`
      UPDATE attempt SET status = ${guard.to}, status_reason = ${reason}, updated_at = ${now}
      WHERE id = ${attemptId} AND status = ANY(${guard.from}::text[])`;
    if (updated !== 1) throw new InvalidTransitionError('attempt', `${attemptId} not in ${guard.from.join('|')}`, event);
  }

  /** Attempts of the action that have not reached a resolved state (settled or under reconciliation). */
  async unresolvedAttemptCount(tx: Tx, actionId: string): Promise<number> {
    const [row] = await tx.$queryRaw<Array<{ n: bigint }>>`
      SELECT count(*) AS n FROM attempt WHERE action_id = ${actionId} AND status NOT IN ('settled', 'reconciliation_required')`;
    return Number(row.n);
  }

  moveReservation(tx: Tx, r: ReservationView, m: ReservationMovement): Promise<void> {
    return applyHoldMovement(tx, r, m);
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
