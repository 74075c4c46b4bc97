import { randomUUID } from 'node:crypto';
import { projectException } from '@gateway/domain';
import type {
  ExceptionEvent,
  ExceptionOutcome,
  ExceptionProjection,
  ExceptionStatus,
  ExceptionVolume,
  ProjectionRoute,
} from '@gateway/domain';
import { Database, Tx, prismaTx } from '../database';
import { OutboxRepository } from './outbox.repository';
import type { PolicyRepository, RouteView } from './policy.repository';

/** A candidate exception as stored (status is the stored one; readers apply effectiveExceptionStatus). */
export interface ExceptionView {
  id: string;
  workloadId: string;
  routeId: string | null;
  owner: string;
  maxCandidates: number;
  perCandidateOutputCeiling: number;
  budgetMicrousd: bigint;
  allowsStreaming: boolean;
  /** several candidates at temperature 0 / top-k 1 are admitted (issue 16 §3) */
  allowsDeterministicSampling: boolean;
  expiresAt: Date;
  justification: string;
  status: ExceptionStatus;
  requestedBy: string;
  requestedAt: Date;
  updatedAt: Date;
  /** evidence: null on requests filed before exceptions had to carry it */
  outcome: ExceptionOutcome | null;
  expectedRequests: number | null;
  typicalInputTokens: number | null;
  /** projected cost when requested (`at` = requestedAt); null when nothing was priced then */
  requestProjection: ExceptionProjection | null;
  /** recomputed when approved; null before approval or when nothing was priced then */
  approvalProjection: ExceptionProjection | null;
  /** the approver's reason to accept the projection (required when it exceeds the budget) */
  overrideReason: string | null;
}

/** One row of the audit trail: who moved the exception from what to what, when and why. */
export interface ExceptionEventView {
  id: string;
  exceptionId: string;
  event: 'request' | ExceptionEvent;
  fromStatus: ExceptionStatus | null;
  toStatus: ExceptionStatus;
  actor: string;
  reason: string;
  at: Date;
  /** on an approval: the approver's override reason, if any */
  overrideReason: string | null;
}

/** What a request for an exception stores; status and times are set by the repository. */
export type NewException = Omit<ExceptionView, 'status' | 'requestedAt' | 'updatedAt' | 'approvalProjection' | 'overrideReason'>;

/**
 * A compare-and-set move: it applies only while the stored status is still `from` and the expiry
 * is on the expected side of `now`, so two approvers (or an approver and the expiry sweep) cannot
 * both win.
 */
export interface ExceptionTransition {
  id: string;
  from: ExceptionStatus;
  to: ExceptionStatus;
  event: ExceptionEvent;
  actor: string;
  reason: string;
  now: Date;
  expiry: 'unexpired' | 'expired';
  /** on an approval: the projection recomputed for it and the approver's override reason */
  approval?: { projection: ExceptionProjection | null; overrideReason: string | null };
}

/**
 * Candidate exceptions and their audit trail. Every write (request and each transition) inserts
 * a candidate_exception_event row and a policyChanged outbox row in the same transaction.
 */
export class ExceptionRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  async create(input: NewException, now: Date): Promise<ExceptionView> {
    return this.db.transaction(async (tx) => {
      const { outcome, requestProjection, ...fields } = input;
      const row = await prismaTx(tx).candidateException.create({
        data: {
          ...fields,
          outcomeMetric: outcome?.metric ?? null,
          outcomeBaseline: outcome?.baseline ?? null,
          outcomeTarget: outcome?.target ?? null,
          requestProjectionMicrousd: requestProjection?.costMicrousd ?? null,
          requestProjectionRouteId: requestProjection?.routeId ?? null,
          requestProjectionPriceRevisionId: requestProjection?.priceRevisionId ?? null,
          status: 'requested',
          requestedAt: now,
          updatedAt: now,
        },
      });
      await this.audit(tx, {
        exceptionId: input.id,
        event: 'request',
        from: null,
        to: 'requested',
        actor: input.requestedBy,
        reason: input.justification,
        now,
      });
      return toView(row);
    });
  }

  async findById(id: string): Promise<ExceptionView | null> {
    const row = await this.db.prisma.candidateException.findUnique({ where: { id } });
    return row ? toView(row) : null;
  }

  async eventsOf(exceptionId: string): Promise<ExceptionEventView[]> {
    const rows = await this.db.prisma.candidateExceptionEvent.findMany({ where: { exceptionId }, orderBy: [{ at: 'asc' }, { id: 'asc' }] });
    return rows.map((e) => ({
      id: e.id,
      exceptionId: e.exceptionId,
      event: e.event as ExceptionEventView['event'],
      fromStatus: e.fromStatus as ExceptionStatus | null,
      toStatus: e.toStatus as ExceptionStatus,
      actor: e.actor,
      reason: e.reason,
      at: e.at,
      overrideReason: e.overrideReason,
    }));
  }

  /** Newest first. */
  async list(filter: { workloadId: string | null; limit: number }): Promise<ExceptionView[]> {
    const rows = await this.db.prisma.candidateException.findMany({
      where: filter.workloadId ? { workloadId: filter.workloadId } : {},
      orderBy: [{ requestedAt: 'desc' }, { id: 'asc' }],
      take: filter.limit,
    });
    return rows.map(toView);
  }

  /** Returns false when the exception was not in `from` (or not on the expected side of its expiry). */
  async transition(t: ExceptionTransition): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const { count } = await prismaTx(tx).candidateException.updateMany({
        where: { id: t.id, status: t.from, expiresAt: t.expiry === 'unexpired' ? { gt: t.now } : { lte: t.now } },
        data: { status: t.to, updatedAt: t.now, ...(t.approval ? approvalColumns(t.approval, t.now) : {}) },
      });
      if (count === 0) return false;
      await this.audit(tx, {
        exceptionId: t.id,
        event: t.event,
        from: t.from,
        to: t.to,
        actor: t.actor,
        reason: t.reason,
        now: t.now,
        overrideReason: t.approval?.overrideReason ?? null,
      });
      return true;
    });
  }

  /** Stored as requested/active but past expiry: what the expiry sweep records as expired. */
  async dueForExpiry(now: Date, limit: number): Promise<ExceptionView[]> {
    const rows = await this.db.prisma.candidateException.findMany({
      where: { status: { in: ['requested', 'active'] }, expiresAt: { lte: now } },
      orderBy: { expiresAt: 'asc' },
      take: limit,
    });
    return rows.map(toView);
  }

  private async audit(
    tx: Tx,
    e: {
      exceptionId: string;
      event: ExceptionEventView['event'];
      from: ExceptionStatus | null;
      to: ExceptionStatus;
      actor: string;
      reason: string;
      now: Date;
      overrideReason?: string | null;
    },
  ): Promise<void> {
    await prismaTx(tx).candidateExceptionEvent.create({
      data: {
        id: randomUUID(),
        exceptionId: e.exceptionId,
        event: e.event,
        fromStatus: e.from,
        toStatus: e.to,
        actor: e.actor,
        reason: e.reason,
        at: e.now,
        overrideReason: e.overrideReason ?? null,
      },
    });
    await this.outbox.policyChanged(tx, {
      entity: 'exception',
      entityId: e.exceptionId,
      change: `${e.event}: ${e.from ?? 'none'} -> ${e.to}`,
      actor: e.actor,
      now: e.now,
    });
  }
}

function approvalColumns(a: NonNullable<ExceptionTransition['approval']>, now: Date) {
  return {
    approvalProjectionMicrousd: a.projection?.costMicrousd ?? null,
    approvalProjectionRouteId: a.projection?.routeId ?? null,
    approvalProjectionPriceRevisionId: a.projection?.priceRevisionId ?? null,
    approvalProjectedAt: now,
    overrideReason: a.overrideReason,
  };
}

type ExceptionRow = Omit<ExceptionView, 'status' | 'outcome' | 'requestProjection' | 'approvalProjection'> & {
  status: string;
  outcomeMetric: string | null;
  outcomeBaseline: number | null;
  outcomeTarget: number | null;
  requestProjectionMicrousd: bigint | null;
  requestProjectionRouteId: string | null;
  requestProjectionPriceRevisionId: string | null;
  approvalProjectionMicrousd: bigint | null;
  approvalProjectionRouteId: string | null;
  approvalProjectionPriceRevisionId: string | null;
  approvalProjectedAt: Date | null;
};

function projection(
  costMicrousd: bigint | null,
  routeId: string | null,
  priceRevisionId: string | null,
  at: Date | null,
): ExceptionProjection | null {
  return costMicrousd === null || routeId === null || priceRevisionId === null || at === null
    ? null
    : { costMicrousd, routeId, priceRevisionId, at };
}

function toView(row: ExceptionRow): ExceptionView {
  return {
    id: row.id,
    workloadId: row.workloadId,
    routeId: row.routeId,
    owner: row.owner,
    maxCandidates: row.maxCandidates,
    perCandidateOutputCeiling: row.perCandidateOutputCeiling,
    budgetMicrousd: row.budgetMicrousd,
    allowsStreaming: row.allowsStreaming,
    allowsDeterministicSampling: row.allowsDeterministicSampling,
    expiresAt: row.expiresAt,
    justification: row.justification,
    status: row.status as ExceptionStatus,
    requestedBy: row.requestedBy,
    requestedAt: row.requestedAt,
    updatedAt: row.updatedAt,
    outcome:
      row.outcomeMetric !== null && row.outcomeBaseline !== null && row.outcomeTarget !== null
        ? { metric: row.outcomeMetric, baseline: row.outcomeBaseline, target: row.outcomeTarget }
        : null,
    expectedRequests: row.expectedRequests,
    typicalInputTokens: row.typicalInputTokens,
    requestProjection: projection(
      row.requestProjectionMicrousd,
      row.requestProjectionRouteId,
      row.requestProjectionPriceRevisionId,
      row.requestedAt,
    ),
    approvalProjection: projection(
      row.approvalProjectionMicrousd,
      row.approvalProjectionRouteId,
      row.approvalProjectionPriceRevisionId,
      row.approvalProjectedAt,
    ),
    overrideReason: row.overrideReason,
  };
}

/**
 * The projected cost of an exception at `at` (libs/domain `projectException`) over the routes it
 * may serve: its route, or — when it names none — every route its workload allows (the most
 * expensive counts). A route's output-cap semantics are its current contract's (`shared` only
 * when declared so; undocumented counts as `per_candidate`, the worst case). Null when none of
 * those routes has a price in force. One home for the policy API and the demo seed.
 */
export async function projectExceptionOver(
  routes: Pick<PolicyRepository, 'routeById' | 'routeIdByAlias'>,
  scope: { routeId: string | null; allowedAliases: readonly string[] },
  volume: ExceptionVolume,
  at: Date,
): Promise<ExceptionProjection | null> {
  const ids =
    scope.routeId !== null
      ? [scope.routeId]
      : (await Promise.all(scope.allowedAliases.map((alias) => routes.routeIdByAlias(alias)))).filter((id): id is string => id !== null);
  const views = (await Promise.all([...new Set(ids)].map((id) => routes.routeById(id)))).filter((r): r is RouteView => r !== null);
  return projectException(volume, views.map(projectionRoute), at);
}

function projectionRoute(r: RouteView): ProjectionRoute {
  const current = r.versions.find((v) => v.version === r.currentVersion);
  return { routeId: r.id, semantics: current?.outputCapSemantics === 'shared' ? 'shared' : 'per_candidate', prices: r.prices };
}
