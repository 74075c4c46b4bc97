import type { ChangeRequestKind, ChangeRequestStatus } from '@gateway/domain';
import { Database, Tx, prismaTx } from '../database';

/** A requested change that raises spend, and its decision (the audit trail of four-eyes changes). */
export interface ChangeRequestView {
  id: string;
  kind: ChangeRequestKind;
  targetId: string;
  /** The request body as the requester sent it; re-validated and applied on approval. */
  proposed: Record<string, unknown>;
  raises: string[];
  status: ChangeRequestStatus;
  requestedBy: string;
  reason: string;
  requestedAt: Date;
  decidedBy: string | null;
  decidedAt: Date | null;
  decisionReason: string | null;
}

export type NewChangeRequest = Pick<ChangeRequestView, 'id' | 'kind' | 'targetId' | 'proposed' | 'raises' | 'requestedBy' | 'reason'>;

export interface ChangeDecision {
  id: string;
  status: 'approved' | 'rejected';
  decidedBy: string;
  reason: string;
  now: Date;
}

export type DecideResult =
  | { ok: true; request: ChangeRequestView }
  | { ok: false; reason: 'not_found' | 'not_pending' | 'self_approval'; request: ChangeRequestView | null };

/** Change requests: written pending, decided once; an approval applies the change in the same transaction. */
export class ChangeRequestRepository {
  constructor(private readonly db: Database) {}

  async create(input: NewChangeRequest, now: Date): Promise<ChangeRequestView> {
    const row = await this.db.prisma.changeRequest.create({
      data: { ...input, proposed: input.proposed as object, status: 'pending', requestedAt: now },
    });
    return toView(row);
  }

  async findById(id: string): Promise<ChangeRequestView | null> {
    const row = await this.db.prisma.changeRequest.findUnique({ where: { id } });
    return row ? toView(row) : null;
  }

  async list(filter: { status?: ChangeRequestStatus; limit: number }): Promise<ChangeRequestView[]> {
    const rows = await this.db.prisma.changeRequest.findMany({
      where: filter.status ? { status: filter.status } : {},
      orderBy: [{ requestedAt: 'desc' }, { id: 'asc' }],
      take: filter.limit,
    });
    return rows.map(toView);
  }

  /**
   * Decides a pending request once (the row is locked, so two approvers cannot both win) and, for
   * an approval, runs `apply` in the same transaction: the change and its approval commit together
   * or not at all. The requester can never decide their own request.
   */
  async decide(d: ChangeDecision, apply: (tx: Tx, request: ChangeRequestView) => Promise<void>): Promise<DecideResult> {
    return this.db.transaction(async (tx) => {
      const locked = await prismaTx(tx).$queryRaw<Array<{ id: string }>>`
        SELECT id FROM change_request WHERE id = ${d.id} FOR UPDATE`;
      if (locked.length === 0) return { ok: false as const, reason: 'not_found' as const, request: null };
      const current = toView(await prismaTx(tx).changeRequest.findUniqueOrThrow({ where: { id: d.id } }));
      if (current.status !== 'pending') return { ok: false as const, reason: 'not_pending' as const, request: current };
      if (current.requestedBy === d.decidedBy) return { ok: false as const, reason: 'self_approval' as const, request: current };
      if (d.status === 'approved') await apply(tx, current);
      const row = await prismaTx(tx).changeRequest.update({
        where: { id: d.id },
        data: { status: d.status, decidedBy: d.decidedBy, decidedAt: d.now, decisionReason: d.reason },
      });
      return { ok: true as const, request: toView(row) };
    });
  }
}

function toView(
  r: Omit<ChangeRequestView, 'kind' | 'status' | 'proposed'> & { kind: string; status: string; proposed: unknown },
): ChangeRequestView {
  return {
    ...r,
    kind: r.kind as ChangeRequestKind,
    status: r.status as ChangeRequestStatus,
    proposed: (r.proposed ?? {}) as Record<string, unknown>,
  };
}
