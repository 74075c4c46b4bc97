import { z } from 'zod';
import { candidateOutcome, experimentCohort } from './events';
import { microusdText } from './price-revision';

/**
 * Decrypted bodies of the content-bearing dispatch command and reply. These are the only
 * structures that may hold prompt or completion content; they exist in memory and, encrypted,
 * on the short-retention dispatch topics, and nowhere else.
 */
/** the client's API dialect; `openai-responses` (the Responses API) is served on `openai-chat` routes */
export const apiKind = z.enum(['openai-chat', 'gemini-generate', 'openai-responses']);
export type ApiKind = z.infer<typeof apiKind>;

export const providerKind = z.enum(['openai-chat', 'openai-compatible', 'gemini-generate']);
export type ProviderKind = z.infer<typeof providerKind>;

export const routeTarget = z.object({
  route_id: z.string(),
  route_version: z.number().int(),
  model_alias: z.string(),
  provider_kind: providerKind,
  base_url: z.string(),
  upstream_model: z.string(),
  /** the name of the upstream credential dispatch resolves (never the value); absent/null: none */
  credential_ref: z.string().nullable().optional(),
  candidate_param: z.string().nullable(),
  output_cap_param: z.string(),
  output_cap_semantics: z.enum(['per_candidate', 'shared']).nullable(),
  price_revision_id: z.string(),
  /**
   * the upstream idempotency header the route's contract names (e.g. `Idempotency-Key`); retries of
   * one action send the same value in it. Absent/null: the contract names none.
   */
  idempotency_header: z.string().nullable().optional(),
});
export type RouteTarget = z.infer<typeof routeTarget>;

export const dispatchCommandV1 = z.object({
  action_id: z.string(),
  request_id: z.string(),
  workload_id: z.string(),
  environment: z.string(),
  api_kind: apiKind,
  stream: z.boolean(),
  route: routeTarget,
  requested_candidates: z.number().int().nullable(),
  effective_candidates: z.number().int().positive(),
  output_ceiling: z.number().int().positive(),
  include_usage_for_client: z.boolean(),
  /** `probe`: a route verification probe sent by the policy service; absent = primary */
  attempt_role: z.enum(['primary', 'probe']).optional(),
  /** the workload lets the provider keep prompts (OpenAI `store`); absent = no */
  allow_provider_storage: z.boolean().optional(),
  deadline: z.string(),
  dispatch_deadline: z.string(),
  /**
   * the primary's own hold (decimal micro-USD string): the reservation's amount at admission. A
   * hedge or retry on the same route holds the same again; absent (older admissions): null claim hold.
   */
  hold_microusd: microusdText.optional(),
  /**
   * the workload's fallback chain as admission approved it for this action (verified contracts
   * that support the effective candidate count, serving the same dialect), in order, each with the
   * hold a fallback attempt on it takes (same estimate as the primary's, at that route's price).
   */
  fallbacks: z
    .array(z.object({ route: routeTarget, hold_microusd: microusdText }))
    .max(16)
    .optional(),
  acceptance: z.object({ allow_length: z.boolean(), allow_content_filter: z.boolean() }),
  /**
   * the workload's running hedging experiment (issue 11) and this action's cohort in it: `holdout`
   * runs the primary only (no hedge, retry or fallback), `hedged` runs under the experiment's
   * policy revision, `ineligible` as outside the experiment. Absent: no experiment.
   */
  experiment: z
    .object({
      id: z.string().min(1).max(64),
      cohort: experimentCohort,
      policy_revision_id: z.string().min(1).max(64),
    })
    .optional(),
  /**
   * the application's request body, validated and normalised by admission (canonical spelling,
   * no candidate-count or output-cap field in any spelling: the adapter writes the reserved ones): content
   */
  request: z.record(z.string(), z.unknown()),
});
export type DispatchCommandV1 = z.infer<typeof dispatchCommandV1>;

const replyCounts = z.object({
  attempt_id: z.string().nullable(),
  /** attempts of the action sent upstream (hedges, retries, fallbacks included); absent: 1 */
  attempts_total: z.number().int().nonnegative().optional(),
  /** the role of the attempt whose answer this is (null: no attempt answered) */
  winner_role: z.enum(['primary', 'hedge', 'retry', 'fallback', 'probe']).nullable().optional(),
  /**
   * the gateway used its own retry allowance for this action (retried, fell back, or was denied an
   * extra attempt because the allowance was spent): an SDK must not retry on top of it
   */
  gateway_retried: z.boolean().optional(),
  provider_request_id: z.string().nullable(),
  requested_candidates: z.number().int().nullable(),
  effective_candidates: z.number().int(),
  returned_candidates: z.number().int().nullable(),
  candidates: z.array(candidateOutcome),
});

export const dispatchReplyV1 = z.discriminatedUnion('kind', [
  replyCounts.extend({
    kind: z.literal('response'),
    http_status: z.number().int(),
    /** provider-shaped body to hand back to the application: content */
    body: z.unknown(),
  }),
  replyCounts.extend({
    kind: z.literal('error'),
    http_status: z.number().int(),
    code: z.string(),
    message: z.string(),
    /** the provider's own HTTP status when it answered with an error (absent: no answer) */
    upstream_http_status: z.number().int().optional(),
  }),
  z.object({ kind: z.literal('stream_chunk'), seq: z.number().int().nonnegative(), data: z.string() }),
  replyCounts.extend({ kind: z.literal('stream_end'), seq: z.number().int().nonnegative(), complete: z.boolean() }),
]);
export type DispatchReplyV1 = z.infer<typeof dispatchReplyV1>;
