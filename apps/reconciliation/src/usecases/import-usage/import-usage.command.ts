import { z } from 'zod';
import { invalidRequest } from '../invalid-request';

const tokens = z.number().int().nonnegative().max(1_000_000_000);

/**
 * Provider usage evidence for the one attempt of a case, e.g. a row of the provider's usage
 * export. `output_tokens_total` is the aggregate over all candidates with reasoning included
 * (DESIGN §8); `reasoning_tokens` is the part of it that is reasoning. Every count is required:
 * a missing figure is not zero.
 */
export const importUsageBody = z
  .object({
    provider_request_id: z.string().trim().min(1).max(256),
    input_tokens: tokens,
    cached_input_tokens: tokens,
    output_tokens_total: tokens,
    reasoning_tokens: tokens,
  })
  .strict()
  .refine((b) => b.cached_input_tokens <= b.input_tokens, {
    message: 'cached_input_tokens cannot exceed input_tokens',
    path: ['cached_input_tokens'],
  })
  .refine((b) => b.reasoning_tokens <= b.output_tokens_total, {
    message: 'reasoning_tokens cannot exceed output_tokens_total (which includes reasoning)',
    path: ['reasoning_tokens'],
  });

export interface ImportUsageCommand {
  caseId: string;
  providerRequestId: string;
  inputTokens: number;
  cachedInputTokens: number;
  outputTokensTotal: number;
  reasoningTokens: number;
  /** the operator who imported it */
  actor: string;
}

export function importUsageCommand(caseId: string, body: unknown, actor: string): ImportUsageCommand {
  const parsed = importUsageBody.safeParse(body);
  if (!parsed.success) throw invalidRequest(parsed.error);
  const b = parsed.data;
  return {
    caseId,
    providerRequestId: b.provider_request_id,
    inputTokens: b.input_tokens,
    cachedInputTokens: b.cached_input_tokens,
    outputTokensTotal: b.output_tokens_total,
    reasoningTokens: b.reasoning_tokens,
    actor,
  };
}
