import type { PriceRevision } from '@gateway/domain';
import { DEFAULT_PRICES } from './seed';

/**
 * A price revision with every structure of issue 14, in round numbers so a test can hand-compute
 * the bill: `DEFAULT_PRICES` ($2.50 / $1.25 / $10 / $10 per MTok) plus cache write $3.125, audio in
 * $40 and out $80; above 1000 input tokens every token of the request costs double; a `priority`
 * service tier at double the base (and double again above 1000); web search at 10 000 micro-USD a
 * call, two reserved per request.
 */
export function structuredPrice(id: string): PriceRevision {
  const base = {
    inputPerMTokMicrousd: DEFAULT_PRICES.inputPerMTokMicrousd,
    cachedInputPerMTokMicrousd: DEFAULT_PRICES.cachedInputPerMTokMicrousd,
    outputPerMTokMicrousd: DEFAULT_PRICES.outputPerMTokMicrousd,
    reasoningPerMTokMicrousd: DEFAULT_PRICES.reasoningPerMTokMicrousd,
    cacheWritePerMTokMicrousd: 3_125_000n,
    audioInputPerMTokMicrousd: 40_000_000n,
    audioOutputPerMTokMicrousd: 80_000_000n,
  };
  const times = (k: bigint) => Object.fromEntries(Object.entries(base).map(([name, rate]) => [name, rate * k])) as typeof base;
  return {
    id,
    ...base,
    contextTierRule: 'whole_request',
    contextTiers: [{ aboveInputTokens: STRUCTURED_CONTEXT_THRESHOLD, rates: times(2n) }],
    serviceTiers: { priority: { rates: times(2n), contextTiers: [{ aboveInputTokens: STRUCTURED_CONTEXT_THRESHOLD, rates: times(4n) }] } },
    perCallFees: [{ feature: 'web_search', feeMicrousd: 10_000n, reservedCallsPerRequest: 2 }],
  };
}

/** The input-token threshold of `structuredPrice`'s context tiers. */
export const STRUCTURED_CONTEXT_THRESHOLD = 1000;
