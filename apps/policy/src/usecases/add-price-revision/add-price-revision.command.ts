import { z } from 'zod';
import { isoInstant, microusd, resourceId, text } from '../input';

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
  .strict();
export type AddPriceRevisionCommand = z.output<typeof addPriceRevisionBody>;
