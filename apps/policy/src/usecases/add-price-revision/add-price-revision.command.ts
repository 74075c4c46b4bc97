import { z } from 'zod';
import { checkReservablePrice, isoInstant, microusd, resourceId, text } from '../input';

/**
 * POST /routes/{id}/prices: one immutable revision, integer micro-USD per million tokens for each
 * category. `id` is optional; choosing it makes a retried request safe.
 */
export const addPriceRevisionBody = z
  .object({
    id: resourceId.optional(),
    effective_from: isoInstant.optional(),
    input_per_mtok_microusd: microusd,
    cached_input_per_mtok_microusd: microusd,
    output_per_mtok_microusd: microusd,
    reasoning_per_mtok_microusd: microusd,
    reason: text(500).optional(),
  })
  .strict()
  .superRefine((p, ctx) =>
    checkReservablePrice(
      ctx,
      {
        input_per_mtok_microusd: p.input_per_mtok_microusd,
        cached_input_per_mtok_microusd: p.cached_input_per_mtok_microusd,
        output_per_mtok_microusd: p.output_per_mtok_microusd,
        reasoning_per_mtok_microusd: p.reasoning_per_mtok_microusd,
      },
      {
        id: p.id ?? 'proposed',
        inputPerMTokMicrousd: p.input_per_mtok_microusd,
        cachedInputPerMTokMicrousd: p.cached_input_per_mtok_microusd,
        outputPerMTokMicrousd: p.output_per_mtok_microusd,
        reasoningPerMTokMicrousd: p.reasoning_per_mtok_microusd,
      },
    ),
  );
export type AddPriceRevisionCommand = z.output<typeof addPriceRevisionBody>;
