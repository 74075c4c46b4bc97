import { Inject, Injectable } from '@nestjs/common';
import { PolicyRepository, PriceRevisionView } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK, IdGenerator, InjectIds } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { RouteStore } from '../../ports';
import { priceJson } from '../views';
import { AddPriceRevisionCommand } from './add-price-revision.command';

/** How far in the past an effective_from may lie (clock skew between operator and server). */
export const PRICE_BACKDATE_TOLERANCE_MS = 5 * 60 * 1000;

/**
 * Adds a price revision. Revisions are never edited: a price change is a new revision effective
 * from now or later. Backdating is refused, because pending reservations and the ledger already
 * name the revision that was in force when they were made.
 */
@Injectable()
export class AddPriceRevision {
  constructor(
    @Inject(PolicyRepository) private readonly routes: RouteStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
  ) {}

  async execute(op: Operator, routeId: string, cmd: AddPriceRevisionCommand) {
    const now = this.clock.now();
    const effectiveFrom = cmd.effective_from ?? now;
    if (effectiveFrom.getTime() < now.getTime() - PRICE_BACKDATE_TOLERANCE_MS) {
      throw new DomainError(
        'invalid_request',
        'effective_from lies in the past; prices cannot be backdated, add a revision effective from now or later',
        'effective_from',
      );
    }
    const route = await this.routes.routeById(routeId);
    if (!route) throw new PolicyError('not_found', `route ${routeId} not found`);
    const revision: Omit<PriceRevisionView, 'createdAt' | 'createdBy' | 'reason'> = {
      id: cmd.id ?? this.ids.next(),
      routeId,
      effectiveFrom,
      inputPerMTokMicrousd: cmd.input_per_mtok_microusd,
      cachedInputPerMTokMicrousd: cmd.cached_input_per_mtok_microusd,
      outputPerMTokMicrousd: cmd.output_per_mtok_microusd,
      reasoningPerMTokMicrousd: cmd.reasoning_per_mtok_microusd,
    };
    const existing = await this.routes.priceById(revision.id);
    if (existing) {
      // A retry that left effective_from to the server cannot repeat "now"; the other values decide.
      if (samePrice(existing, { ...revision, effectiveFrom: cmd.effective_from ?? existing.effectiveFrom })) return priceJson(existing);
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
    await this.routes.putPrice({ ...revision, actor: op.subject, reason: cmd.reason ?? 'price revision' }, now);
    const stored = await this.routes.priceById(revision.id);
    if (!stored) throw new Error(`price revision ${revision.id} vanished after creation`);
    if (!samePrice(stored, revision))
      throw new PolicyError('price_revision_exists', `price revision ${revision.id} already exists with other values`, 'id');
    return priceJson(stored);
  }
}

function samePrice(
  a: Omit<PriceRevisionView, 'createdAt' | 'createdBy' | 'reason'>,
  b: Omit<PriceRevisionView, 'createdAt' | 'createdBy' | 'reason'>,
): boolean {
  return (
    a.routeId === b.routeId &&
    a.effectiveFrom.getTime() === b.effectiveFrom.getTime() &&
    a.inputPerMTokMicrousd === b.inputPerMTokMicrousd &&
    a.cachedInputPerMTokMicrousd === b.cachedInputPerMTokMicrousd &&
    a.outputPerMTokMicrousd === b.outputPerMTokMicrousd &&
    a.reasoningPerMTokMicrousd === b.reasoningPerMTokMicrousd
  );
}
