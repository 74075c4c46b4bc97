/**
 * What an exception is expected to cost, and when approving it needs an explicit override.
 *
 * An exception request carries evidence: the outcome it should improve, the number of requests
 * expected before it expires and a typical input size. The projection prices that volume at the
 * most a request under the exception can reserve — the typical input plus `max_candidates` ×
 * per-candidate ceiling (or the ceiling alone on a `shared`-cap route), through the same
 * `computeReservation` admission uses — so it is an upper bound of the exception's spend, in
 * integer micro-USD.
 */
import { PriceRevision } from './pricing';
import { computeReservation, OutputCapSemantics } from './reservation';
import { assertPositiveInteger } from './validation';

/** The evidence an exception request carries about its volume (the outcome is not priced). */
export interface ExceptionVolume {
  /** requests expected between approval and expiry */
  expectedRequests: number;
  /** input tokens of a typical request */
  typicalInputTokens: number;
  maxCandidates: number;
  perCandidateOutputCeiling: number;
}

/**
 * The outcome an exception is meant to improve. The direction is implied by the numbers: a
 * target above the baseline means the metric should rise, below it that it should fall; equal
 * numbers promise nothing and are refused.
 */
export interface ExceptionOutcome {
  metric: string;
  baseline: number;
  target: number;
}

export type OutcomeDirection = 'increase' | 'decrease';

export function outcomeDirection(o: Pick<ExceptionOutcome, 'baseline' | 'target'>): OutcomeDirection {
  if (!Number.isFinite(o.baseline) || !Number.isFinite(o.target)) throw new RangeError('outcome baseline and target must be finite');
  if (o.target === o.baseline) throw new RangeError('outcome target must differ from its baseline');
  return o.target > o.baseline ? 'increase' : 'decrease';
}

/** expected requests × price(typical input, reserved output for max candidates) in micro-USD. */
export function projectExceptionCostMicrousd(v: ExceptionVolume, semantics: OutputCapSemantics, price: PriceRevision): bigint {
  assertPositiveInteger(v.expectedRequests, 'expectedRequests');
  assertPositiveInteger(v.typicalInputTokens, 'typicalInputTokens');
  const { reservedMicrousd } = computeReservation({
    inputTokensEstimate: v.typicalInputTokens,
    effectiveCandidates: v.maxCandidates,
    perCandidateOutputCeiling: v.perCandidateOutputCeiling,
    semantics,
    price,
  });
  return BigInt(v.expectedRequests) * reservedMicrousd;
}

/** A route an exception may serve, with its price revisions (any order). */
export interface ProjectionRoute<P extends PriceRevision & { effectiveFrom: Date } = PriceRevision & { effectiveFrom: Date }> {
  routeId: string;
  semantics: OutputCapSemantics;
  prices: readonly P[];
}

/** A projection and what it was computed with. */
export interface ExceptionProjection {
  costMicrousd: bigint;
  routeId: string;
  priceRevisionId: string;
  at: Date;
}

/** The revision in force at `at`: the latest `effectiveFrom` not after it (what admission uses). */
export function priceInForceAt<P extends { effectiveFrom: Date }>(prices: readonly P[], at: Date): P | null {
  let best: P | null = null;
  for (const p of prices) {
    if (p.effectiveFrom.getTime() > at.getTime()) continue;
    if (best === null || p.effectiveFrom.getTime() > best.effectiveFrom.getTime()) best = p;
  }
  return best;
}

/**
 * The projection over the routes the exception may use (its route, or every route its workload
 * allows when it names none), at the prices in force at `at`: the most expensive one, since the
 * traffic may go to any of them. Routes without a price in force are skipped (admission cannot
 * serve them); null when none is priced. Ties keep the first route given.
 */
export function projectException(v: ExceptionVolume, routes: readonly ProjectionRoute[], at: Date): ExceptionProjection | null {
  let best: ExceptionProjection | null = null;
  for (const r of routes) {
    const price = priceInForceAt(r.prices, at);
    if (!price) continue;
    const costMicrousd = projectExceptionCostMicrousd(v, r.semantics, price);
    if (best === null || costMicrousd > best.costMicrousd) best = { costMicrousd, routeId: r.routeId, priceRevisionId: price.id, at };
  }
  return best;
}

export type ApprovalProjectionCheck =
  { ok: true; overrideRequired: boolean } | { ok: false; reason: 'projection_exceeds_budget'; projectionMicrousd: bigint | null };

/**
 * Approving needs an explicit override reason when the projection at approval exceeds the
 * budget, or when there is none to compare (no priced route left, or a request filed before
 * exceptions carried evidence): the approver then accepts spend nobody has projected.
 */
export function checkApprovalProjection(input: {
  budgetMicrousd: bigint;
  projectionMicrousd: bigint | null;
  overrideReason: string | null;
}): ApprovalProjectionCheck {
  const overrideRequired = input.projectionMicrousd === null || input.projectionMicrousd > input.budgetMicrousd;
  if (overrideRequired && (input.overrideReason === null || input.overrideReason.trim() === '')) {
    return { ok: false, reason: 'projection_exceeds_budget', projectionMicrousd: input.projectionMicrousd };
  }
  return { ok: true, overrideRequired };
}
