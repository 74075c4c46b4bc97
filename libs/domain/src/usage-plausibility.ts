/**
 * Usage plausibility for multi-candidate answers (issue 16 §2). Settlement books the provider's
 * aggregate usage, never the text; but an aggregate that could not have paid for the candidates
 * that came back (a provider or aggregator that counted only the first candidate, say) would book
 * N answers at the price of one without anyone noticing. So dispatch, which holds the answer,
 * derives a floor — a count, never text — and an aggregate below it is flagged for an operator.
 *
 * The floor must never fire on an honest answer, so it is deliberately low:
 * - text: UTF-8 bytes / `MAX_BYTES_PER_TOKEN`, rounded up. Real tokenisers average 3–5 bytes per
 *   token on prose and code (more bytes per token only for scripts whose characters take 3–4 bytes
 *   each, and those also take about a token per character); a single token can be a long run of
 *   one repeated character (indentation, `-----` rules), so such runs count once. 8 is twice what
 *   any tokeniser we know averages over a whole answer.
 * - Gemini's per-candidate `tokenCount`, where the provider sends it, is the provider's own count
 *   for that candidate and raises its floor.
 */

/** The most UTF-8 bytes one output token is assumed to carry (a generous upper bound). */
export const MAX_BYTES_PER_TOKEN = 8;

/** What dispatch measures of one returned candidate: counts only. */
export interface CandidateSize {
  /** UTF-8 bytes of the candidate's generated text (see `generatedTextBytes`) */
  textBytes: number;
  /** the provider's own output token count for this candidate (Gemini `candidates[].tokenCount`), if sent */
  tokenCount?: number | null;
}

/** UTF-8 bytes of generated text for the floor: every run of one repeated character counted once. */
export function generatedTextBytes(text: string): number {
  return Buffer.byteLength(text.replace(/(.)\1+/gsu, '$1'), 'utf8');
}

/** The fewest output tokens the returned candidates can have cost, summed over candidates. */
export function outputTokensFloor(candidates: readonly CandidateSize[]): number {
  return candidates.reduce(
    (sum, c) => sum + Math.max(Math.ceil(Math.max(0, c.textBytes) / MAX_BYTES_PER_TOKEN), Math.max(0, c.tokenCount ?? 0)),
    0,
  );
}

/**
 * Whether a settled attempt's usage needs an operator's look: an approved multi-candidate answer
 * (effective > 1) whose reported aggregate output is below what its returned candidates need.
 * One-candidate answers are not judged (the rule; their usage is checked by the rest of
 * settlement), nor attempts without a floor or without usage.
 */
export function usageImplausible(input: {
  effectiveCandidates: number;
  outputTokensTotal: number | null;
  outputTokensFloor: number | null | undefined;
}): boolean {
  const { effectiveCandidates, outputTokensTotal, outputTokensFloor: floor } = input;
  if (effectiveCandidates <= 1 || outputTokensTotal === null || floor === null || floor === undefined) return false;
  return outputTokensTotal < floor;
}
