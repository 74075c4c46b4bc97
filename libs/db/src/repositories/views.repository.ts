import type { CaseReason } from '@gateway/contracts';
import type { ReservationState } from '@gateway/domain';
import { Database } from '../database';

export interface ActionStatusView {
  actionId: string;
  workloadId: string;
  status: string;
  statusReason: string;
  modelAlias: string;
  routeId: string;
  routeVersion: number;
  streamMode: string;
  requestedCandidates: number | null;
  effectiveCandidates: number;
  returnedCandidates: number | null;
  outputCeiling: number;
  createdAt: Date;
  requestId: string | null;
  outcomes: OutcomesView;
  reservation: {
    status: ReservationState;
    reservedOutputTokens: number;
    reservedMicrousd: bigint;
    settledMicrousd: bigint;
    unresolvedMicrousd: bigint;
    releasedMicrousd: bigint;
    priceRevisionId: string;
  } | null;
  attempts: Array<{
    attemptId: string;
    attemptNo: number;
    role: string;
    routeId: string;
    routeVersion: number;
    /** this attempt's own hold (null: recorded before issue 10) */
    holdMicrousd: bigint | null;
    /** its answer was chosen by the action's compare-and-set */
    winner: boolean;
    /** ended before the action's deadline, after it, or cancelled (a loser); null: no answer, or not ended */
    deadlineOutcome: string | null;
    policyRevisionId: string | null;
    status: string;
    statusReason: string;
    providerRequestId: string | null;
    effectiveCandidates: number;
    returnedCandidates: number | null;
    candidateOutcomes: unknown;
    promptBlockReason: string | null;
    inputTokens: number | null;
    outputTokensTotal: number | null;
    usageSource: string | null;
    costMicrousd: bigint | null;
    outcomes: OutcomesView;
  }>;
  openCases: Array<{ caseId: string; reason: CaseReason; exposureMicrousd: bigint }>;
  /** the attempt whose answer the client got (null: none chosen) */
  winnerAttemptId: string | null;
}

/** Delivery, acceptance and money, recorded apart (null until the deciding service has written it). */
export interface OutcomesView {
  deliveryOutcome: string | null;
  acceptanceVerdict: string | null;
  acceptanceReason: string | null;
  financialState: string | null;
}

const outcomesOf = (r: OutcomesView): OutcomesView => ({
  deliveryOutcome: r.deliveryOutcome,
  acceptanceVerdict: r.acceptanceVerdict,
  acceptanceReason: r.acceptanceReason,
  financialState: r.financialState,
});

/** Sanitised read models for status APIs. */
export class ViewsRepository {
  constructor(private readonly db: Database) {}

  async action(actionId: string): Promise<ActionStatusView | null> {
    // One snapshot: the action, its reservation, ledger rows and cases never disagree in a view.
    const [a, ledger, cases] = await this.db.prisma.$transaction(
      [
        this.db.prisma.action.findUnique({
          where: { id: actionId },
          include: { reservation: true, attempts: { orderBy: { attemptNo: 'asc' } } },
        }),
        this.db.prisma.ledgerEntry.findMany({ where: { actionId } }),
        this.db.prisma.reconciliationCase.findMany({ where: { actionId, status: 'open' } }),
      ],
      { isolationLevel: 'RepeatableRead' },
    );
    if (!a) return null;
    const cost = new Map(ledger.map((l) => [l.attemptId, l.costMicrousd]));
    return {
      actionId: a.id,
      workloadId: a.workloadId,
      status: a.status,
      statusReason: a.statusReason,
      modelAlias: a.modelAlias,
      routeId: a.routeId,
      routeVersion: a.routeVersion,
      streamMode: a.streamMode,
      requestedCandidates: a.requestedCandidates,
      effectiveCandidates: a.effectiveCandidates,
      returnedCandidates: a.returnedCandidates,
      outputCeiling: a.outputCeiling,
      createdAt: a.createdAt,
      requestId: a.requestId,
      // the action's money stands where its reservation does (none: refused before any hold)
      outcomes: outcomesOf({ ...a, financialState: a.reservation?.status ?? null }),
      reservation: a.reservation && {
        status: a.reservation.status as ReservationState,
        reservedOutputTokens: a.reservation.reservedOutputTokens,
        reservedMicrousd: a.reservation.reservedMicrousd,
        settledMicrousd: a.reservation.settledMicrousd,
        unresolvedMicrousd: a.reservation.unresolvedMicrousd,
        releasedMicrousd: a.reservation.releasedMicrousd,
        priceRevisionId: a.reservation.priceRevisionId,
      },
      attempts: a.attempts.map((t) => ({
        attemptId: t.id,
        attemptNo: t.attemptNo,
        role: t.role,
        routeId: t.routeId,
        routeVersion: t.routeVersion,
        holdMicrousd: t.holdMicrousd,
        winner: t.winner,
        deadlineOutcome: t.deadlineOutcome,
        policyRevisionId: t.hedgePolicyRevisionId,
        status: t.status,
        statusReason: t.statusReason,
        providerRequestId: t.providerRequestId,
        effectiveCandidates: t.effectiveCandidates,
        returnedCandidates: t.returnedCandidates,
        candidateOutcomes: t.candidateOutcomes,
        promptBlockReason: t.promptBlockReason,
        inputTokens: t.inputTokens,
        outputTokensTotal: t.outputTokensTotal,
        usageSource: t.usageSource,
        costMicrousd: cost.get(t.id) ?? null,
        outcomes: outcomesOf(t),
      })),
      openCases: cases.map((c) => ({ caseId: c.id, reason: c.reason as CaseReason, exposureMicrousd: c.exposureMicrousd })),
      winnerAttemptId: a.winnerAttemptId,
    };
  }
}
