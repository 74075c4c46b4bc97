import { z } from 'zod';
import { resourceId, text } from '../input';
import { contractFields, routeAlias } from '../route-contract.schema';

/** POST /routes: a new route with its first (unverified) contract version. */
export const createRouteBody = z
  .object({
    id: resourceId.optional(),
    alias: routeAlias,
    ...contractFields,
    reason: text(500).optional(),
  })
  .strict();
export type CreateRouteCommand = z.output<typeof createRouteBody>;
