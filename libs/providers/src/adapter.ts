import type { DispatchCommandV1 } from '@gateway/contracts';
import type { CandidateSize, NormalisedCandidate, PricedFeature } from '@gateway/domain';

/**
 * What the gateway needs to know about one upstream response: shape, counts, usage. No content.
 * Every `*Tokens` detail is a subset of `inputTokens` or `outputTokensTotal` (never extra tokens),
 * 0 when the provider did not report it.
 */
export interface ParsedUsage {
  inputTokens: number;
  /** subset of inputTokens read from the provider's prompt cache */
  cachedInputTokens: number;
  /** subset of inputTokens written to the provider's prompt cache (billed at the cache-write rate) */
  cacheWriteInputTokens: number;
  /** subset of inputTokens that was audio */
  audioInputTokens: number;
  /** aggregate output over all candidates, reasoning included */
  outputTokensTotal: number;
  reasoningTokens: number;
  /** subset of outputTokensTotal that was audio */
  audioOutputTokens: number;
  /** subset of outputTokensTotal that was image */
  imageOutputTokens: number;
  /**
   * Usage fields the adapter does not know (names, never values), plus `total_exceeds_parts` when
   * the reported total is larger than the parts it knows. Either way the parts were settled from
   * the total (the unexplained rest counted as output, the dearer side) and a case is opened.
   */
  unknownFields: string[];
}

/** Names of `usage` keys outside `known` whose value could carry tokens (non-zero, non-empty). */
export function unknownUsageFields(usage: Record<string, unknown>, known: readonly string[], prefix = ''): string[] {
  return Object.entries(usage)
    .filter(([k, v]) => !known.includes(k) && carriesValue(v))
    .map(([k]) => prefix + k);
}

function carriesValue(v: unknown): boolean {
  if (v === null || v === undefined || v === 0 || v === false || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.values(v as Record<string, unknown>).some(carriesValue);
  return true;
}

/** The usage details no provider reported: every subset 0. */
export const NO_USAGE_DETAILS = {
  cachedInputTokens: 0,
  cacheWriteInputTokens: 0,
  audioInputTokens: 0,
  reasoningTokens: 0,
  audioOutputTokens: 0,
  imageOutputTokens: 0,
} as const satisfies Partial<ParsedUsage>;

/**
 * Flags `parts_exceed_total` when the subsets cannot be subsets: cache reads and writes together
 * beyond the input, audio beyond the input, or reasoning, audio and image output together beyond
 * the output. The provider then reports tokens outside the totals in a way the adapter does not
 * know, and a case is opened rather than pricing parts twice.
 */
export function checkSubsets(usage: ParsedUsage): ParsedUsage {
  const exceeds =
    usage.cachedInputTokens + usage.cacheWriteInputTokens > usage.inputTokens ||
    usage.audioInputTokens > usage.inputTokens ||
    usage.reasoningTokens + usage.audioOutputTokens + usage.imageOutputTokens > usage.outputTokensTotal;
  return exceeds ? { ...usage, unknownFields: [...usage.unknownFields, 'parts_exceed_total'] } : usage;
}

/**
 * Settles from the total when the parts do not add up to it: whatever the total holds beyond the
 * known input and output is counted as output (never as zero), and flagged.
 */
export function reconcileWithTotal(usage: ParsedUsage, total: unknown): ParsedUsage {
  const reported = nonNegInt(total);
  const rest = reported - usage.inputTokens - usage.outputTokensTotal;
  if (rest <= 0) return usage;
  return { ...usage, outputTokensTotal: usage.outputTokensTotal + rest, unknownFields: [...usage.unknownFields, 'total_exceeds_parts'] };
}

/**
 * One returned candidate: its outcome, and its size as counts (for the usage-plausibility floor,
 * libs/domain usage-plausibility). The text itself stays with the adapter's caller.
 */
export type ParsedCandidate = NormalisedCandidate & Partial<CandidateSize>;

export interface ParsedResponse {
  providerRequestId: string | null;
  candidates: ParsedCandidate[];
  promptBlockReason: string | null;
  usage: ParsedUsage | null;
  /** the service tier the provider says it used (OpenAI `service_tier`); null when not reported */
  serviceTier: string | null;
  /**
   * Per-call-billed features the response itself evidences, in the unit the provider bills
   * (docs/decisions.md, "Billable usage detail"). Features evidenced only by the request (chat
   * `web_search_options`) are added by `billedExtras`.
   */
  featureCalls: FeatureCalls;
}

/**
 * A service tier name as a provider or a request spells it (`default`, `flex`, `priority`), or
 * null: `auto` is a request to choose, never a tier billed, and anything that is not a short name
 * is not trusted onto the event (whose schema bounds it; a failed parse would lose the evidence).
 */
export function tierName(v: unknown): string | null {
  return typeof v === 'string' && v !== 'auto' && /^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$/.test(v) ? v : null;
}

/** How many billable calls of each per-call-priced feature one attempt made. */
export type FeatureCalls = Partial<Record<PricedFeature, number>>;

export interface UpstreamRequest {
  url: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

/** Accumulates a stream's chunks into the same facts a whole response gives. */
export interface StreamAccumulator {
  /** feeds one SSE `data:` payload; returns false for the terminal `[DONE]` marker */
  push(data: string): boolean;
  result(): ParsedResponse;
  readonly sawUsage: boolean;
  /**
   * The provider's stream reached its end: OpenAI's `[DONE]`; for Gemini, which has no end
   * marker, the final chunk (every candidate finished, with the aggregate usage). A stream that
   * was cut before it did not reach its reader whole.
   */
  readonly finished: boolean;
}

export interface ProviderAdapter {
  /**
   * `credential`: the resolved upstream key (`UpstreamCredentials`), written in the provider's own
   * header: `Authorization: Bearer` for OpenAI and compatibles, `x-goog-api-key` for Gemini.
   */
  buildRequest(cmd: DispatchCommandV1, credential?: string | null): UpstreamRequest;
  parseResponse(body: unknown, headers: Record<string, string | string[] | undefined>): ParsedResponse;
  streamAccumulator(headers: Record<string, string | string[] | undefined>): StreamAccumulator;
  /** the provider's error code/status from an error body, for contract-failure detection */
  errorCode(body: unknown): string | null;
}

export function headerValue(headers: Record<string, string | string[] | undefined>, name: string): string | null {
  const v = headers[name.toLowerCase()];
  if (Array.isArray(v)) return v[0] ?? null;
  return v ?? null;
}

/**
 * Whether every one of `fields` the provider sent is a count it could mean: absent (undefined or
 * null) or a non-negative safe integer. A total reported as 1e999, -7, 2.5 or "12" is not read as
 * 0 (`nonNegInt`): the usage is unreadable, so the attempt's usage is unknown and its exposure
 * stays held, never settled at nothing.
 */
export function countsReadable(u: Record<string, unknown>, fields: readonly string[]): boolean {
  return fields.every((f) => u[f] === undefined || u[f] === null || (Number.isSafeInteger(u[f]) && (u[f] as number) >= 0));
}

export function nonNegInt(v: unknown): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : 0;
}
