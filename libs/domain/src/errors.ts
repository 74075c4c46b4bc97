/**
 * Every error code a gateway API can answer with, and how each maps onto HTTP. This is the one
 * registry: use cases throw `DomainError` (or a thin subclass) with one of these codes, and the one
 * exception filter in service-kit turns it into a response. Adding a code means adding it to the
 * exhaustive switches below, so no code can exist without a status and a retry verdict.
 *
 * The mapping lives in the domain (not in the HTTP layer) so that every adapter — REST,
 * Kafka replies, audit rows — agrees on whether a refusal is the caller's fault, a policy
 * decision, or a transient condition worth retrying.
 */

/**
 * The public admission API's codes (DESIGN §4), plus the Idempotency-Key conflict and its first
 * request still running, the 429 of a source address over its failed-authentication budget (every
 * service answers it), the 502 of a route whose upstream credential dispatch cannot resolve
 * (nothing was sent upstream), and the Responses API refusals: background runs, state stored at
 * the provider (previous_response_id, conversation) and `store: true` on a workload that does not
 * allow provider storage.
 */
export type DenialCode =
  | 'candidate_count_exceeds_policy'
  | 'candidate_count_without_sampling'
  | 'route_contract_unverified'
  | 'budget_exhausted'
  | 'token_quota_exceeded'
  | 'concurrency_limit_exceeded'
  | 'invalid_request'
  | 'unknown_route'
  | 'unauthorized'
  | 'deadline_exceeded'
  | 'upstream_error'
  | 'upstream_credential_missing'
  | 'unpriced_input'
  | 'unpriced_feature'
  | 'payload_too_large'
  | 'service_unavailable'
  | 'idempotency_key_reused'
  | 'idempotency_key_in_progress'
  | 'authentication_rate_limited'
  | 'background_not_supported'
  | 'stored_state_not_supported'
  | 'provider_storage_not_allowed'
  | 'fanout_limit_exceeded';

export const DENIAL_CODES: readonly DenialCode[] = [
  'candidate_count_exceeds_policy',
  'candidate_count_without_sampling',
  'route_contract_unverified',
  'budget_exhausted',
  'token_quota_exceeded',
  'concurrency_limit_exceeded',
  'invalid_request',
  'unknown_route',
  'unauthorized',
  'deadline_exceeded',
  'upstream_error',
  'upstream_credential_missing',
  'unpriced_input',
  'unpriced_feature',
  'payload_too_large',
  'service_unavailable',
  'idempotency_key_reused',
  'idempotency_key_in_progress',
  'authentication_rate_limited',
  'background_not_supported',
  'stored_state_not_supported',
  'provider_storage_not_allowed',
  'fanout_limit_exceeded',
];

/** Refusals of the policy API (routes, workloads, keys, exceptions, prices). */
export type PolicyErrorCode =
  | 'not_found'
  | 'self_approval'
  | 'not_an_approver'
  | 'probe_failed'
  | 'route_exists'
  | 'alias_taken'
  | 'version_not_current'
  | 'invalid_transition'
  | 'exception_expired'
  | 'concurrent_change'
  | 'key_already_revoked'
  | 'price_revision_exists'
  | 'route_unpriced'
  | 'projection_exceeds_budget'
  | 'experiment_running';

export const POLICY_ERROR_CODES: readonly PolicyErrorCode[] = [
  'not_found',
  'self_approval',
  'not_an_approver',
  'probe_failed',
  'route_exists',
  'alias_taken',
  'version_not_current',
  'invalid_transition',
  'exception_expired',
  'concurrent_change',
  'key_already_revoked',
  'price_revision_exists',
  'route_unpriced',
  'projection_exceeds_budget',
  'experiment_running',
];

/** Refusals of the reconciliation case API. */
export type ReconciliationErrorCode =
  'case_not_found' | 'case_already_resolved' | 'attempt_already_settled' | 'case_not_resolvable' | 'provider_request_mismatch';

export const RECONCILIATION_ERROR_CODES: readonly ReconciliationErrorCode[] = [
  'case_not_found',
  'case_already_resolved',
  'attempt_already_settled',
  'case_not_resolvable',
  'provider_request_mismatch',
];

/**
 * Every code any gateway API answers with: the public ones, the operator APIs' ones, `forbidden`
 * (a valid credential without the right: a workload key on an operator API, a missing role) and
 * `internal_error` (anything unexpected, answered without internals).
 */
export type ErrorCode = DenialCode | PolicyErrorCode | ReconciliationErrorCode | 'forbidden' | 'internal_error';

export const ERROR_CODES: readonly ErrorCode[] = [
  ...DENIAL_CODES,
  ...POLICY_ERROR_CODES.filter((c) => !(DENIAL_CODES as readonly string[]).includes(c)),
  ...RECONCILIATION_ERROR_CODES,
  'forbidden',
  'internal_error',
];

/** Compile-time exhaustiveness guard for switches over string-literal unions. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`Unhandled ${what}: ${String(value)}`);
}

export function denialHttpStatus(code: ErrorCode): number {
  switch (code) {
    case 'candidate_count_exceeds_policy':
    case 'candidate_count_without_sampling':
    case 'invalid_request':
    case 'unpriced_input':
    case 'unpriced_feature':
    case 'background_not_supported':
    case 'stored_state_not_supported':
    case 'provider_storage_not_allowed':
      return 400;
    case 'unauthorized':
      return 401;
    case 'route_contract_unverified':
    case 'budget_exhausted':
    case 'forbidden':
    case 'self_approval':
    case 'not_an_approver':
      return 403;
    case 'unknown_route':
    case 'not_found':
    case 'case_not_found':
      return 404;
    case 'idempotency_key_reused':
    case 'idempotency_key_in_progress':
    case 'probe_failed':
    case 'route_exists':
    case 'alias_taken':
    case 'version_not_current':
    case 'invalid_transition':
    case 'exception_expired':
    case 'concurrent_change':
    case 'key_already_revoked':
    case 'price_revision_exists':
    case 'route_unpriced':
    case 'projection_exceeds_budget':
    case 'experiment_running':
    case 'case_already_resolved':
    case 'attempt_already_settled':
    case 'case_not_resolvable':
    case 'provider_request_mismatch':
      return 409;
    case 'payload_too_large':
      return 413;
    case 'token_quota_exceeded':
    case 'concurrency_limit_exceeded':
    case 'authentication_rate_limited':
    case 'fanout_limit_exceeded':
      return 429;
    case 'internal_error':
      return 500;
    case 'upstream_error':
    case 'upstream_credential_missing':
      return 502;
    case 'service_unavailable':
      return 503;
    case 'deadline_exceeded':
      return 504;
    default:
      return assertNever(code, 'error code');
  }
}

/**
 * Value for the `x-should-retry` response header, or `null` to leave it unset.
 *
 * OpenAI-style SDKs retry 409/429/5xx by default and honour `x-should-retry` as an override.
 * A refusal that can only pass after someone changes something (policy, budget, request,
 * credentials, a case's state) must say `false`, otherwise SDKs burn attempts against a wall.
 * What clears by itself says `true`: the 429s (windows roll, in-flight calls finish), a 503
 * (pool or broker back; it carries Retry-After), a lost optimistic race (`concurrent_change`) and
 * an Idempotency-Key whose first request is still running (`idempotency_key_in_progress`).
 * For 500/502/504 the gateway has no better knowledge than the SDK's own default, so it stays silent.
 */
export function denialShouldRetry(code: ErrorCode): boolean | null {
  switch (code) {
    case 'token_quota_exceeded':
    case 'concurrency_limit_exceeded':
    case 'authentication_rate_limited':
    case 'fanout_limit_exceeded':
    case 'service_unavailable':
    case 'concurrent_change':
    case 'idempotency_key_in_progress':
      return true;
    case 'deadline_exceeded':
    case 'upstream_error':
    case 'internal_error':
      return null;
    case 'candidate_count_exceeds_policy':
    case 'candidate_count_without_sampling':
    case 'route_contract_unverified':
    case 'budget_exhausted':
    case 'invalid_request':
    case 'unknown_route':
    case 'unauthorized':
    case 'upstream_credential_missing':
    case 'unpriced_input':
    case 'unpriced_feature':
    case 'background_not_supported':
    case 'stored_state_not_supported':
    case 'provider_storage_not_allowed':
    case 'payload_too_large':
    case 'idempotency_key_reused':
    case 'forbidden':
    case 'not_found':
    case 'self_approval':
    case 'not_an_approver':
    case 'probe_failed':
    case 'route_exists':
    case 'alias_taken':
    case 'version_not_current':
    case 'invalid_transition':
    case 'exception_expired':
    case 'key_already_revoked':
    case 'price_revision_exists':
    case 'route_unpriced':
    case 'projection_exceeds_budget':
    case 'experiment_running':
    case 'case_not_found':
    case 'case_already_resolved':
    case 'attempt_already_settled':
    case 'case_not_resolvable':
    case 'provider_request_mismatch':
      return false;
    default:
      return assertNever(code, 'error code');
  }
}

/**
 * The one error use cases throw. `param` names the offending request field; `headers` are extra
 * response headers the refusal carries (Retry-After for the 429s, the action id of a denied
 * admission), plain strings so the domain stays free of HTTP types.
 */
export class DomainError<C extends ErrorCode = ErrorCode> extends Error {
  constructor(
    public readonly code: C,
    message: string,
    public readonly param?: string,
    public readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}
