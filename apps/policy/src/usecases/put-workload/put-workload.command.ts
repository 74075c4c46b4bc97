import { z } from 'zod';
import { MAX_TOKENS_PER_MINUTE, WORKFLOW_ID_FIELD } from '@gateway/domain';
import { budgetMicrousd, reservableOutput, int, text } from '../input';
import { routeAlias } from '../route-contract.schema';

const aliasList = (max: number) =>
  z
    .array(routeAlias)
    .max(max)
    .refine((a) => new Set(a).size === a.length, 'must not repeat an alias');

/**
 * PUT /workloads/{id}: the whole policy of a workload (a replace, not a patch). Money and limits
 * without a safe default are required.
 */
export const putWorkloadBody = z
  .object({
    team: text(100),
    environment: text(64),
    default_max_candidates: int(1, 128).default(1),
    per_candidate_output_ceiling: int(1),
    budget_microusd: budgetMicrousd,
    budget_period: z.enum(['day', 'month']),
    allowed_aliases: aliasList(100).default([]),
    fallback_chain: aliasList(10).default([]),
    allow_length: z.boolean().default(false),
    allow_content_filter: z.boolean().default(false),
    /** let the provider keep prompts (OpenAI `store`); off by default, so the gateway sends store:false */
    allow_provider_storage: z.boolean().default(false),
    deadline_ms: int(100, 600_000).default(30_000),
    max_in_flight: int(1, 100_000).default(16),
    tokens_per_minute: int(1, MAX_TOKENS_PER_MINUTE).nullable().default(null),
    /** fan-out: at most this many calls carrying one workflow id per window (null: no limit) */
    max_calls_per_workflow: int(1, 1_000_000).nullable().default(null),
    workflow_window_seconds: int(1, 86_400).default(60),
    /** where the workflow id is read when the x-gateway-workflow-id header is absent: `user` or `metadata.<key>` */
    workflow_id_field: z
      .string()
      .regex(WORKFLOW_ID_FIELD, 'user or metadata.<key> (key: 1–64 of A-Z a-z 0-9 _ -)')
      .nullable()
      .default(null),
    reason: text(500).optional(),
  })
  .strict()
  .superRefine(reservableOutput('default_max_candidates', 'per_candidate_output_ceiling'));
export type PutWorkloadCommand = z.output<typeof putWorkloadBody>;
