import fc from 'fast-check';
import { CandidateException, approvedMaxCandidates, normaliseCandidateCount } from './candidates';

describe('normaliseCandidateCount', () => {
  it.each([
    [undefined, 4, { ok: true, requested: null, effective: 1 }],
    [null, 4, { ok: true, requested: null, effective: 1 }],
    [1, 1, { ok: true, requested: 1, effective: 1 }],
    [3, 4, { ok: true, requested: 3, effective: 3 }],
    [4, 4, { ok: true, requested: 4, effective: 4 }],
  ])('requested %p with max %p -> %j', (requested, approvedMax, expected) => {
    expect(normaliseCandidateCount({ requested, approvedMax })).toEqual(expected);
  });

  it.each([0, -1, -0, 1.5, '2', '1', NaN, Infinity, -Infinity, true, false, {}, [], [2], 2n].map((v) => [v]))(
    'rejects %p as invalid_request',
    (requested) => {
      const r = normaliseCandidateCount({ requested, approvedMax: 8 });
      expect(r).toMatchObject({ ok: false, code: 'invalid_request', param: 'n' });
    },
  );

  it('refuses counts above the approved maximum with actionable guidance', () => {
    const r = normaliseCandidateCount({ requested: 5, approvedMax: 2, param: 'candidateCount' });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.code).toBe('candidate_count_exceeds_policy');
    expect(r.param).toBe('candidateCount');
    expect(r.message).toContain('maximum of 2');
    expect(r.message).toContain('request at most 2');
    expect(r.message).toContain('approved exception');
  });

  it('throws on a misconfigured approvedMax', () => {
    expect(() => normaliseCandidateCount({ requested: 1, approvedMax: 0 })).toThrow(RangeError);
  });

  it('property: when ok, effective is within [1, approvedMax]', () => {
    fc.assert(
      fc.property(fc.anything(), fc.integer({ min: 1, max: 64 }), (requested, approvedMax) => {
        const r = normaliseCandidateCount({ requested, approvedMax });
        if (r.ok) {
          expect(r.effective).toBeGreaterThanOrEqual(1);
          expect(r.effective).toBeLessThanOrEqual(approvedMax);
          expect(Number.isInteger(r.effective)).toBe(true);
        }
      }),
    );
  });

  it('property: omitted -> 1', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), (approvedMax) => {
        expect(normaliseCandidateCount({ requested: undefined, approvedMax })).toEqual({
          ok: true,
          requested: null,
          effective: 1,
        });
      }),
    );
  });

  it('property: any non-integer value -> invalid_request', () => {
    const nonInteger = fc.oneof(
      fc.double().filter((d) => !Number.isInteger(d)),
      fc.string(),
      fc.boolean(),
      fc.object(),
      fc.array(fc.anything()),
      fc.bigInt(),
    );
    fc.assert(
      fc.property(nonInteger, fc.integer({ min: 1, max: 64 }), (requested, approvedMax) => {
        const r = normaliseCandidateCount({ requested, approvedMax });
        expect(r).toMatchObject({ ok: false, code: 'invalid_request' });
      }),
    );
  });

  it('property: integers >= 1 are accepted iff within the approved max', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000 }), fc.integer({ min: 1, max: 64 }), (requested, approvedMax) => {
        const r = normaliseCandidateCount({ requested, approvedMax });
        if (requested <= approvedMax) expect(r).toEqual({ ok: true, requested, effective: requested });
        else expect(r).toMatchObject({ ok: false, code: 'candidate_count_exceeds_policy' });
      }),
    );
  });
});

describe('approvedMaxCandidates', () => {
  const now = new Date('2030-06-01T00:00:00Z');
  const later = new Date('2030-07-01T00:00:00Z');
  const base: CandidateException = { maxCandidates: 8, status: 'active', expiresAt: later, routeId: null };

  it.each<[string, CandidateException | null | undefined, { max: number; source: string }]>([
    ['no exception', undefined, { max: 2, source: 'workload' }],
    ['null exception', null, { max: 2, source: 'workload' }],
    ['active, all routes', base, { max: 8, source: 'exception' }],
    ["'approved' status", { ...base, status: 'approved' }, { max: 8, source: 'exception' }],
    ['matching route', { ...base, routeId: 'r1' }, { max: 8, source: 'exception' }],
    ['other route', { ...base, routeId: 'r2' }, { max: 2, source: 'workload' }],
    ['requested only', { ...base, status: 'requested' }, { max: 2, source: 'workload' }],
    ['revoked', { ...base, status: 'revoked' }, { max: 2, source: 'workload' }],
    ['expired status', { ...base, status: 'expired' }, { max: 2, source: 'workload' }],
    ['expires exactly now', { ...base, expiresAt: now }, { max: 2, source: 'workload' }],
    ['past expiry', { ...base, expiresAt: new Date('2030-01-01T00:00:00Z') }, { max: 2, source: 'workload' }],
    ['lower than default', { ...base, maxCandidates: 1 }, { max: 2, source: 'workload' }],
  ])('%s', (_label, exception, expected) => {
    expect(approvedMaxCandidates({ workloadDefaultMax: 2, exception, routeId: 'r1', now })).toEqual(expected);
  });

  it('property: an exception never lowers the max', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 32 }),
        fc.integer({ min: 0, max: 64 }),
        fc.constantFrom('requested', 'active', 'approved', 'rejected', 'revoked', 'expired') as fc.Arbitrary<CandidateException['status']>,
        fc.integer({ min: -10_000, max: 10_000 }),
        fc.constantFrom(null, 'r1', 'r2'),
        (workloadDefaultMax, maxCandidates, status, offsetMs, routeId) => {
          const exception = { maxCandidates, status, expiresAt: new Date(now.getTime() + offsetMs), routeId };
          const r = approvedMaxCandidates({ workloadDefaultMax, exception, routeId: 'r1', now });
          expect(r.max).toBeGreaterThanOrEqual(workloadDefaultMax);
          expect(r.max).toBe(r.source === 'exception' ? maxCandidates : workloadDefaultMax);
        },
      ),
    );
  });
});
