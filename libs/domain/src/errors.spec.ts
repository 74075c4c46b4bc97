import fc from 'fast-check';
import { DENIAL_CODES, DenialCode, DomainError, denialHttpStatus, denialShouldRetry } from './errors';

describe('denial mapping', () => {
  const table: Array<[DenialCode, number, boolean | null]> = [
    ['candidate_count_exceeds_policy', 400, false],
    ['route_contract_unverified', 403, false],
    ['budget_exhausted', 403, false],
    ['token_quota_exceeded', 429, true],
    ['concurrency_limit_exceeded', 429, true],
    ['invalid_request', 400, false],
    ['unknown_route', 404, false],
    ['unauthorized', 401, false],
    ['deadline_exceeded', 504, null],
    ['upstream_error', 502, null],
    ['idempotency_key_reused', 409, false],
  ];

  it.each(table)('%s -> HTTP %i, x-should-retry %p', (code, status, retry) => {
    expect(denialHttpStatus(code)).toBe(status);
    expect(denialShouldRetry(code)).toBe(retry);
  });

  it('the table covers every code exactly once', () => {
    expect(table.map(([c]) => c).sort()).toEqual([...DENIAL_CODES].sort());
  });

  it('property: retry is true exactly for 429s and unset exactly for 5xx', () => {
    fc.assert(
      fc.property(fc.constantFrom(...DENIAL_CODES), (code) => {
        const status = denialHttpStatus(code);
        const retry = denialShouldRetry(code);
        expect(retry === true).toBe(status === 429);
        expect(retry === null).toBe(status >= 500);
      }),
    );
  });

  it('rejects unknown codes at runtime', () => {
    expect(() => denialHttpStatus('nope' as DenialCode)).toThrow(/Unhandled denial code/);
    expect(() => denialShouldRetry('nope' as DenialCode)).toThrow(/Unhandled denial code/);
  });
});

describe('DomainError', () => {
  it('carries code, message and param', () => {
    const e = new DomainError('invalid_request', 'bad n', 'n');
    expect(e).toBeInstanceOf(Error);
    expect(e).toBeInstanceOf(DomainError);
    expect(e.name).toBe('DomainError');
    expect(e.code).toBe('invalid_request');
    expect(e.message).toBe('bad n');
    expect(e.param).toBe('n');
    expect(new DomainError('unauthorized', 'x').param).toBeUndefined();
  });
});
