import { z } from 'zod';
import { budgetMicrousd, reservableOutput, int, isoInstant, resourceId, text } from '../input';

/** POST /exceptions: a time-boxed request to raise a workload's candidate limit. */
export const requestExceptionBody = z
  .object({
    owner: text(200),
    workload_id: resourceId,
    route_id: resourceId.nullable().optional(),
    max_candidates: int(2, 128),
    per_candidate_output_ceiling: int(1),
    budget_microusd: budgetMicrousd,
    expires_at: isoInstant,
    justification: text(2000),
    allows_streaming: z.boolean().default(false),
    /** several candidates at temperature 0 / top-k 1 (near-identical answers, each billed) */
    allows_deterministic_sampling: z.boolean().default(false),
  })
  .strict()
  .superRefine(reservableOutput('max_candidates', 'per_candidate_output_ceiling'));
export type RequestExceptionCommand = z.output<typeof requestExceptionBody>;
