/**
 * Which policy changes raise what the gateway may spend (issue 8 §5). Such a change is not applied
 * by the operator who asks for it: it becomes a change request that a second operator approves
 * (four-eyes, like candidate exceptions). Lowering a limit stays one step. Each function returns
 * the reasons a change raises spend; an empty list means it may be applied at once.
 */

export type ChangeRequestKind = 'workload_policy' | 'price_revision' | 'route_contract' | 'scope_limit';
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

export interface PriceRates {
  inputPerMTokMicrousd: bigint;
  cachedInputPerMTokMicrousd: bigint;
  outputPerMTokMicrousd: bigint;
  reasoningPerMTokMicrousd: bigint;
}

const PRICE_RATES: readonly (keyof PriceRates)[] = [
  'inputPerMTokMicrousd',
  'cachedInputPerMTokMicrousd',
  'outputPerMTokMicrousd',
  'reasoningPerMTokMicrousd',
];

/** A revision that lowers any rate below the one in force (or the route's first price) makes spend cheaper to book. */
export function priceSpendRaises(inForce: PriceRates | null, proposed: PriceRates): string[] {
  if (inForce === null) return ['first price of the route'];
  const lowered = PRICE_RATES.filter((k) => proposed[k] < inForce[k]);
  return lowered.map((k) => `${k} lowered`);
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
