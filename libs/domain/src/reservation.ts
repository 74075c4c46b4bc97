/**
 * Budget holds placed before a call is dispatched and resolved once usage is known.
 * The reservation must be an upper bound on what the call can cost, so every estimate
 * here errs high; the surplus flows back when the reservation settles.
 */
import { PriceRevision, estimateCostMicrousd } from './pricing';
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
}): { reservedOutputTokens: number; reservedMicrousd: bigint } {
  const outputTokens = reservedOutputTokens(input.effectiveCandidates, input.perCandidateOutputCeiling, input.semantics);
  // The prompt is billed once however many candidates are generated from it.
  const reservedMicrousd = estimateCostMicrousd(input.inputTokensEstimate, outputTokens, input.price);
  return { reservedOutputTokens: outputTokens, reservedMicrousd };
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
