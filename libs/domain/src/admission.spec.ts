import fc from 'fast-check';
import { budgetPeriodStart, contractStatus, decideAdmission, tokenWindow, AdmissionInput, ExceptionGrant } from './admission';

const now = new Date('2026-11-30T12:00:00Z');
const price = {
  id: 'p',
  inputPerMTokMicrousd: 1_000_000n,
  cachedInputPerMTokMicrousd: 500_000n,
  outputPerMTokMicrousd: 4_000_000n,
  reasoningPerMTokMicrousd: 4_000_000n,
};
const verified = {
  routeId: 'r1',
  candidateParam: 'n',
  maxCandidates: 8,
  outputCapSemantics: 'per_candidate' as const,
  verifiedAt: new Date('2026-11-29T00:00:00Z'),
  verificationTtlSeconds: 30 * 86400,
};
const grant: ExceptionGrant = {
  id: 'e1',
  routeId: null,
  maxCandidates: 2,
  perCandidateOutputCeiling: 200,
  budgetMicrousd: 1_000_000n,
  expiresAt: new Date('2026-12-07T00:00:00Z'),
  status: 'active',
};

function input(over: Partial<AdmissionInput> = {}): AdmissionInput {
  return {
    now,
    workload: { defaultMaxCandidates: 1, perCandidateOutputCeiling: 256 },
    route: verified,
    fallbackRoutes: [],
    exceptions: [],
    requestedCandidates: undefined,
    candidateParamName: 'n',
    requestedOutputCap: null,
    stream: false,
    inputTokensEstimate: 100,
    price,
    ...over,
  };
}

describe('decideAdmission', () => {
  it('refuses (invalid_request) a stored policy whose ceiling overflows the reservation columns, and admits a lower cap', () => {
    const old = { workload: { defaultMaxCandidates: 1, perCandidateOutputCeiling: 2_147_483_647 } };
    expect(decideAdmission(input(old))).toMatchObject({ ok: false, code: 'invalid_request', param: 'max_tokens' });
    expect(decideAdmission(input({ ...old, requestedOutputCap: 1000 }))).toMatchObject({ ok: true, reservedOutputTokens: 1000 });
    const grantTooWide = { ...grant, perCandidateOutputCeiling: 1_100_000_000 };
    expect(decideAdmission(input({ requestedCandidates: 2, exceptions: [grantTooWide] }))).toMatchObject({
      ok: false,
      code: 'invalid_request',
    });
  });

  it.each([
    ['omitted → one candidate', {}, { ok: true, effective: 1, requested: null }],
    ['explicit 1', { requestedCandidates: 1 }, { ok: true, effective: 1, requested: 1 }],
    ['3 over default max', { requestedCandidates: 3 }, { ok: false, code: 'candidate_count_exceeds_policy' }],
    ['0 is invalid', { requestedCandidates: 0 }, { ok: false, code: 'invalid_request' }],
    ['1.5 is invalid', { requestedCandidates: 1.5 }, { ok: false, code: 'invalid_request' }],
    ['"2" is invalid', { requestedCandidates: '2' }, { ok: false, code: 'invalid_request' }],
    ['2 within exception', { requestedCandidates: 2, exceptions: [grant] }, { ok: true, effective: 2 }],
    ['4 over exception max', { requestedCandidates: 4, exceptions: [grant] }, { ok: false, code: 'candidate_count_exceeds_policy' }],
    [
      'expired exception',
      { requestedCandidates: 2, exceptions: [{ ...grant, expiresAt: now }] },
      { ok: false, code: 'candidate_count_exceeds_policy' },
    ],
    [
      'revoked exception',
      { requestedCandidates: 2, exceptions: [{ ...grant, status: 'revoked' }] },
      { ok: false, code: 'candidate_count_exceeds_policy' },
    ],
    [
      'other route exception',
      { requestedCandidates: 2, exceptions: [{ ...grant, routeId: 'r2' }] },
      { ok: false, code: 'candidate_count_exceeds_policy' },
    ],
    [
      'unverified contract',
      { requestedCandidates: 2, exceptions: [grant], route: { ...verified, verifiedAt: null } },
      { ok: false, code: 'route_contract_unverified' },
    ],
    [
      'stale contract',
      { requestedCandidates: 2, exceptions: [grant], route: { ...verified, verificationTtlSeconds: 60 } },
      { ok: false, code: 'route_contract_unverified' },
    ],
    [
      'undocumented cap semantics',
      { requestedCandidates: 2, exceptions: [grant], route: { ...verified, outputCapSemantics: null } },
      { ok: false, code: 'route_contract_unverified' },
    ],
    [
      'multi-candidate stream without permission',
      { requestedCandidates: 2, exceptions: [grant], stream: true },
      { ok: false, code: 'candidate_count_exceeds_policy' },
    ],
    [
      'multi-candidate stream with permission',
      { requestedCandidates: 2, exceptions: [{ ...grant, allowsStreaming: true }], stream: true },
      { ok: true, effective: 2 },
    ],
    [
      'two candidates at temperature 0 without permission',
      { requestedCandidates: 2, exceptions: [grant], deterministicSampling: 'temperature' },
      { ok: false, code: 'candidate_count_without_sampling', param: 'temperature', approvedMax: 2 },
    ],
    [
      'two candidates at temperature 0 with an exception that allows it',
      { requestedCandidates: 2, exceptions: [{ ...grant, allowsDeterministicSampling: true }], deterministicSampling: 'temperature' },
      { ok: true, effective: 2 },
    ],
    [
      'a permitting exception too narrow for the count does not allow it',
      {
        requestedCandidates: 3,
        exceptions: [
          { ...grant, id: 'wide', maxCandidates: 4 },
          { ...grant, id: 'narrow', allowsDeterministicSampling: true },
        ],
        deterministicSampling: 'generationConfig.topK',
      },
      { ok: false, code: 'candidate_count_without_sampling', param: 'generationConfig.topK' },
    ],
    [
      'a permitting exception also counts when the workload default admits the count',
      {
        workload: { defaultMaxCandidates: 2, perCandidateOutputCeiling: 256 },
        requestedCandidates: 2,
        exceptions: [{ ...grant, allowsDeterministicSampling: true }],
        deterministicSampling: 'temperature',
      },
      { ok: true, effective: 2, exception: null },
    ],
    [
      'the workload default alone does not allow deterministic sampling',
      { workload: { defaultMaxCandidates: 2, perCandidateOutputCeiling: 256 }, requestedCandidates: 2, deterministicSampling: 'top_k' },
      { ok: false, code: 'candidate_count_without_sampling' },
    ],
    [
      'one candidate at temperature 0 is fine',
      { requestedCandidates: 1, deterministicSampling: 'temperature' },
      { ok: true, effective: 1 },
    ],
    [
      'unverified contract refuses one candidate too',
      { route: { ...verified, verifiedAt: null, candidateParam: null, outputCapSemantics: null } },
      { ok: false, code: 'route_contract_unverified' },
    ],
    [
      'stale contract refuses one candidate too',
      { route: { ...verified, verificationTtlSeconds: 60 } },
      { ok: false, code: 'route_contract_unverified' },
    ],
    [
      'verified contract without multi-candidate documentation serves one candidate',
      { route: { ...verified, candidateParam: null, outputCapSemantics: null } },
      { ok: true, effective: 1 },
    ],
  ])('%s', (_name, over, expected) => {
    expect(decideAdmission(input(over as Partial<AdmissionInput>))).toMatchObject(expected);
  });

  it.each([
    ['over the workload default', { requestedCandidates: 3 }, 1],
    ['over an exception', { requestedCandidates: 4, exceptions: [grant] }, 2],
    ['an unverified route', { route: { ...verified, verifiedAt: null } }, 1],
    ['an invalid count', { requestedCandidates: 0, exceptions: [grant] }, 2],
  ])('every refusal names the approved maximum it applied: %s', (_name, over, max) => {
    expect(decideAdmission(input(over as Partial<AdmissionInput>))).toMatchObject({ ok: false, approvedMax: max });
  });

  it('reserves effective × ceiling for per-candidate caps and the ceiling alone for shared caps', () => {
    const per = decideAdmission(input({ requestedCandidates: 2, exceptions: [grant] }));
    const shared = decideAdmission(
      input({ requestedCandidates: 2, exceptions: [grant], route: { ...verified, outputCapSemantics: 'shared' } }),
    );
    expect(per).toMatchObject({ ok: true, outputCeiling: 200, reservedOutputTokens: 400 });
    expect(shared).toMatchObject({ ok: true, outputCeiling: 200, reservedOutputTokens: 200 });
    if (per.ok && shared.ok) expect(per.reservedMicrousd).toBeGreaterThan(shared.reservedMicrousd);
  });

  it('clamps the output cap to the policy ceiling and keeps a smaller requested cap', () => {
    expect(decideAdmission(input({ requestedOutputCap: 10_000 }))).toMatchObject({ ok: true, outputCeiling: 256 });
    expect(decideAdmission(input({ requestedOutputCap: 16 }))).toMatchObject({ ok: true, outputCeiling: 16 });
  });

  it('disables fallback when a fallback route cannot honour multi-candidate', () => {
    const d = decideAdmission(
      input({ requestedCandidates: 2, exceptions: [grant], fallbackRoutes: [{ ...verified, routeId: 'r2', verifiedAt: null }] }),
    );
    expect(d).toMatchObject({ ok: true, fallbackRouteIds: [] });
    const d1 = decideAdmission(
      input({
        fallbackRoutes: [
          { ...verified, routeId: 'r2', verifiedAt: null },
          { ...verified, routeId: 'r3' },
        ],
      }),
    );
    expect(d1).toMatchObject({ ok: true, fallbackRouteIds: ['r3'] });
  });

  it('never admits more candidates than approved (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 8 }),
        fc.option(fc.integer({ min: -3, max: 12 }), { nil: undefined }),
        (workloadMax, exMax, requested) => {
          const d = decideAdmission(
            input({
              workload: { defaultMaxCandidates: workloadMax, perCandidateOutputCeiling: 100 },
              exceptions: [{ ...grant, maxCandidates: exMax }],
              requestedCandidates: requested,
            }),
          );
          if (d.ok) {
            expect(d.effective).toBeLessThanOrEqual(Math.max(workloadMax, exMax));
            expect(d.effective).toBeGreaterThanOrEqual(1);
            expect(d.reservedOutputTokens).toBe(d.effective * d.outputCeiling);
          }
          if (requested === undefined) expect(d.ok && d.effective === 1).toBe(true);
        },
      ),
    );
  });
});

describe('contractStatus and budget periods', () => {
  it('classifies contracts', () => {
    expect(contractStatus({ verifiedAt: null, verificationTtlSeconds: 10 }, now)).toBe('unverified');
    expect(contractStatus({ verifiedAt: new Date(now.getTime() - 5000), verificationTtlSeconds: 10 }, now)).toBe('verified');
    expect(contractStatus({ verifiedAt: new Date(now.getTime() - 11000), verificationTtlSeconds: 10 }, now)).toBe('stale');
  });

  it('starts periods at UTC boundaries', () => {
    expect(budgetPeriodStart('month', now).toISOString()).toBe('2026-11-01T00:00:00.000Z');
    expect(budgetPeriodStart('day', now).toISOString()).toBe('2026-11-30T00:00:00.000Z');
  });
});

describe('tokenWindow', () => {
  it.each([
    ['2026-11-30T12:00:00.000Z', '2026-11-30T12:00:00.000Z', 60],
    ['2026-11-30T12:00:59.500Z', '2026-11-30T12:00:00.000Z', 1],
    ['2026-11-30T12:07:15.000Z', '2026-11-30T12:07:00.000Z', 45],
  ])('%s → window %s, retry after %is', (at, start, retry) => {
    const w = tokenWindow(new Date(at));
    expect(w.windowStart.toISOString()).toBe(start);
    expect(w.retryAfterSeconds).toBe(retry);
  });
});
