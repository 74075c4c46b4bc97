import { z } from 'zod';
import { AttemptCompletedV1, attemptCompletedV1 } from './events';

/**
 * The provider's usage that dispatch held for an attempt reconciliation's orphan sweep had already
 * cut (its evidence came after the action's deadline + the sweep's grace). It is kept on the
 * attempt's open `orphaned_attempt` case, and reconciliation settles the case from it as settlement
 * would have settled the attempt (docs/decisions.md, "Evidence that comes after the orphan
 * sweep"). The fields are `attempt.completed`'s own: ids and counts, never text.
 */
export const lateEvidence = attemptCompletedV1
  .pick({
    provider_request_id: true,
    output_includes_reasoning: true,
    input_tokens: true,
    cached_input_tokens: true,
    output_tokens_total: true,
    reasoning_tokens: true,
    cache_write_input_tokens: true,
    audio_input_tokens: true,
    audio_output_tokens: true,
    image_output_tokens: true,
    service_tier: true,
    feature_calls: true,
  })
  .extend({
    usage_source: z.enum(['provider_response', 'stream_final_chunk']),
    // a missing count is not zero: evidence without both totals is no evidence
    input_tokens: z.number().int().nonnegative(),
    output_tokens_total: z.number().int().nonnegative(),
    offered_at: z.string().datetime({ offset: true }),
  })
  .strict();
export type LateEvidence = z.infer<typeof lateEvidence>;

/** The late evidence an attempt's event carries, or null when it carries no usage to settle from. */
export function lateEvidenceOf(e: AttemptCompletedV1, offeredAt: Date): LateEvidence | null {
  if (e.input_tokens === null || e.output_tokens_total === null) return null;
  const parsed = lateEvidence.safeParse({
    provider_request_id: e.provider_request_id,
    usage_source: e.usage_source === 'stream_final_chunk' ? 'stream_final_chunk' : 'provider_response',
    output_includes_reasoning: e.output_includes_reasoning,
    input_tokens: e.input_tokens,
    cached_input_tokens: e.cached_input_tokens,
    output_tokens_total: e.output_tokens_total,
    reasoning_tokens: e.reasoning_tokens,
    cache_write_input_tokens: e.cache_write_input_tokens,
    audio_input_tokens: e.audio_input_tokens,
    audio_output_tokens: e.audio_output_tokens,
    image_output_tokens: e.image_output_tokens,
    service_tier: e.service_tier,
    feature_calls: e.feature_calls,
    offered_at: offeredAt.toISOString(),
  });
  return parsed.success ? parsed.data : null;
}
