import { z } from 'zod';
import { MAX_INPUT_TOKENS_ESTIMATE } from '@gateway/domain';
import { budgetMicrousd, reservableOutput, int, isoInstant, resourceId, text } from '../input';

/**
 * The outcome the exception should improve. Direction is implied: a target above the baseline
 * means the metric should rise, below it that it should fall; equal numbers are refused.
 */
export const exceptionOutcome = z
  .object({
    metric: text(200),
    baseline: z.number().finite(),
    target: z.number().finite(),
  })
  .strict()
  .refine((o) => o.target !== o.baseline, { message: 'must differ from baseline (direction is target vs baseline)', path: ['target'] });

/**
 * POST /exceptions: a time-boxed request to raise a workload's candidate limit, with its evidence:
 * the outcome it should improve, the requests expected until it expires and a typical input size
 * (the policy API projects the cost from them).
 */
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
    outcome: exceptionOutcome,
    expected_requests: int(1),
    typical_input_tokens: int(1, MAX_INPUT_TOKENS_ESTIMATE),
  })
  .strict()
  .superRefine(reservableOutput('max_candidates', 'per_candidate_output_ceiling'));
export type RequestExceptionCommand = z.output<typeof requestExceptionBody>;
