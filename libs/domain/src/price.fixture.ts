import { PriceRevision, Usage } from './pricing';

/** The specs' price list: $2.50 / $1.25 / $10 / $10 per MTok, in micro-USD per MTok. */
export const TEST_PRICE: PriceRevision = {
  id: 'p1',
  inputPerMTokMicrousd: 2_500_000n,
  cachedInputPerMTokMicrousd: 1_250_000n,
  outputPerMTokMicrousd: 10_000_000n,
  reasoningPerMTokMicrousd: 10_000_000n,
};

/** Usage with every count zero (OpenAI style: reasoning inside output) except what `u` sets. */
export const usageOf = (u: Partial<Usage>): Usage => ({
  inputTokens: 0,
  cachedInputTokens: 0,
  outputTokens: 0,
  reasoningTokens: 0,
  outputIncludesReasoning: true,
  ...u,
});
