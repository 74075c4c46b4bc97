import fc from 'fast-check';
import {
  DENIAL_CODES,
  DomainError,
  ERROR_CODES,
  ErrorCode,
  POLICY_ERROR_CODES,
  RECONCILIATION_ERROR_CODES,
  denialHttpStatus,
  denialShouldRetry,
} from './errors';

describe('error registry', () => {
  // DESIGN §4 (public admission API) first, then the operator APIs' codes.
  const table: Array<[ErrorCode, number, boolean | null]> = [
    ['candidate_count_exceeds_policy', 400, false],
    ['candidate_count_without_sampling', 400, false],
    ['route_contract_unverified', 403, false],
    ['budget_exhausted', 403, false],
    ['token_quota_exceeded', 429, true],
    ['concurrency_limit_exceeded', 429, true],
    ['invalid_request', 400, false],
    ['unknown_route', 404, false],
    ['unauthorized', 401, false],
    ['deadline_exceeded', 504, null],
    ['upstream_error', 502, null],
    ['upstream_credential_missing', 502, false],
    ['unpriced_input', 400, false],
    ['unpriced_feature', 400, false],
    ['payload_too_large', 413, false],
    ['service_unavailable', 503, true],
    ['idempotency_key_reused', 409, false],
    ['idempotency_key_in_progress', 409, true],
    ['not_found', 404, false],
    ['forbidden', 403, false],
    ['self_approval', 403, false],
    ['not_an_approver', 403, false],
    ['probe_failed', 409, false],
    ['route_exists', 409, false],
    ['alias_taken', 409, false],
    ['version_not_current', 409, false],
    ['invalid_transition', 409, false],
    ['exception_expired', 409, false],
    ['concurrent_change', 409, true],
    ['key_already_revoked', 409, false],
    ['price_revision_exists', 409, false],
    ['route_unpriced', 409, false],
    ['projection_exceeds_budget', 409, false],
    ['experiment_running', 409, false],
    ['case_not_found', 404, false],
    ['case_already_resolved', 409, false],
    ['attempt_already_settled', 409, false],
    ['case_not_resolvable', 409, false],
    ['provider_request_mismatch', 409, false],
    ['internal_error', 500, null],
    ['authentication_rate_limited', 429, true],
    ['background_not_supported', 400, false],
    ['stored_state_not_supported', 400, false],
    ['provider_storage_not_allowed', 400, false],
    ['fanout_limit_exceeded', 429, true],
  ];

  it.each(table)('%s -> HTTP %i, x-should-retry %p', (code, status, retry) => {
    expect(denialHttpStatus(code)).toBe(status);
    expect(denialShouldRetry(code)).toBe(retry);
  });

  it('the table covers every code exactly once, and every code list is part of the registry', () => {
    expect(table.map(([c]) => c).sort()).toEqual([...ERROR_CODES].sort());
    expect(new Set(ERROR_CODES).size).toBe(ERROR_CODES.length);
    for (const c of [...DENIAL_CODES, ...POLICY_ERROR_CODES, ...RECONCILIATION_ERROR_CODES]) expect(ERROR_CODES).toContain(c);
  });

  it('codes are snake_case', () => {
    for (const c of ERROR_CODES) expect(c).toMatch(/^[a-z]+(_[a-z]+)*$/);
  });

  it('property: never retry a 4xx that needs a change; say nothing for 500/502/504 unless an operator must act', () => {
    fc.assert(
      fc.property(fc.constantFrom(...ERROR_CODES), (code) => {
        const status = denialHttpStatus(code);
        const retry = denialShouldRetry(code);
        if (status === 429 || status === 503) expect(retry).toBe(true);
        // A missing upstream credential is a 502 only an operator clears: retrying only waits.
        const needsOperator = code === 'upstream_credential_missing';
        expect(retry === null).toBe((status === 500 || status === 502 || status === 504) && !needsOperator);
        if (retry === true && status < 500) expect([429, 409]).toContain(status);
      }),
    );
  });

  it('rejects unknown codes at runtime', () => {
    expect(() => denialHttpStatus('nope' as ErrorCode)).toThrow(/Unhandled error code/);
    expect(() => denialShouldRetry('nope' as ErrorCode)).toThrow(/Unhandled error code/);
  });
});

describe('DomainError', () => {
  it('carries code, message, param and headers', () => {
    const e = new DomainError('invalid_request', 'bad n', 'n');
    expect(e).toBeInstanceOf(Error);
    expect(e).toBeInstanceOf(DomainError);
    expect(e.name).toBe('DomainError');
    expect(e.code).toBe('invalid_request');
    expect(e.message).toBe('bad n');
    expect(e.param).toBe('n');
    expect(e.headers).toEqual({});
    expect(new DomainError('unauthorized', 'x').param).toBeUndefined();
    expect(new DomainError('token_quota_exceeded', 'x', undefined, { 'retry-after': '3' }).headers).toEqual({ 'retry-after': '3' });
  });
});
