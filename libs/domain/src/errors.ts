/**
 * Denials the gateway can return, and how each maps onto HTTP.
 *
 * The mapping lives in the domain (not in the HTTP layer) so that every adapter — REST,
 * Kafka replies, audit rows — agrees on whether a denial is the caller's fault, a policy
 * decision, or a transient condition worth retrying.
 */

export type DenialCode =
  | 'candidate_count_exceeds_policy'
  | 'route_contract_unverified'
  | 'budget_exhausted'
  | 'token_quota_exceeded'
  | 'concurrency_limit_exceeded'
  | 'invalid_request'
  | 'unknown_route'
  | 'unauthorized'
  | 'deadline_exceeded'
  | 'upstream_error'
  | 'idempotency_key_reused';

export const DENIAL_CODES: readonly DenialCode[] = [
  'candidate_count_exceeds_policy',
  'route_contract_unverified',
  'budget_exhausted',
  'token_quota_exceeded',
  'concurrency_limit_exceeded',
  'invalid_request',
  'unknown_route',
  'unauthorized',
  'deadline_exceeded',
  'upstream_error',
  'idempotency_key_reused',
];

/** Compile-time exhaustiveness guard for switches over string-literal unions. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`Unhandled ${what}: ${String(value)}`);
}

export function denialHttpStatus(code: DenialCode): number {
  switch (code) {
    case 'candidate_count_exceeds_policy':
      return 400;
    case 'route_contract_unverified':
      return 403;
    case 'budget_exhausted':
      return 403;
    case 'token_quota_exceeded':
      return 429;
    case 'concurrency_limit_exceeded':
      return 429;
    case 'invalid_request':
      return 400;
    case 'unknown_route':
      return 404;
    case 'unauthorized':
      return 401;
    case 'deadline_exceeded':
      return 504;
    case 'upstream_error':
      return 502;
    case 'idempotency_key_reused':
      return 409;
    default:
      return assertNever(code, 'denial code');
  }
}

/**
 * Value for the `x-should-retry` response header, or `null` to leave it unset.
 *
 * OpenAI-style SDKs retry 429/5xx by default and honour `x-should-retry` as an override.
 * A denial that can only pass after someone changes something (policy, budget, request,
 * credentials) must say `false`, otherwise SDKs burn attempts against a wall. The two 429s
 * clear by themselves as windows roll and in-flight calls finish, so they say `true`.
 * For 502/504 the gateway has no better knowledge than the SDK's own default, so it stays silent.
 */
export function denialShouldRetry(code: DenialCode): boolean | null {
  switch (code) {
    case 'token_quota_exceeded':
    case 'concurrency_limit_exceeded':
      return true;
    case 'deadline_exceeded':
    case 'upstream_error':
      return null;
    case 'candidate_count_exceeds_policy':
    case 'route_contract_unverified':
    case 'budget_exhausted':
    case 'invalid_request':
    case 'unknown_route':
    case 'unauthorized':
    case 'idempotency_key_reused':
      return false;
    default:
      return assertNever(code, 'denial code');
  }
}

export class DomainError extends Error {
  constructor(
    public readonly code: DenialCode,
    message: string,
    public readonly param?: string,
  ) {
    super(message);
    this.name = 'DomainError';
  }
}
