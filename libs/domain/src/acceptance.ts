/**
 * Deciding whether a provider response is something the app can use, and whether the
 * provider honoured the candidate contract. A response is judged on all its candidates:
 * candidates[0] being empty or filtered says nothing about candidates[1..].
 */
import { assertPositiveInteger } from './validation';

export type ProviderKind = 'openai-chat' | 'openai-compatible' | 'gemini-generate';

export type FinishReason = 'stop' | 'length' | 'content_filter' | 'tool_calls' | 'other';

export type NormalisedCandidate = {
  index: number;
  /** The provider's finish reason as reported (raw), or already normalised; null if absent. */
  finishReason: string | null;
  hasContent: boolean;
};

export type NormalisedResponse = {
  providerKind: ProviderKind;
  candidates: NormalisedCandidate[];
  /** Set when the provider refused the prompt itself (e.g. Gemini promptFeedback.blockReason). */
  promptBlockReason: string | null;
};

const CANONICAL: ReadonlySet<string> = new Set<FinishReason>(['stop', 'length', 'content_filter', 'tool_calls', 'other']);

const OPENAI: Readonly<Record<string, FinishReason>> = {
  stop: 'stop',
  length: 'length',
  content_filter: 'content_filter',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls', // legacy name for tool calls
};

// Self-hosted "OpenAI-compatible" servers sometimes leak their engine's own vocabulary.
const OPENAI_COMPATIBLE_EXTRA: Readonly<Record<string, FinishReason>> = {
  eos: 'stop',
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
};

const GEMINI: Readonly<Record<string, FinishReason>> = {
  STOP: 'stop',
  MAX_TOKENS: 'length',
  SAFETY: 'content_filter',
  RECITATION: 'content_filter',
  BLOCKLIST: 'content_filter',
  PROHIBITED_CONTENT: 'content_filter',
  SPII: 'content_filter',
  IMAGE_SAFETY: 'content_filter',
  IMAGE_PROHIBITED_CONTENT: 'content_filter',
  IMAGE_RECITATION: 'content_filter',
  // Everything else (LANGUAGE, OTHER, MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL,
  // FINISH_REASON_UNSPECIFIED, future values…) is 'other': unknown must never count as success.
};

const own = (table: Readonly<Record<string, FinishReason>>, key: string): FinishReason | undefined =>
  Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined;

/**
 * Maps a provider finish reason onto the gateway's vocabulary. Already-canonical values
 * pass through unchanged, so normalising twice is harmless. null/empty means the
 * provider did not report one (e.g. a stream cut before the final chunk).
 */
export function normaliseFinishReason(providerKind: ProviderKind, raw: string | null | undefined): FinishReason | null {
  if (raw === null || raw === undefined || raw === '') return null;
  if (CANONICAL.has(raw)) return raw as FinishReason;
  switch (providerKind) {
    case 'openai-chat':
      return own(OPENAI, raw) ?? 'other';
    case 'openai-compatible':
      return own(OPENAI, raw) ?? own(OPENAI_COMPATIBLE_EXTRA, raw) ?? 'other';
    case 'gemini-generate':
      return own(GEMINI, raw) ?? 'other';
    default: {
      const unreachable: never = providerKind;
      throw new Error(`Unhandled provider kind: ${String(unreachable)}`);
    }
  }
}

/** For callers that lost the provider kind; the OpenAI and Gemini vocabularies do not overlap. */
export function normaliseAnyFinishReason(raw: string | null | undefined): FinishReason | null {
  if (raw === null || raw === undefined || raw === '') return null;
  if (CANONICAL.has(raw)) return raw as FinishReason;
  return own(GEMINI, raw) ?? own(OPENAI, raw) ?? own(OPENAI_COMPATIBLE_EXTRA, raw) ?? 'other';
}

export type AcceptanceReason = 'ok' | 'no_candidates' | 'prompt_blocked' | 'no_content' | 'finish_reason_not_allowed' | 'after_deadline';

export type AcceptanceOptions = {
  allowLength: boolean;
  allowContentFilter: boolean;
  receivedAt: Date;
  deadline: Date;
};

export type Acceptance = { valid: boolean; reason: AcceptanceReason; validCandidateIndexes: number[] };

export function finishReasonAllowed(
  reason: FinishReason | null,
  opts: Pick<AcceptanceOptions, 'allowLength' | 'allowContentFilter'>,
): boolean {
  switch (reason) {
    case 'stop':
    case 'tool_calls':
      return true;
    case 'length':
      return opts.allowLength;
    case 'content_filter':
      return opts.allowContentFilter;
    case 'other':
    case null:
      return false;
    default: {
      const unreachable: never = reason;
      throw new Error(`Unhandled finish reason: ${String(unreachable)}`);
    }
  }
}

export function accept(resp: NormalisedResponse, opts: AcceptanceOptions): Acceptance {
  const invalid = (reason: AcceptanceReason): Acceptance => ({
    valid: false,
    reason,
    validCandidateIndexes: [],
  });

  // A late answer is useless to a caller that has already timed out, however good it is.
  if (opts.receivedAt.getTime() > opts.deadline.getTime()) return invalid('after_deadline');
  if (resp.promptBlockReason !== null) return invalid('prompt_blocked');
  if (resp.candidates.length === 0) return invalid('no_candidates');

  const validCandidateIndexes = resp.candidates
    .filter((c) => c.hasContent && finishReasonAllowed(normaliseFinishReason(resp.providerKind, c.finishReason), opts))
    .map((c) => c.index);
  if (validCandidateIndexes.length > 0) return { valid: true, reason: 'ok', validCandidateIndexes };

  return invalid(resp.candidates.some((c) => c.hasContent) ? 'finish_reason_not_allowed' : 'no_content');
}

export type CandidateOutcome = 'ok' | 'filtered' | 'truncated' | 'empty';

export function candidateOutcome(candidate: NormalisedCandidate, providerKind?: ProviderKind): CandidateOutcome {
  const reason = providerKind
    ? normaliseFinishReason(providerKind, candidate.finishReason)
    : normaliseAnyFinishReason(candidate.finishReason);
  // Most specific explanation first: a filtered candidate is often also empty.
  if (reason === 'content_filter') return 'filtered';
  if (reason === 'length') return 'truncated';
  if (!candidate.hasContent) return 'empty';
  return 'ok';
}

export type CandidateShortfall = {
  returnedCount: number;
  missingCount: number;
  excessCount: number;
  perCandidate: Array<{ index: number; outcome: CandidateOutcome }>;
  blocked: boolean;
  /** Fewer returned than requested with no filter or block to explain it: a contract failure. */
  unexplainedShortfall: boolean;
  /** More returned than requested: billed output may exceed the reservation, so reconcile. */
  excess: boolean;
};

export function candidateShortfall(input: {
  effective: number;
  returned: NormalisedCandidate[];
  promptBlockReason: string | null;
  /** When omitted, finish reasons are read in any provider's vocabulary. */
  providerKind?: ProviderKind;
}): CandidateShortfall {
  assertPositiveInteger(input.effective, 'effective');
  const returnedCount = input.returned.length;
  const missingCount = Math.max(0, input.effective - returnedCount);
  const excessCount = Math.max(0, returnedCount - input.effective);
  const perCandidate = input.returned.map((c) => ({
    index: c.index,
    outcome: candidateOutcome(c, input.providerKind),
  }));
  const blocked = input.promptBlockReason !== null;
  // A provider that filters may omit candidates instead of returning them marked as
  // filtered, so a filtered sibling counts as the explanation for the missing ones.
  const explained = blocked || perCandidate.some((c) => c.outcome === 'filtered');
  return {
    returnedCount,
    missingCount,
    excessCount,
    perCandidate,
    blocked,
    unexplainedShortfall: missingCount > 0 && !explained,
    excess: excessCount > 0,
  };
}
