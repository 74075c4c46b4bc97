import { Inject, Injectable } from '@nestjs/common';
import { ChangeRequestRepository, PolicyRepository, PriceRevisionView, RouteView, Tx } from '@gateway/db';
import { priceRevisionFromWire, priceRevisionToWire } from '@gateway/contracts';
import { DomainError, priceSpendRaises } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ChangeRequestStore, RouteStore } from '../../ports';
import { requestChange } from '../change-requests';
import { priceJson } from '../views';
import { AddPriceRevisionCommand } from './add-price-revision.command';

/** How far in the past an effective_from may lie (clock skew between operator and server). */
export const PRICE_BACKDATE_TOLERANCE_MS = 5 * 60 * 1000;

/**
 * Adds a price revision. Revisions are never edited: a price change is a new revision effective
 * from now or later. Backdating is refused, because pending reservations and the ledger already
 * name the revision that was in force when they were made. A revision that lowers any rate below
 * the one in force (or a route's first price) becomes a change request for a second operator.
 */
@Injectable()
export class AddPriceRevision {
  constructor(
    @Inject(PolicyRepository) private readonly routes: RouteStore,
    @Inject(ChangeRequestRepository) private readonly changes: ChangeRequestStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(op: Operator, routeId: string, cmd: AddPriceRevisionCommand) {
    const now = this.clock.now();
    const { route, revision, existing } = await this.prepare(routeId, cmd, now);
    if (existing) return priceJson(existing);
    const inForce = route.prices.find((p) => p.effectiveFrom.getTime() <= revision.effectiveFrom.getTime()) ?? route.prices.at(-1) ?? null;
    const raises = priceSpendRaises(inForce, revision);
    if (raises.length > 0) {
      const command = { ...cmd, id: revision.id };
      return requestChange(
        this.changes,
        this.ids,
        op,
        { kind: 'price_revision', targetId: routeId, command, raises, reason: cmd.reason ?? 'price revision' },
        now,
      );
    }
    await this.routes.putPrice({ ...revision, actor: op.subject, reason: cmd.reason ?? 'price revision' }, now);
    const stored = await this.routes.priceById(revision.id);
    if (!stored) throw new Error(`price revision ${revision.id} vanished after creation`);
    if (!samePrice(stored, revision))
      throw new PolicyError('price_revision_exists', `price revision ${revision.id} already exists with other values`, 'id');
    return priceJson(stored);
  }

  /** The approved revision: validated again and written inside the approving transaction. */
  async applyApproved(actor: string, reason: string, routeId: string, cmd: AddPriceRevisionCommand, now: Date, tx: Tx): Promise<void> {
    const { revision, existing } = await this.prepare(routeId, cmd, now);
    if (!existing) await this.routes.putPrice({ ...revision, actor, reason }, now, tx);
  }

  /** Checks the revision (no backdating, immutable ids, one revision per instant); `existing` is an identical retry. */
  private async prepare(routeId: string, cmd: AddPriceRevisionCommand, now: Date) {
    const effectiveFrom = cmd.effective_from ?? now;
    if (effectiveFrom.getTime() < now.getTime() - PRICE_BACKDATE_TOLERANCE_MS) {
      throw new DomainError(
        'invalid_request',
        'effective_from lies in the past; prices cannot be backdated, add a revision effective from now or later',
        'effective_from',
      );
    }
    const route: RouteView | null = await this.routes.routeById(routeId);
    if (!route) throw new PolicyError('not_found', `route ${routeId} not found`);
    const revision: NewRevision = { ...priceRevisionFromWire(cmd.id ?? this.ids.next(), cmd), routeId, effectiveFrom };
    const existing = await this.routes.priceById(revision.id);
    if (existing) {
      // A retry that left effective_from to the server cannot repeat "now"; the other values decide.
      if (samePrice(existing, { ...revision, effectiveFrom: cmd.effective_from ?? existing.effectiveFrom }))
        return { route, revision, existing };
      throw new PolicyError(
        'price_revision_exists',
        `price revision ${revision.id} already exists with other values; revisions are immutable`,
        'id',
      );
    }
    if (route.prices.some((p) => p.effectiveFrom.getTime() === effectiveFrom.getTime())) {
      throw new PolicyError(
        'price_revision_exists',
        `route ${routeId} already has a revision effective from ${effectiveFrom.toISOString()}; choose another effective_from`,
        'effective_from',
      );
    }
    return { route, revision, existing: null };
  }
}

type NewRevision = Omit<PriceRevisionView, 'createdAt' | 'createdBy' | 'reason'>;

/** Same route, instant and prices (the structure compared in its wire form, keys in one order). */
function samePrice(a: NewRevision, b: NewRevision): boolean {
  return (
    a.routeId === b.routeId &&
    a.effectiveFrom.getTime() === b.effectiveFrom.getTime() &&
    canonicalJson(priceRevisionToWire(a)) === canonicalJson(priceRevisionToWire(b))
  );
}

function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x !== null && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x,
  );
}
