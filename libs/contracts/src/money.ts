import { DEFAULT_SERVICE_TIER, FeeLine, PricedFeature, Usage, UsageCost } from '@gateway/domain';
import type { UsageSettledV1 } from './events';

/**
 * A settled amount and its split, whether just priced (`UsageCost` from `priceUsage`) or read back
 * from a ledger row (`serviceTier` null: a row settled before tiers).
 */
export type SettledCost = Omit<UsageCost, 'unpriced' | 'feeLines' | 'serviceTier'> & {
  feeLines: readonly FeeLine[];
  serviceTier: string | null;
};

/** Usage as the provider reported it, in the field names `attempt.completed` and a usage import share. */
export interface ReportedUsageFields {
  input_tokens: number | null;
  cached_input_tokens: number | null;
  output_tokens_total: number | null;
  reasoning_tokens: number | null;
  cache_write_input_tokens?: number | null;
  audio_input_tokens?: number | null;
  audio_output_tokens?: number | null;
  image_output_tokens?: number | null;
  service_tier?: string | null;
  feature_calls?: Partial<Record<PricedFeature, number>>;
}

/**
 * Reported usage as the domain prices it. The billable detail came after v1: an absent or null
 * count is 0, an absent tier is the one the request asked for (none: the default), a feature with
 * no reported calls costs nothing.
 */
export function usageOfReport(r: ReportedUsageFields, outputIncludesReasoning: boolean): Usage {
  return {
    inputTokens: r.input_tokens ?? 0,
    cachedInputTokens: r.cached_input_tokens ?? 0,
    outputTokens: r.output_tokens_total ?? 0,
    reasoningTokens: r.reasoning_tokens ?? 0,
    outputIncludesReasoning,
    cacheWriteInputTokens: r.cache_write_input_tokens ?? 0,
    audioInputTokens: r.audio_input_tokens ?? 0,
    audioOutputTokens: r.audio_output_tokens ?? 0,
    imageOutputTokens: r.image_output_tokens ?? 0,
    serviceTier: r.service_tier ?? null,
    featureCalls: r.feature_calls ?? {},
  };
}

export type SettledCostFields = Pick<UsageSettledV1, 'cost_microusd' | 'context_tier_above_input_tokens' | 'service_tier' | 'fee_lines'> & {
  cost_microusd_by_category: NonNullable<UsageSettledV1['cost_microusd_by_category']>;
};

/**
 * The settled-usage cost fields as finance reads them (`gateway.usage.settled.v1`, the ledger API
 * and export): integer micro-USD as decimal strings. The four v1 categories are always present;
 * the lines added later (cache write, audio, image, fees), the context tier, a non-default service
 * tier and the fee lines only when they say something, so plain text usage reads as it always did.
 */
export function settledCostFields(cost: SettledCost): SettledCostFields {
  const later = {
    cache_write: cost.cacheWrite,
    audio_input: cost.audioInput,
    audio_output: cost.audioOutput,
    image_output: cost.imageOutput,
    fees: cost.fees,
  };
  return {
    cost_microusd: cost.total.toString(),
    cost_microusd_by_category: {
      input: cost.input.toString(),
      cached_input: cost.cachedInput.toString(),
      output: cost.output.toString(),
      reasoning: cost.reasoning.toString(),
      ...Object.fromEntries(Object.entries(later).flatMap(([k, v]) => (v !== 0n ? [[k, v.toString()]] : []))),
    },
    ...(cost.contextTier !== null ? { context_tier_above_input_tokens: cost.contextTier } : {}),
    ...(cost.serviceTier !== null && cost.serviceTier !== DEFAULT_SERVICE_TIER ? { service_tier: cost.serviceTier } : {}),
    ...(cost.feeLines.length > 0
      ? { fee_lines: cost.feeLines.map((l) => ({ feature: l.feature, calls: l.calls, microusd: l.microusd.toString() })) }
      : {}),
  };
}
