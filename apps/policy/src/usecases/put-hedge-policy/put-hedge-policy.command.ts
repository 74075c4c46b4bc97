import { z } from 'zod';
import { hedgePolicyFromWire, hedgePolicyWireFields, wirePathOf } from '@gateway/contracts';
import { hedgePolicyProblems } from '@gateway/domain';
import { microusd, resourceId, text } from '../input';

/**
 * PUT /workloads/{id}/hedging: the whole hedge policy of the workload (no `route_id`) or of one of
 * its routes, as a new immutable revision. Money is integer micro-USD. The domain's
 * `hedgePolicyProblems` is the one check of the ranges; each problem is refused on its snake_case field.
 */
export const putHedgePolicyBody = z
  .object({
    route_id: resourceId.nullable().default(null),
    ...hedgePolicyWireFields(microusd),
    reason: text(500).optional(),
  })
  .strict()
  .superRefine((p, ctx) => {
    for (const problem of hedgePolicyProblems(hedgePolicyFromWire(p)))
      ctx.addIssue({ code: 'custom', path: wirePathOf(problem.path), message: problem.message });
  });
export type PutHedgePolicyCommand = z.output<typeof putHedgePolicyBody>;
