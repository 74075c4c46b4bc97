import { z } from 'zod';
import { int, text } from '../input';

/**
 * POST /routes/{id}/verify. `version` (optional) pins the version the operator reviewed: if the
 * contract changed since, verification is refused rather than applied to something unseen.
 */
export const verifyRouteBody = z
  .object({
    notes: text(2000).optional(),
    probe: z.boolean().default(false),
    version: int(1).optional(),
  })
  .strict();
export type VerifyRouteCommand = z.output<typeof verifyRouteBody>;
