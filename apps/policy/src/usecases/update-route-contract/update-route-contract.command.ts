import { z } from 'zod';
import { text } from '../input';
import { contractFields, routeAlias } from '../route-contract.schema';

/** PUT /routes/{id}/contract: the whole contract; any difference makes a new unverified version. */
export const updateRouteContractBody = z
  .object({
    alias: routeAlias.optional(),
    ...contractFields,
    reason: text(500).optional(),
  })
  .strict();
export type UpdateRouteContractCommand = z.output<typeof updateRouteContractBody>;
