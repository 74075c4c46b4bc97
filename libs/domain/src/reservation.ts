/**
 * Budget holds placed before a call is dispatched and resolved once usage is known.
 * The reservation must be an upper bound on what the call can cost, so every estimate
 * here errs high; the surplus flows back when the reservation settles.
 */
import { PriceRevision, PricedShape, estimateCostMicrousd, worstPricedShape } from './pricing';
import { assertNonNegativeInteger, assertPositiveInteger } from './validation';

/**
 * How a route applies its output cap (`max_tokens`, `maxOutputTokens`) when several
 * candidates are requested. `per_candidate` is the safe default: each candidate may use
 * the full cap. `shared` is only for routes whose contract verifiably caps the total.
 */
export type OutputCapSemantics = 'per_candidate' | 'shared';

export function reservedOutputTokens(
  effectiveCandidates: number,
  perCandidateOutputCeiling: number,
  semantics: OutputCapSemantics,
): number {
  assertPositiveInteger(effectiveCandidates, 'effectiveCandidates');
  assertPositiveInteger(perCandidateOutputCeiling, 'perCandidateOutputCeiling');
  switch (semantics) {
    case 'per_candidate': {
      const total = effectiveCandidates * perCandidateOutputCeiling;
      assertNonNegativeInteger(total, 'reservedOutputTokens');
      return total;
    }
    case 'shared':
      return perCandidateOutputCeiling;
    default: {
      const unreachable: never = semantics;
      throw new Error(`Unhandled output cap semantics: ${String(unreachable)}`);
    }
  }
}

export function computeReservation(input: {
  inputTokensEstimate: number;
  effectiveCandidates: number;
  perCandidateOutputCeiling: number;
  semantics: OutputCapSemantics;
  price: PriceRevision;
  /** what the request asks for that the price list charges more for (service tier, media, paid tools) */
  shape?: PricedShape;
}): { reservedOutputTokens: number; reservedMicrousd: bigint } {
  const outputTokens = reservedOutputTokens(input.effectiveCandidates, input.perCandidateOutputCeiling, input.semantics);
  // The prompt is billed once however many candidates are generated from it; the context tier is
  // the worst the input estimate can reach.
  const reservedMicrousd = estimateCostMicrousd(input.inputTokensEstimate, outputTokens, input.price, input.shape);
  return { reservedOutputTokens: outputTokens, reservedMicrousd };
}

/** Largest token count the gateway stores (Postgres `integer` columns and token counters). */
export const MAX_STORED_TOKENS = 2_147_483_647;
/** Largest amount the gateway stores (Postgres `bigint` micro-USD). */
export const MAX_STORED_MICROUSD = 9_223_372_036_854_775_807n;
/**
 * A bound on the input estimate of any request admission can accept: a 2 MB body estimates below
 * 3.5 M tokens (bytes / 3, plus 4 per message of at least 3 bytes), so 2^24 leaves ample room.
 */
export const MAX_INPUT_TOKENS_ESTIMATE = 16_777_216;
/** The most output one reservation may hold, so that input + output still fits a token counter. */
export const MAX_RESERVED_OUTPUT_TOKENS = MAX_STORED_TOKENS - MAX_INPUT_TOKENS_ESTIMATE;
/**
 * Budgets: admission compares pending + unresolved + settled + one reservation (each at most the
 * budget) with the budget in `bigint`, so a budget may be at most half the column's range.
 */
export const MAX_BUDGET_MICROUSD = MAX_STORED_MICROUSD / 2n;
/** Token quotas: the window's counter (at most the limit) plus one request (at most the limit) fits. */
export const MAX_TOKENS_PER_MINUTE = Math.floor(MAX_STORED_TOKENS / 2);

/**
 * The worst reservation any policy can reach under a price: the largest input estimate and the
 * most output a reservation may hold (policies are held to `MAX_RESERVED_OUTPUT_TOKENS`).
 */
export function worstReservationMicrousd(price: PriceRevision): bigint {
  return estimateCostMicrousd(MAX_INPUT_TOKENS_ESTIMATE, MAX_RESERVED_OUTPUT_TOKENS, price, worstPricedShape(price));
}

/**
 * Why a computed reservation cannot be stored, or null when it can. Policies are checked when
 * written; this catches a row written before that check (a 4xx denial, never a failed INSERT).
 */
export function reservationOutOfRange(r: {
  inputTokensEstimate: number;
  reservedOutputTokens: number;
  reservedMicrousd: bigint;
}): string | null {
  if (r.reservedOutputTokens > MAX_RESERVED_OUTPUT_TOKENS) {
    return `the request would reserve ${r.reservedOutputTokens} output tokens, above the gateway's limit of ${MAX_RESERVED_OUTPUT_TOKENS}`;
  }
  if (r.inputTokensEstimate + r.reservedOutputTokens > MAX_STORED_TOKENS) {
    return `the request would reserve ${r.inputTokensEstimate + r.reservedOutputTokens} tokens, above the gateway's limit of ${MAX_STORED_TOKENS}`;
  }
  if (r.reservedMicrousd > MAX_STORED_MICROUSD) {
    return `the request would reserve ${r.reservedMicrousd} micro-USD, above the gateway's limit of ${MAX_STORED_MICROUSD}`;
  }
  return null;
}

/** The app may ask for less output than policy allows, never more. */
export function outputCeiling(input: { requested: number | null; policyCeiling: number }): number {
  assertPositiveInteger(input.policyCeiling, 'policyCeiling');
  if (input.requested === null) return input.policyCeiling;
  if (!Number.isSafeInteger(input.requested)) {
    throw new RangeError(`requested output ceiling must be an integer, got ${String(input.requested)}`);
  }
  return Math.max(1, Math.min(input.requested, input.policyCeiling));
}

/** Chat-format framing tokens per message (role, separators) in OpenAI-style templates. */
export const TOKENS_PER_MESSAGE_OVERHEAD = 4;
/** Tokens that prime the assistant's reply. */
export const TOKENS_REPLY_PRIMING = 3;
export const UTF8_BYTES_PER_TOKEN_ESTIMATE = 3;

/**
 * Tokenizer-free input estimate: ceil(utf8 bytes / 3) + 4 per message + 3.
 *
 * Conservative on purpose, because it sizes a budget hold: BPE tokenizers average about
 * 4 bytes per token on English and code, and multi-byte scripts pay 2–4 bytes per
 * character while rarely spending more than one token per character, so bytes/3 overstates
 * in the common cases. The per-message overhead uses the upper end of known chat
 * templates. No model tokenizer is bundled, which keeps this deterministic and provider-neutral.
 */
export function estimateInputTokens(texts: readonly string[], messageCount: number): number {
  assertNonNegativeInteger(messageCount, 'messageCount');
  let bytes = 0;
  for (const text of texts) bytes += Buffer.byteLength(text, 'utf8');
  return Math.ceil(bytes / UTF8_BYTES_PER_TOKEN_ESTIMATE) + TOKENS_PER_MESSAGE_OVERHEAD * messageCount + TOKENS_REPLY_PRIMING;
}
