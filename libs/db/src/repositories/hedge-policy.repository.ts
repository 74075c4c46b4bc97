import type { HedgePolicyRevision } from '@gateway/domain';
import { Database, Tx, prismaTx } from '../database';
import { hedgePolicyFromRow, hedgePolicyToRow } from './hedge-policy.row';
import { OutboxRepository } from './outbox.repository';

/** A revision to append: the repository numbers it and stamps it. */
export type NewHedgePolicyRevision = Omit<HedgePolicyRevision, 'revision' | 'createdAt'>;

export type AppendHedgePolicyResult = { ok: true; revision: HedgePolicyRevision } | { ok: false; reason: 'workload_not_found' };

/**
 * Hedge policy revisions (issue 10): immutable rows, one numbering per (workload, route) scope.
 * The revision in force on a route is that route's latest, else the workload-wide latest.
 */
export class HedgePolicyRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  /**
   * Appends the next revision of its scope with its `policy.changed` event. The workload row is
   * locked so concurrent writers of one workload number their revisions one after the other (the
   * unique index cannot, for the workload-wide scope, whose route_id is NULL).
   */
  async append(input: NewHedgePolicyRevision, now: Date, outer?: Tx): Promise<AppendHedgePolicyResult> {
    const run = async (tx: Tx): Promise<AppendHedgePolicyResult> => {
      const locked = await prismaTx(tx).$queryRaw<Array<{ id: string }>>`
        SELECT id FROM workload WHERE id = ${input.workloadId} FOR UPDATE`;
      if (locked.length === 0) return { ok: false, reason: 'workload_not_found' };
      const last = await prismaTx(tx).hedgePolicyRevision.findFirst({
        where: { workloadId: input.workloadId, routeId: input.routeId },
        orderBy: { revision: 'desc' },
        select: { revision: true },
      });
      const revision: HedgePolicyRevision = { ...input, revision: (last?.revision ?? 0) + 1, createdAt: now };
      await prismaTx(tx).hedgePolicyRevision.create({ data: hedgePolicyToRow(revision) });
      await this.outbox.policyChanged(tx, {
        entity: 'hedge_policy',
        entityId: hedgeScopeId(input.workloadId, input.routeId),
        change: `revision ${revision.revision}: ${input.reason}`,
        actor: input.createdBy,
        now,
      });
      return { ok: true, revision };
    };
    return outer ? run(outer) : this.db.transaction(run);
  }

  /**
   * The policy dispatch applies to an action of `workloadId` on `routeId`: the route's own latest
   * revision, else the workload-wide latest; null when neither exists (no extra attempts).
   * One indexed query.
   */
  async hedgePolicyFor(workloadId: string, routeId: string | null): Promise<HedgePolicyRevision | null> {
    const row = await this.db.prisma.hedgePolicyRevision.findFirst({
      where: { workloadId, OR: routeId === null ? [{ routeId: null }] : [{ routeId }, { routeId: null }] },
      orderBy: [{ routeId: { sort: 'asc', nulls: 'last' } }, { revision: 'desc' }],
    });
    return row ? hedgePolicyFromRow(row) : null;
  }

  /** One revision by id (an experiment's hedged cohort runs under the revision it names); null when unknown. */
  async revisionById(id: string): Promise<HedgePolicyRevision | null> {
    const row = await this.db.prisma.hedgePolicyRevision.findUnique({ where: { id } });
    return row ? hedgePolicyFromRow(row) : null;
  }

  /** Every revision of the workload, workload-wide scope first, then by route, newest first in each scope. */
  async history(workloadId: string): Promise<HedgePolicyRevision[]> {
    const rows = await this.db.prisma.hedgePolicyRevision.findMany({
      where: { workloadId },
      orderBy: [{ routeId: { sort: 'asc', nulls: 'first' } }, { revision: 'desc' }],
    });
    return rows.map(hedgePolicyFromRow);
  }
}

/** How `policy.changed` and change requests name a scope: `<workload>` or `<workload>/<route>`. */
export function hedgeScopeId(workloadId: string, routeId: string | null): string {
  return routeId === null ? workloadId : `${workloadId}/${routeId}`;
}
