/**
 * Turning token usage into money. All amounts are integer micro-USD (`bigint`); prices
 * are quoted per 1,000,000 tokens, so one token at $1/MTok is exactly 1 micro-USD.
 */
import { assertNonNegativeInteger, assertNonNegativeMicrousd } from './validation';

export const TOKENS_PER_PRICE_UNIT = 1_000_000n;

/** One immutable revision of a route's price list, in micro-USD per 1M tokens. */
export type PriceRevision = {
  id: string;
  inputPerMTokMicrousd: bigint;
  cachedInputPerMTokMicrousd: bigint;
  outputPerMTokMicrousd: bigint;
  reasoningPerMTokMicrousd: bigint;
};

export type Usage = {
  /** All prompt tokens, cached ones included. */
  inputTokens: number;
  /** Subset of `inputTokens` served from the provider's prompt cache. */
  cachedInputTokens: number;
  /** Aggregate over all candidates; includes reasoning when `outputIncludesReasoning`. */
  outputTokens: number;
  reasoningTokens: number;
  /** OpenAI counts reasoning inside completion_tokens; Gemini reports thoughts separately. */
  outputIncludesReasoning: boolean;
};

export type UsageCost = {
  input: bigint;
  cachedInput: bigint;
  output: bigint;
  reasoning: bigint;
  total: bigint;
};

/**
 * ceil(tokens × perMTok / 1e6). Rounding up keeps reservations and settlements from ever
 * understating what the provider will bill; the error is below 1 micro-USD per category.
 */
export function costOfTokensMicrousd(tokens: number, perMTokMicrousd: bigint): bigint {
  assertNonNegativeInteger(tokens, 'tokens');
  assertNonNegativeMicrousd(perMTokMicrousd, 'perMTokMicrousd');
  const numerator = BigInt(tokens) * perMTokMicrousd;
  return (numerator + TOKENS_PER_PRICE_UNIT - 1n) / TOKENS_PER_PRICE_UNIT;
}

export function assertPriceRevision(price: PriceRevision): void {
  assertNonNegativeMicrousd(price.inputPerMTokMicrousd, 'inputPerMTokMicrousd');
  assertNonNegativeMicrousd(price.cachedInputPerMTokMicrousd, 'cachedInputPerMTokMicrousd');
  assertNonNegativeMicrousd(price.outputPerMTokMicrousd, 'outputPerMTokMicrousd');
  assertNonNegativeMicrousd(price.reasoningPerMTokMicrousd, 'reasoningPerMTokMicrousd');
}

export function assertUsage(usage: Usage): void {
  assertNonNegativeInteger(usage.inputTokens, 'inputTokens');
  assertNonNegativeInteger(usage.cachedInputTokens, 'cachedInputTokens');
  assertNonNegativeInteger(usage.outputTokens, 'outputTokens');
  assertNonNegativeInteger(usage.reasoningTokens, 'reasoningTokens');
  if (usage.cachedInputTokens > usage.inputTokens) {
    throw new RangeError(`cachedInputTokens (${usage.cachedInputTokens}) cannot exceed inputTokens (${usage.inputTokens})`);
  }
  if (usage.outputIncludesReasoning && usage.reasoningTokens > usage.outputTokens) {
    throw new RangeError(
      `reasoningTokens (${usage.reasoningTokens}) cannot exceed outputTokens (${usage.outputTokens}) ` + 'when output includes reasoning',
    );
  }
}

/**
 * Splits usage into disjoint billing categories so no token is priced twice: cached tokens
 * leave the input bucket, and included reasoning leaves the output bucket.
 */
export function priceUsage(usage: Usage, price: PriceRevision): UsageCost {
  assertUsage(usage);
  assertPriceRevision(price);
  const uncachedInputTokens = usage.inputTokens - usage.cachedInputTokens;
  const visibleOutputTokens = usage.outputIncludesReasoning ? usage.outputTokens - usage.reasoningTokens : usage.outputTokens;

  const input = costOfTokensMicrousd(uncachedInputTokens, price.inputPerMTokMicrousd);
  const cachedInput = costOfTokensMicrousd(usage.cachedInputTokens, price.cachedInputPerMTokMicrousd);
  const output = costOfTokensMicrousd(visibleOutputTokens, price.outputPerMTokMicrousd);
  const reasoning = costOfTokensMicrousd(usage.reasoningTokens, price.reasoningPerMTokMicrousd);
  return { input, cachedInput, output, reasoning, total: input + cachedInput + output + reasoning };
}

const maxBigint = (a: bigint, b: bigint): bigint => (a > b ? a : b);

/**
 * Worst-case cost for a reservation, before the split of the usage is known: any output
 * token may turn out to be reasoning, and any input token may be billed uncached. The
 * input rate takes max(input, cached) only to stay an upper bound under an odd price list.
 */
export function estimateCostMicrousd(inputTokens: number, outputTokens: number, price: PriceRevision): bigint {
  assertNonNegativeInteger(inputTokens, 'inputTokens');
  assertNonNegativeInteger(outputTokens, 'outputTokens');
  assertPriceRevision(price);
  const inputRate = maxBigint(price.inputPerMTokMicrousd, price.cachedInputPerMTokMicrousd);
  const outputRate = maxBigint(price.outputPerMTokMicrousd, price.reasoningPerMTokMicrousd);
  return costOfTokensMicrousd(inputTokens, inputRate) + costOfTokensMicrousd(outputTokens, outputRate);
}
