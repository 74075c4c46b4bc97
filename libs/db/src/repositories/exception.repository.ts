import { randomUUID } from 'node:crypto';
import type { ExceptionEvent, ExceptionStatus } from '@gateway/domain';
import { Database, Tx, prismaTx } from '../database';
import { OutboxRepository } from './outbox.repository';

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
}

/** What a request for an exception stores; status and times are set by the repository. */
export type NewException = Omit<ExceptionView, 'status' | 'requestedAt' | 'updatedAt'>;

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
      const row = await prismaTx(tx).candidateException.create({
        data: { ...input, status: 'requested', requestedAt: now, updatedAt: now },
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
        data: { status: t.to, updatedAt: t.now },
      });
      if (count === 0) return false;
      await this.audit(tx, { exceptionId: t.id, event: t.event, from: t.from, to: t.to, actor: t.actor, reason: t.reason, now: t.now });
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
      },
    });
    await this.outbox.append(tx, 'policyChanged', e.exceptionId, {
      event_id: randomUUID(),
      timestamp: e.now.toISOString(),
      entity: 'exception',
      entity_id: e.exceptionId,
      change: `${e.event}: ${e.from ?? 'none'} -> ${e.to}`,
      actor: e.actor,
    });
  }
}

function toView(row: Omit<ExceptionView, 'status'> & { status: string }): ExceptionView {
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
  };
}
