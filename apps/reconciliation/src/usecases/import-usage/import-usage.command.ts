import { z } from 'zod';
import { usageOfReport } from '@gateway/contracts';
import { PRICED_FEATURES, Usage } from '@gateway/domain';
import { invalidRequest } from '../invalid-request';

const tokens = z.number().int().nonnegative().max(1_000_000_000);

/**
 * Provider usage evidence for one attempt, e.g. a row of the provider's usage export: its fields
 * (shared by `importUsageBody` and the bulk export line) and `usageEvidenceRules`, the checks
 * between them. `output_tokens_total` is the aggregate over all candidates with reasoning
 * included (DESIGN §8); `reasoning_tokens` is the part of it that is reasoning. Every count is
 * required: a missing figure is not zero. The billable detail a structured price bills apart
 * (issue 14) is optional, as on `attempt.completed`: absent counts are 0, an absent tier is the default.
 */
export const usageEvidenceFields = {
  provider_request_id: z.string().trim().min(1).max(256),
  input_tokens: tokens,
  cached_input_tokens: tokens,
  output_tokens_total: tokens,
  reasoning_tokens: tokens,
  cache_write_input_tokens: tokens.optional(),
  audio_input_tokens: tokens.optional(),
  audio_output_tokens: tokens.optional(),
  image_output_tokens: tokens.optional(),
  service_tier: z.string().trim().min(1).max(32).optional(),
  feature_calls: z.partialRecord(z.enum(PRICED_FEATURES), tokens).optional(),
};

type Evidence = {
  input_tokens: number;
  cached_input_tokens: number;
  output_tokens_total: number;
  reasoning_tokens: number;
  cache_write_input_tokens?: number;
  audio_input_tokens?: number;
  audio_output_tokens?: number;
  image_output_tokens?: number;
};

/** The checks between the evidence's counts (each a part of another), refused on the field that breaks them. */
export function usageEvidenceRules(b: Evidence, ctx: z.RefinementCtx): void {
  const refuse = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (b.cached_input_tokens > b.input_tokens) refuse('cached_input_tokens', 'cached_input_tokens cannot exceed input_tokens');
  if (b.reasoning_tokens > b.output_tokens_total) {
    refuse('reasoning_tokens', 'reasoning_tokens cannot exceed output_tokens_total (which includes reasoning)');
  }
  if ((b.cache_write_input_tokens ?? 0) + (b.audio_input_tokens ?? 0) > b.input_tokens) {
    refuse('audio_input_tokens', 'cache_write_input_tokens + audio_input_tokens cannot exceed input_tokens (they are part of it)');
  }
  if ((b.audio_output_tokens ?? 0) + (b.image_output_tokens ?? 0) > b.output_tokens_total - b.reasoning_tokens) {
    refuse('audio_output_tokens', 'audio_output_tokens + image_output_tokens cannot exceed the non-reasoning part of output_tokens_total');
  }
}

/** POST /cases/{id}/import-usage: the evidence for the case's one attempt. */
export const importUsageBody = z.object(usageEvidenceFields).strict().superRefine(usageEvidenceRules);

export interface ImportUsageCommand {
  caseId: string;
  /** the provider request the evidence is for; null only with `completion` (no line names the request) */
  providerRequestId: string | null;
  /** output includes reasoning (DESIGN §8) */
  usage: Usage;
  /** the operator who imported it */
  actor: string;
  /**
   * The attempt id the provider's export echoes as the request's client request id (bulk import:
   * dispatch sends it upstream). It names the attempt itself, so the evidence may carry another of
   * the provider's ids for the same request than the one the attempt recorded (OpenAI: the
   * response's `id` on the export, the `x-request-id` header on the attempt).
   */
  clientRequestId?: string | null;
  /**
   * The evidence is the absence of a line: an export the operator stated complete for the
   * attempt's route and day has none for it, so the provider billed nothing (zero usage).
   */
  completion?: { statementId: string; exportDigest: string; day: string } | null;
  /**
   * The evidence is dispatch's own record of the provider's response, which came after the orphan
   * sweep had cut the attempt (`SettleLateEvidence`): the ledger row keeps where it came from, as
   * settlement would have. Absent: a provider export.
   */
  late?: { source: 'provider_response' | 'stream_final_chunk'; offeredAt: string } | null;
}

export function importUsageCommand(caseId: string, body: unknown, actor: string): ImportUsageCommand {
  const parsed = importUsageBody.safeParse(body);
  if (!parsed.success) throw invalidRequest(parsed.error);
  return { caseId, providerRequestId: parsed.data.provider_request_id, usage: usageOfReport(parsed.data, true), actor };
}
