import { z } from 'zod';
import { priceRevisionFromWire, priceWirePath, priceWireSchemas } from '@gateway/contracts';
import { priceRevisionProblems } from '@gateway/domain';
import { checkReservablePrice, isoInstant, microusd, resourceId, text } from '../input';

const wire = priceWireSchemas(microusd);

/**
 * POST /routes/{id}/prices: one immutable revision, integer micro-USD per million tokens for each
 * category, optionally with the structure providers publish (context-length tiers, service tiers,
 * per-call fees, cache-write and audio/image rates). `id` is optional; choosing it makes a retried
 * request safe. The domain's `priceRevisionProblems` is the one check of the structure; each
 * problem is refused on its snake_case field.
 */
export const addPriceRevisionBody = z
  .object({
    id: resourceId.optional(),
    effective_from: isoInstant.optional(),
    ...wire.rateFields,
    ...wire.structureFields,
    reason: text(500).optional(),
  })
  .strict()
  .superRefine((p, ctx) => {
    const price = priceRevisionFromWire(p.id ?? 'proposed', p);
    const problems = priceRevisionProblems(price);
    for (const problem of problems) ctx.addIssue({ code: 'custom', path: priceWirePath(problem.path), message: problem.message });
    if (problems.length > 0) return;
    checkReservablePrice(ctx, p, price);
  });
export type AddPriceRevisionCommand = z.output<typeof addPriceRevisionBody>;
