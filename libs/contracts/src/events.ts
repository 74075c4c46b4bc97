import { z } from 'zod';
import { PRICED_FEATURES } from '@gateway/domain';

/**
 * What a provider's answer may put on an attempt's evidence (the attempt row, `attempt.completed`),
 * as libs/providers `boundedResponse` enforces it on every parsed answer: a provider (or whatever
 * answers at a route's address) is as untrusted as a client, and one unbounded value (a NUL that
 * jsonb refuses, an id past the btree's row size, a message past the broker's limit) would fail
 * the write that carries the usage. `usage_unknown_fields` below is bounded by the same figures.
 */
export const EVIDENCE_BOUNDS = {
  /** provider request ids: 1–256 visible ASCII characters, else none */
  providerRequestIdMaxChars: 256,
  /** finish and block reasons: 1–64 of [A-Za-z0-9_.:-], else `unrecognised` */
  reasonMaxChars: 64,
  /** candidates read from one answer (more than any route's maximum; the rest are dropped) */
  candidatesMax: 128,
  unknownUsageFieldsMax: 32,
  unknownUsageFieldMaxChars: 128,
} as const;

/**
 * Event schemas. Sanitised events carry only the fields of DESIGN §8: counts, usage, ids,
 * reasons. Never prompt or completion text, headers, keys or tool arguments.
 */

const isoTimestamp = z.string().datetime({ offset: true });
const microusd = z.string().regex(/^-?\d+$/, 'integer micro-USD as a decimal string');
const count = z.number().int().nonnegative();

/**
 * DESIGN §5 names primary, hedge, retry and fallback. `probe` is the gateway's own verification
 * call to a route (an operator asked for it): spend like any other, settled against the
 * operations workload's budget, so finance sees it (docs/decisions.md, "Probe spend is spend").
 */
export const attemptRole = z.enum(['primary', 'hedge', 'retry', 'fallback', 'probe']);
export type AttemptRole = z.infer<typeof attemptRole>;
/**
 * Where a settled amount's evidence came from. DESIGN §8 lists `operator`; an operator release
 * books the amount the operator attests after comparing evidence, named `operator_release` so the
 * ledger says plainly that no provider reported it (`operator` stays accepted for older events).
 */
export const usageSource = z.enum(['provider_response', 'stream_final_chunk', 'provider_export', 'operator', 'operator_release']);
export type UsageSource = z.infer<typeof usageSource>;
export const streamMode = z.enum(['none', 'sse']);

/** Why a reconciliation case is open; the one list every writer and reader uses. */
export const caseReason = z.enum([
  'usage_missing',
  'stream_ended_before_usage',
  'returned_exceeds_effective',
  'candidate_shortfall_unexplained',
  'orphaned_attempt',
  'no_reservation',
  /** settlement parked the attempt's event on the dead-letter topic (it cannot be processed) */
  'settlement_failed',
  /** the provider reported usage fields the adapter does not know; settled from the total, to be checked */
  'usage_shape_unknown',
  /**
   * a multi-candidate answer's aggregate output is below what its returned candidates need
   * (libs/domain usage-plausibility); settled from the provider's usage, to be checked
   */
  'usage_implausible',
  /**
   * the usage reported something the price revision does not price (a per-call feature's calls, a
   * service tier); settled at the priced amount (an unknown tier at the dearest priced one), to be checked
   */
  'usage_unpriced',
  /** a provider usage export line disagrees with the attempt's settled ledger row; never corrected silently */
  'export_mismatch',
]);
export type CaseReason = z.infer<typeof caseReason>;

/** What the user got from an action or attempt (apart from acceptance and money). */
export const deliveryOutcome = z.enum(['answered', 'refused', 'failed', 'deadline']);
export type DeliveryOutcome = z.infer<typeof deliveryOutcome>;
/** Whether the answer was valid under the workload's acceptance policy (libs/domain `accept`). */
export const acceptanceVerdict = z.enum(['valid', 'invalid']);
export type AcceptanceVerdict = z.infer<typeof acceptanceVerdict>;
/** Where an action's or attempt's money stands. */
export const financialState = z.enum(['pending', 'settled', 'unresolved', 'released', 'voided']);
export type FinancialState = z.infer<typeof financialState>;

/** How an attempt ended against its action's deadline (issue 10). */
export const deadlineOutcome = z.enum(['on_time', 'late', 'cancelled']);
/** an action's cohort in a hedging experiment (issue 11): `ineligible` actions are excluded from both cohorts */
export const experimentCohort = z.enum(['hedged', 'holdout', 'ineligible']);
export type DeadlineOutcome = z.infer<typeof deadlineOutcome>;

/** The §8 field set shared by every routine record. */
export const sanitisedFields = z.object({
  timestamp: isoTimestamp,
  request_id: z.string(),
  action_id: z.string(),
  attempt_id: z.string().nullable(),
  attempt_role: attemptRole.nullable(),
  workload_id: z.string().nullable(),
  environment: z.string().nullable(),
  route_id: z.string().nullable(),
  route_version: z.number().int().nullable(),
  model_alias: z.string().nullable(),
  provider_request_id: z.string().nullable(),
  requested_candidate_count: z.number().int().nullable(),
  effective_candidate_count: z.number().int().nullable(),
  returned_candidate_count: z.number().int().nullable(),
  input_tokens: count.nullable(),
  output_tokens_total: count.nullable(),
  total_tokens: count.nullable(),
  stream_mode: streamMode,
  usage_source: usageSource.nullable(),
  quota_scope: z.string().nullable(),
  policy_result: z.enum(['allow', 'deny']).nullable(),
  policy_reason: z.string().nullable(),
});
export type SanitisedFields = z.infer<typeof sanitisedFields>;

const envelope = { event_id: z.string().uuid() };

export const usageSettledV1 = sanitisedFields.extend({
  ...envelope,
  price_revision: z.string(),
  cost_microusd: microusd,
  /** null for an operator release: the operator attests a total, not its split */
  cost_microusd_by_category: z
    .object({
      input: microusd,
      cached_input: microusd,
      output: microusd,
      reasoning: microusd,
      /** the lines below are present only when non-zero (added after v1 shipped) */
      cache_write: microusd.optional(),
      audio_input: microusd.optional(),
      audio_output: microusd.optional(),
      image_output: microusd.optional(),
      /** per-call fees, the sum of `fee_lines` */
      fees: microusd.optional(),
    })
    .nullable(),
  /** the context tier's threshold (input tokens) the usage crossed; null or absent: base rates */
  context_tier_above_input_tokens: z.number().int().positive().nullable().optional(),
  /** the service tier whose rates priced the usage; absent: the default tier (or an event before tiers) */
  service_tier: z.string().max(32).optional(),
  /** one line per per-call-billed feature the provider reported */
  fee_lines: z.array(z.object({ feature: z.enum(PRICED_FEATURES), calls: count, microusd })).optional(),
  settled_at: isoTimestamp,
  /**
   * The attempt tree (issue 10; absent on events before it, null when the attempt did not say):
   * the attempt's number, whether its answer was the one the client got, how many attempts the
   * action had when this one ended, the hedge policy revision it ran under, and its deadline outcome.
   */
  attempt_no: z.number().int().positive().nullable().optional(),
  winner: z.boolean().nullable().optional(),
  attempts_total: z.number().int().positive().nullable().optional(),
  policy_revision_id: z.string().nullable().optional(),
  deadline_outcome: deadlineOutcome.nullable().optional(),
  /** the action's hedging-experiment cohort (issue 11; absent or null outside an experiment) */
  cohort: experimentCohort.nullable().optional(),
  /**
   * The experiment's facts (issue 11), present only on attempts of an action in an experiment, so
   * finance can rebuild the report from this topic (examples/finance-consumer): the experiment,
   * when the action was admitted, the action's acceptance verdict under the workload's policy as it
   * stood when the attempt settled (final on the winner's event: the winner ends the action before
   * it settles), and this attempt's own end (null: it never ended, e.g. swept) and candidates
   * (finish reason as the provider spelled it, outcome). Facts, not judgements: "on time" is the
   * winner's end within the experiment's useful deadline of the admission, judged by the report.
   */
  experiment_id: z.string().optional(),
  action_admitted_at: isoTimestamp.optional(),
  attempt_ended_at: isoTimestamp.nullable().optional(),
  action_acceptance_verdict: acceptanceVerdict.nullable().optional(),
  attempt_candidates: z
    .array(z.object({ finish_reason: z.string().nullable(), outcome: z.string().max(32) }))
    .max(EVIDENCE_BOUNDS.candidatesMax)
    .nullable()
    .optional(),
  /** the experiment pause the attempt was dispatched under (null: none); the report counts such actions apart */
  experiment_pause_id: z.string().nullable().optional(),
});
export type UsageSettledV1 = z.infer<typeof usageSettledV1>;

export const admissionDecisionV1 = sanitisedFields.extend({
  ...envelope,
  reserved_microusd: microusd.nullable(),
  exception_id: z.string().nullable(),
  /**
   * The maximum candidate count the decision applied (workload default, or an exception's when
   * the request asked for more than the default); null when the decision came before it was known
   * (unknown key or route, malformed body). Added after v1 shipped: optional, so events written
   * before it still parse.
   */
  approved_max_candidates: z.number().int().positive().nullable().optional(),
  /** SHA-256 hex of the request's workflow id (never the id); null or absent when it carried none */
  workflow_id_hash: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .nullable()
    .optional(),
});
export type AdmissionDecisionV1 = z.infer<typeof admissionDecisionV1>;

export const reconciliationRequiredV1 = sanitisedFields.extend({
  ...envelope,
  case_id: z.string(),
  reason: caseReason,
  exposure_microusd: microusd,
});
export type ReconciliationRequiredV1 = z.infer<typeof reconciliationRequiredV1>;

/** Outcomes of candidates that were requested but are absent from the response. */
export const ABSENT_CANDIDATE_OUTCOMES = ['missing', 'blocked'] as const;

export const candidateOutcome = z.object({
  index: z.number().int().nonnegative(),
  finish_reason: z.string().nullable(),
  /** ok | filtered | truncated | empty for candidates in the response; missing or blocked (prompt
   *  refused) for requested indexes the response did not contain */
  outcome: z.enum(['ok', 'filtered', 'truncated', 'empty', 'missing', 'blocked']),
});

/** Internal: one upstream attempt has ended (or been cut); settlement prices it. */
export const attemptCompletedV1 = sanitisedFields.extend({
  ...envelope,
  attempt_id: z.string(),
  attempt_no: z.number().int().positive(),
  attempt_role: attemptRole,
  outcome: z.enum(['succeeded', 'failed', 'cancelled', 'usage_missing']),
  http_status: z.number().int().nullable(),
  cached_input_tokens: count.nullable(),
  reasoning_tokens: count.nullable(),
  output_includes_reasoning: z.boolean(),
  candidates: z.array(candidateOutcome),
  prompt_block_reason: z.string().nullable(),
  attempts_total: z.number().int().positive(),
  action_final: z.boolean(),
  /**
   * usage fields the adapter did not know (names only, never values). When present, the attempt
   * was settled from the reported total and settlement opens a `usage_shape_unknown` case.
   */
  usage_unknown_fields: z
    .array(z.string().max(EVIDENCE_BOUNDS.unknownUsageFieldMaxChars))
    .max(EVIDENCE_BOUNDS.unknownUsageFieldsMax)
    .optional(),
  /**
   * Multi-candidate answers only: the fewest output tokens the returned candidates' text can have
   * cost (libs/domain `outputTokensFloor`), measured by dispatch — a count, never text. Settlement
   * opens a `usage_implausible` case when `output_tokens_total` is below it.
   */
  output_tokens_floor: count.optional(),
  /**
   * Billable detail the provider reported (issue 14). Each count is a subset of
   * `input_tokens` (cache writes, audio input) or of `output_tokens_total` (audio, image output);
   * null when the attempt carried no usage. Optional: events written before these fields parse.
   */
  cache_write_input_tokens: count.nullable().optional(),
  audio_input_tokens: count.nullable().optional(),
  audio_output_tokens: count.nullable().optional(),
  image_output_tokens: count.nullable().optional(),
  /**
   * The service tier billed: the provider's report, else the tier the request asked for, else
   * `default` (a request's `auto` counts as `default`); null when the attempt carried no usage.
   */
  service_tier: z.string().max(32).nullable().optional(),
  /**
   * Per-call-billed features the attempt used, in the unit the provider bills (docs/decisions.md,
   * "Billable usage detail"); absent features made no call. (zod 4: `partialRecord`, since a
   * `record` over an enum would demand every key.)
   */
  feature_calls: z.partialRecord(z.enum(PRICED_FEATURES), count).optional(),
  /**
   * Issue 10 (optional: events before it parse): whether this attempt won the action's
   * compare-and-set (its answer is the one the client got), whether it ended before the action's
   * deadline, after it, or was cancelled, and the hedge policy revision it ran under (null: none).
   */
  winner: z.boolean().optional(),
  deadline_outcome: deadlineOutcome.nullable().optional(),
  policy_revision_id: z.string().nullable().optional(),
  /** the action's hedging-experiment cohort (issue 11; absent outside an experiment) */
  cohort: experimentCohort.optional(),
});
export type AttemptCompletedV1 = z.infer<typeof attemptCompletedV1>;

export const policyChangedV1 = z.object({
  ...envelope,
  timestamp: isoTimestamp,
  entity: z.enum(['route', 'workload', 'api_key', 'exception', 'price_revision', 'scope_limit', 'hedge_policy', 'experiment']),
  entity_id: z.string(),
  change: z.string(),
  actor: z.string(),
});
export type PolicyChangedV1 = z.infer<typeof policyChangedV1>;

/**
 * Content-bearing envelopes (dispatch commands and replies): only routing metadata in clear,
 * the body AES-256-GCM encrypted (see libs/messaging content-cipher).
 */
export const encryptedBody = z.object({
  alg: z.literal('A256GCM'),
  kid: z.string(),
  iv: z.string(),
  tag: z.string(),
  ct: z.string(),
});
/**
 * The topics dispatch answers on, by registry key (libs/contracts topics.ts): applications'
 * replies for admission, verification probes' replies for policy. A receiver reads only its own.
 */
export const replyTopicKey = z.enum(['dispatchReplies', 'probeReplies']);
export type ReplyTopicKey = z.infer<typeof replyTopicKey>;

export const dispatchCommandEnvelopeV1 = z.object({
  ...envelope,
  action_id: z.string(),
  reply_to: z.string(),
  /** where dispatch answers; absent (a command from an older sender): `dispatchReplies` */
  reply_topic: replyTopicKey.optional(),
  dispatch_deadline: isoTimestamp,
  body: encryptedBody,
});
export type DispatchCommandEnvelopeV1 = z.infer<typeof dispatchCommandEnvelopeV1>;

/**
 * Admission to every dispatch instance: the client of a streamed action is gone (it left, or it
 * read too slowly and was cut), so its chunks need not travel back. The instance running the
 * attempt stops relaying them; it still reads the provider's stream to its end and records its
 * usage. Best effort: a lost signal only means chunks relayed to nobody, as before. No content.
 */
export const dispatchControlV1 = z.object({
  ...envelope,
  action_id: z.string().max(64),
  kind: z.literal('stop_relay'),
  reason: z.enum(['client_left', 'client_too_slow']),
  timestamp: isoTimestamp,
});
export type DispatchControlV1 = z.infer<typeof dispatchControlV1>;

export const dispatchReplyEnvelopeV1 = z.object({
  ...envelope,
  action_id: z.string(),
  reply_to: z.string(),
  /**
   * how long dispatch held the command before this reply, in ms on its own clock: from taking it
   * off the topic to publishing this reply (its claim, the provider's time, its records). The
   * receiver subtracts it from its own wait to learn how long commands queue (admission's load
   * shedding). Absent (an older dispatcher) or not a count: the reply is delivered, unmeasured.
   */
  held_ms: z.number().int().nonnegative().optional().catch(undefined),
  body: encryptedBody,
});
export type DispatchReplyEnvelopeV1 = z.infer<typeof dispatchReplyEnvelopeV1>;
