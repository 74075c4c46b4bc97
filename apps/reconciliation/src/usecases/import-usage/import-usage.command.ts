import { z } from 'zod';
import { usageOfReport } from '@gateway/contracts';
import { PRICED_FEATURES, Usage } from '@gateway/domain';
import { invalidRequest } from '../invalid-request';

const tokens = z.number().int().nonnegative().max(1_000_000_000);

/**
 * Provider usage evidence for the one attempt of a case, e.g. a row of the provider's usage
 * export. `output_tokens_total` is the aggregate over all candidates with reasoning included
 * (DESIGN §8); `reasoning_tokens` is the part of it that is reasoning. Every count is required:
 * a missing figure is not zero. The billable detail a structured price bills apart (issue 14) is
 * optional, as on `attempt.completed`: absent counts are 0, an absent tier is the default.
 */
export const importUsageBody = z
  .object({
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
  })
  .strict()
  .refine((b) => b.cached_input_tokens <= b.input_tokens, {
    message: 'cached_input_tokens cannot exceed input_tokens',
    path: ['cached_input_tokens'],
  })
  .refine((b) => b.reasoning_tokens <= b.output_tokens_total, {
    message: 'reasoning_tokens cannot exceed output_tokens_total (which includes reasoning)',
    path: ['reasoning_tokens'],
  })
  .refine((b) => (b.cache_write_input_tokens ?? 0) + (b.audio_input_tokens ?? 0) <= b.input_tokens, {
    message: 'cache_write_input_tokens + audio_input_tokens cannot exceed input_tokens (they are part of it)',
    path: ['audio_input_tokens'],
  })
  .refine((b) => (b.audio_output_tokens ?? 0) + (b.image_output_tokens ?? 0) <= b.output_tokens_total - b.reasoning_tokens, {
    message: 'audio_output_tokens + image_output_tokens cannot exceed the non-reasoning part of output_tokens_total',
    path: ['audio_output_tokens'],
  });

export interface ImportUsageCommand {
  caseId: string;
  providerRequestId: string;
  /** output includes reasoning (DESIGN §8) */
  usage: Usage;
  /** the operator who imported it */
  actor: string;
}

export function importUsageCommand(caseId: string, body: unknown, actor: string): ImportUsageCommand {
  const parsed = importUsageBody.safeParse(body);
  if (!parsed.success) throw invalidRequest(parsed.error);
  return { caseId, providerRequestId: parsed.data.provider_request_id, usage: usageOfReport(parsed.data, true), actor };
}
