/**
 * Which policy changes raise what the gateway may spend (issue 8 §5). Such a change is not applied
 * by the operator who asks for it: it becomes a change request that a second operator approves
 * (four-eyes, like candidate exceptions). Lowering a limit stays one step. Each function returns
 * the reasons a change raises spend; an empty list means it may be applied at once.
 */
import type { HedgeDelay, HedgePolicy } from './hedging';
import { ContextTier, OPTIONAL_RATES, PerCallFee, PriceRevision, RateSet } from './pricing';

export type ChangeRequestKind = 'workload_policy' | 'price_revision' | 'route_contract' | 'scope_limit' | 'hedge_policy' | 'experiment';
export type ChangeRequestStatus = 'pending' | 'approved' | 'rejected';

export interface WorkloadSpendLimits {
  defaultMaxCandidates: number;
  perCandidateOutputCeiling: number;
  budgetMicrousd: bigint;
  budgetPeriod: string;
  maxInFlight: number;
  tokensPerMinute: number | null;
  fallbackChain: string[];
  /** fan-out per workflow id (absent on callers that predate it: no change) */
  maxCallsPerWorkflow?: number | null;
  workflowWindowSeconds?: number;
}

/** A new workload (before = null) raises spend from nothing: its budget needs a second pair of eyes. */
export function workloadSpendRaises(before: WorkloadSpendLimits | null, after: WorkloadSpendLimits): string[] {
  if (before === null) return ['new workload'];
  const raises: string[] = [];
  if (after.defaultMaxCandidates > before.defaultMaxCandidates) raises.push('default_max_candidates up');
  if (after.perCandidateOutputCeiling > before.perCandidateOutputCeiling) raises.push('per_candidate_output_ceiling up');
  if (after.budgetMicrousd > before.budgetMicrousd) raises.push('budget up');
  // The same amount per day is more than per month.
  if (before.budgetPeriod === 'month' && after.budgetPeriod === 'day') raises.push('budget period shortened');
  if (after.maxInFlight > before.maxInFlight) raises.push('max_in_flight up');
  if (before.tokensPerMinute !== null && (after.tokensPerMinute === null || after.tokensPerMinute > before.tokensPerMinute)) {
    raises.push(after.tokensPerMinute === null ? 'tokens_per_minute removed' : 'tokens_per_minute up');
  }
  if (after.fallbackChain.some((r) => !before.fallbackChain.includes(r))) raises.push('fallback chain additions');
  raises.push(...fanOutRaises(before, after));
  return raises;
}

/** More calls per workflow, no limit at all, or the same calls in a shorter window. */
function fanOutRaises(before: WorkloadSpendLimits, after: WorkloadSpendLimits): string[] {
  const was = before.maxCallsPerWorkflow ?? null;
  if (was === null || after.maxCallsPerWorkflow === undefined) return [];
  const now = after.maxCallsPerWorkflow;
  if (now === null) return ['max_calls_per_workflow removed'];
  const raises: string[] = [];
  if (now > was) raises.push('max_calls_per_workflow up');
  if (
    after.workflowWindowSeconds !== undefined &&
    before.workflowWindowSeconds !== undefined &&
    after.workflowWindowSeconds < before.workflowWindowSeconds
  )
    raises.push('workflow_window_seconds shortened');
  return raises;
}

/** The prices of a revision, whatever else (id, route, dates) the caller's object carries. */
export type PriceRates = Omit<PriceRevision, 'id'>;

const RATE_KEYS = [
  'inputPerMTokMicrousd',
  'cachedInputPerMTokMicrousd',
  'outputPerMTokMicrousd',
  'reasoningPerMTokMicrousd',
  ...OPTIONAL_RATES,
] as const satisfies readonly (keyof RateSet)[];

/** Rates that, once priced, admit a feature the revision refused before. */
const FEATURE_RATES: Partial<Record<keyof RateSet, string>> = {
  audioOutputPerMTokMicrousd: 'audio_output',
  imageOutputPerMTokMicrousd: 'image_output',
};

/** What a token of category `k` costs under `r`: cache-write and audio input fall back to the input rate. */
function effectiveRate(r: RateSet, k: keyof RateSet): bigint | undefined {
  const own = r[k];
  if (own !== undefined) return own;
  return k === 'cacheWritePerMTokMicrousd' || k === 'audioInputPerMTokMicrousd' ? r.inputPerMTokMicrousd : undefined;
}

function rateSetRaises(before: RateSet, after: RateSet, at: string): string[] {
  const raises: string[] = [];
  for (const k of RATE_KEYS) {
    // Unpriced on both sides, the category follows the input rate, already compared.
    if (before[k] === undefined && after[k] === undefined) continue;
    const was = effectiveRate(before, k);
    const now = effectiveRate(after, k);
    if (was !== undefined && now !== undefined && now < was) raises.push(`${at}${k} lowered`);
    const feature = FEATURE_RATES[k];
    if (feature && was === undefined && now !== undefined) raises.push(`${at}${k} added (admits ${feature})`);
  }
  return raises;
}

/** The rates a request just above `threshold` input tokens pays: the highest tier at or below it, else the base. */
function ratesAt(base: RateSet, tiers: readonly ContextTier[], threshold: number): RateSet {
  let rates = base;
  for (const t of tiers) if (t.aboveInputTokens <= threshold) rates = t.rates;
  return rates;
}

/**
 * Context tiers matched by threshold. A tier in force that is gone, or whose threshold moved up,
 * bills the requests above it at the rates below it: that is a lowering in itself. Every proposed
 * tier is compared with what the requests above its threshold pay today.
 */
function contextTierRaises(
  before: { rates: RateSet; tiers: readonly ContextTier[] },
  after: { rates: RateSet; tiers: readonly ContextTier[] },
  at: string,
): string[] {
  const raises: string[] = [];
  const wasAt = new Set(before.tiers.map((t) => t.aboveInputTokens));
  const nowAt = new Set(after.tiers.map((t) => t.aboveInputTokens));
  before.tiers.forEach((tier, i) => {
    const t = tier.aboveInputTokens;
    if (nowAt.has(t)) return;
    const prevWas = before.tiers[i - 1]?.aboveInputTokens ?? 0;
    const nextWas = before.tiers[i + 1]?.aboveInputTokens ?? Infinity;
    const moved = (lo: number, hi: number) =>
      after.tiers.find((x) => x.aboveInputTokens > lo && x.aboveInputTokens < hi && !wasAt.has(x.aboveInputTokens));
    const up = moved(t, nextWas);
    const down = moved(prevWas, t);
    if (up) raises.push(`${at}context tier above ${t} input tokens: threshold raised to ${up.aboveInputTokens}`);
    else if (!down) raises.push(`${at}context tier above ${t} input tokens removed`);
    // A threshold moved down: the requests above the old one now pay the moved tier's rates.
    else
      raises.push(
        ...rateSetRaises(tier.rates, down.rates, `${at}context tier above ${t} input tokens (now above ${down.aboveInputTokens}): `),
      );
  });
  for (const tier of after.tiers) {
    const t = tier.aboveInputTokens;
    raises.push(...rateSetRaises(ratesAt(before.rates, before.tiers, t), tier.rates, `${at}context tier above ${t} input tokens: `));
  }
  return raises;
}

function feeRaises(before: readonly PerCallFee[], after: readonly PerCallFee[]): string[] {
  const raises: string[] = [];
  for (const was of before) {
    const now = after.find((f) => f.feature === was.feature);
    if (!now) {
      raises.push(`per-call fee ${was.feature} removed`);
      continue;
    }
    if (now.feeMicrousd < was.feeMicrousd) raises.push(`per-call fee ${was.feature} lowered`);
    if (now.reservedCallsPerRequest < was.reservedCallsPerRequest)
      raises.push(`per-call fee ${was.feature}: reserved calls per request lowered`);
  }
  for (const now of after) {
    if (!before.some((f) => f.feature === now.feature)) raises.push(`per-call fee ${now.feature} added (admits ${now.feature})`);
  }
  return raises;
}

/**
 * A revision makes spend cheaper to book (and needs a second operator) when any rate it shares
 * with the revision in force is lower (base, each context tier by threshold, each service tier by
 * name), a context or service tier is removed or a threshold raised, a fee is lowered, removed or
 * reserves fewer calls, it prices something refused before (a service tier, a fee, audio or image
 * output), or context tiers stop applying to output (`input_only`). A route's first price too.
 */
export function priceSpendRaises(inForce: PriceRates | null, proposed: PriceRates): string[] {
  if (inForce === null) return ['first price of the route'];
  const raises = rateSetRaises(inForce, proposed, '');
  raises.push(
    ...contextTierRaises(
      { rates: inForce, tiers: inForce.contextTiers ?? [] },
      { rates: proposed, tiers: proposed.contextTiers ?? [] },
      '',
    ),
  );
  const wasRule = inForce.contextTierRule ?? 'whole_request';
  const nowRule = proposed.contextTierRule ?? 'whole_request';
  if (wasRule === 'whole_request' && nowRule === 'input_only')
    raises.push('context_tier_rule changed to input_only (output no longer billed at the tier)');
  const wasTiers = inForce.serviceTiers ?? {};
  const nowTiers = proposed.serviceTiers ?? {};
  for (const [name, was] of Object.entries(wasTiers)) {
    const now = Object.hasOwn(nowTiers, name) ? nowTiers[name] : undefined;
    if (!now) {
      raises.push(`service tier ${name} removed`);
      continue;
    }
    const at = `service tier ${name}: `;
    raises.push(...rateSetRaises(was.rates, now.rates, at));
    raises.push(
      ...contextTierRaises({ rates: was.rates, tiers: was.contextTiers ?? [] }, { rates: now.rates, tiers: now.contextTiers ?? [] }, at),
    );
  }
  for (const name of Object.keys(nowTiers)) {
    if (!Object.hasOwn(wasTiers, name)) raises.push(`service tier ${name} added (admits service_tier ${name})`);
  }
  raises.push(...feeRaises(inForce.perCallFees ?? [], proposed.perCallFees ?? []));
  return raises;
}

export interface ContractDestination {
  providerKind: string;
  upstreamBaseUrl: string;
  upstreamModel: string;
  /** the upstream credential's name (undefined: unchanged); another key may bill another account */
  credentialRef?: string | null;
  /** price-changing features the route admits (undefined: unchanged) */
  pricedFeatures?: readonly string[];
  /** per-media input minimums the reservation counts (undefined: unchanged) */
  imageInputTokens?: number;
  audioInputTokens?: number;
  videoInputTokens?: number;
  documentInputTokens?: number;
}

const MEDIA_MINIMUMS = ['imageInputTokens', 'audioInputTokens', 'videoInputTokens', 'documentInputTokens'] as const;

/**
 * A contract that sends traffic somewhere else (host, provider or model) or with another
 * credential (another key may bill another account or project), admits a feature that
 * changes the provider's price, or reserves less per media item is a spend decision.
 */
export function contractSpendRaises(current: ContractDestination, proposed: ContractDestination): string[] {
  const raises: string[] = [];
  if (proposed.upstreamBaseUrl !== current.upstreamBaseUrl) raises.push('upstream_base_url changed');
  if (proposed.providerKind !== current.providerKind) raises.push('provider_kind changed');
  if (proposed.upstreamModel !== current.upstreamModel) raises.push('upstream_model changed');
  if (proposed.credentialRef !== undefined && (proposed.credentialRef ?? null) !== (current.credentialRef ?? null)) {
    raises.push('credential_ref changed');
  }
  for (const f of proposed.pricedFeatures ?? []) {
    if (!(current.pricedFeatures ?? []).includes(f)) raises.push(`priced feature ${f} admitted`);
  }
  for (const k of MEDIA_MINIMUMS) {
    const now = current[k];
    const next = proposed[k];
    if (next !== undefined && now !== undefined && next < now) raises.push(`${k} lowered`);
  }
  return raises;
}

/** A hedge policy's settings, whatever else (id, scope, audit) the caller's object carries. */
export type HedgeSettings = Omit<HedgePolicy, 'revisionId' | 'owner'>;

/** The earliest and latest a hedge timer can fire under `d`. */
function delayRange(d: HedgeDelay): { min: number; max: number } {
  return d.kind === 'fixed' ? { min: d.ms, max: d.ms } : { min: d.floorMs, max: d.ceilingMs };
}

/**
 * A hedge policy change raises spend when it allows more extra attempts or money, or lets them
 * happen sooner or in worse conditions: enabling; more hedges, attempts or retries; more extra
 * spend; a larger experiment allowance (or a new one, or a shorter period) or approved premium; an
 * earlier timer (fixed delay, quantile floor or ceiling, a lower quantile, fewer samples before the
 * quantile applies); a lower spend floor; higher route error / in-flight ceilings; less remaining
 * time needed; a larger overload bucket or refill; a new transient failure class; new read-only
 * tools. No policy in force (`current` null) is the gateway's default: no extra attempt at all.
 */
export function hedgePolicySpendRaises(current: HedgeSettings | null, proposed: HedgeSettings): string[] {
  if (current === null) {
    const extra = (proposed.enabled && proposed.maxHedges > 0) || proposed.retry.maxRetries > 0 || proposed.allowance.maxAttempts > 1;
    return extra ? ['first hedge policy allowing extra attempts'] : [];
  }
  const raises: string[] = [];
  const up = (name: string, was: number | bigint, now: number | bigint) => {
    if (now > was) raises.push(`${name} up`);
  };
  const down = (name: string, was: number | bigint, now: number | bigint) => {
    if (now < was) raises.push(`${name} lowered`);
  };
  if (!current.enabled && proposed.enabled) raises.push('hedging enabled');
  up('max_hedges', current.maxHedges, proposed.maxHedges);
  up('max_attempts', current.allowance.maxAttempts, proposed.allowance.maxAttempts);
  up('max_retries', current.retry.maxRetries, proposed.retry.maxRetries);
  up('max_extra_spend_microusd', current.allowance.maxExtraSpendMicrousd, proposed.allowance.maxExtraSpendMicrousd);
  up('approved_premium_microusd', current.approvedPremiumMicrousd, proposed.approvedPremiumMicrousd);
  raises.push(...experimentRaises(current.experimentAllowance, proposed.experimentAllowance));
  const was = delayRange(current.delay);
  const now = delayRange(proposed.delay);
  if (now.min < was.min) raises.push('shortest hedge delay lowered');
  if (now.max < was.max) raises.push('longest hedge delay lowered');
  if (current.delay.kind === 'quantile' && proposed.delay.kind === 'quantile') {
    down('delay quantile', current.delay.quantilePerMille, proposed.delay.quantilePerMille);
    down('delay min_samples', current.delay.minSamples, proposed.delay.minSamples);
  }
  down('spend_floor_microusd', current.stop.spendFloorMicrousd, proposed.stop.spendFloorMicrousd);
  up('max_route_error_per_mille', current.stop.maxRouteErrorPerMille, proposed.stop.maxRouteErrorPerMille);
  up('max_route_in_flight', current.stop.maxRouteInFlight, proposed.stop.maxRouteInFlight);
  down('min_useful_remaining_ms', current.stop.minUsefulRemainingMs, proposed.stop.minUsefulRemainingMs);
  up('bucket max_milli_tokens', current.bucket.maxMilliTokens, proposed.bucket.maxMilliTokens);
  up('bucket success_refill_milli_tokens', current.bucket.successRefillMilliTokens, proposed.bucket.successRefillMilliTokens);
  for (const t of proposed.retry.transient) if (!current.retry.transient.includes(t)) raises.push(`transient failure ${t} added`);
  for (const t of proposed.readOnlyTools) if (!current.readOnlyTools.includes(t)) raises.push(`read-only tool ${t} added`);
  return raises;
}

function experimentRaises(was: HedgeSettings['experimentAllowance'], now: HedgeSettings['experimentAllowance']): string[] {
  if (now === null) return [];
  if (was === null) return ['experiment allowance added'];
  const raises: string[] = [];
  if (now.budgetMicrousd > was.budgetMicrousd) raises.push('experiment budget up');
  // The same amount per day is more than per month.
  if (was.period === 'month' && now.period === 'day') raises.push('experiment budget period shortened');
  return raises;
}
