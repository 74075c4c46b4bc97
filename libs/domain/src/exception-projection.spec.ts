import fc from 'fast-check';
import {
  checkApprovalProjection,
  ExceptionVolume,
  outcomeDirection,
  priceInForceAt,
  projectException,
  projectExceptionCostMicrousd,
  ProjectionRoute,
} from './exception-projection';
import { PriceRevision } from './pricing';
import { TEST_PRICE } from './price.fixture';
import { OutputCapSemantics } from './reservation';

/** $2.50 in, $10 out per million tokens. */
const price = TEST_PRICE;

const volume = (over: Partial<ExceptionVolume> = {}): ExceptionVolume => ({
  expectedRequests: 1_000,
  typicalInputTokens: 500,
  maxCandidates: 2,
  perCandidateOutputCeiling: 256,
  ...over,
});

const priceArb: fc.Arbitrary<PriceRevision> = fc.record({
  id: fc.constant('arb'),
  inputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 100_000_000n }),
  cachedInputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 100_000_000n }),
  outputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 200_000_000n }),
  reasoningPerMTokMicrousd: fc.bigInt({ min: 0n, max: 200_000_000n }),
});
const volumeArb: fc.Arbitrary<ExceptionVolume> = fc.record({
  expectedRequests: fc.integer({ min: 1, max: 100_000_000 }),
  typicalInputTokens: fc.integer({ min: 1, max: 16_777_216 }),
  maxCandidates: fc.integer({ min: 1, max: 128 }),
  perCandidateOutputCeiling: fc.integer({ min: 1, max: 1_000_000 }),
});
const semanticsArb = fc.constantFrom<OutputCapSemantics>('per_candidate', 'shared');

describe('projectExceptionCostMicrousd', () => {
  it.each<[string, Partial<ExceptionVolume>, OutputCapSemantics, bigint]>([
    // 500 in × $2.50 = 1,250; 2 × 256 out × $10 = 5,120; × 1,000 requests
    ['the demo exception', {}, 'per_candidate', 6_370_000n],
    ['one request, one candidate', { expectedRequests: 1, maxCandidates: 1 }, 'per_candidate', 1_250n + 2_560n],
    ['a shared cap reserves the ceiling once', {}, 'shared', (1_250n + 2_560n) * 1_000n],
    // 1 input token at $2.50/MTok is 2.5 micro-USD, rounded up per request, then multiplied
    [
      'rounding is per request, upwards',
      { expectedRequests: 10, typicalInputTokens: 1, maxCandidates: 1, perCandidateOutputCeiling: 1 },
      'per_candidate',
      10n * (3n + 10n),
    ],
  ])('%s', (_what, over, semantics, expected) => {
    expect(projectExceptionCostMicrousd(volume(over), semantics, price)).toBe(expected);
  });

  it('refuses volumes that are not positive integers', () => {
    expect(() => projectExceptionCostMicrousd(volume({ expectedRequests: 0 }), 'per_candidate', price)).toThrow(RangeError);
    expect(() => projectExceptionCostMicrousd(volume({ expectedRequests: 1.5 }), 'per_candidate', price)).toThrow(RangeError);
    expect(() => projectExceptionCostMicrousd(volume({ typicalInputTokens: 0 }), 'per_candidate', price)).toThrow(RangeError);
  });

  it('is a non-negative bigint, exactly expected requests × one reservation', () => {
    fc.assert(
      fc.property(volumeArb, semanticsArb, priceArb, (v, semantics, p) => {
        const total = projectExceptionCostMicrousd(v, semantics, p);
        const one = projectExceptionCostMicrousd({ ...v, expectedRequests: 1 }, semantics, p);
        expect(typeof total).toBe('bigint');
        expect(total >= 0n).toBe(true);
        expect(total).toBe(one * BigInt(v.expectedRequests));
      }),
    );
  });

  it('is monotone in volume, candidates, ceiling and typical input', () => {
    fc.assert(
      fc.property(
        volumeArb,
        semanticsArb,
        priceArb,
        fc.constantFrom<keyof ExceptionVolume>('expectedRequests', 'maxCandidates', 'perCandidateOutputCeiling', 'typicalInputTokens'),
        fc.integer({ min: 1, max: 1_000 }),
        (v, semantics, p, field, more) => {
          const bigger = { ...v, [field]: v[field] + more };
          expect(projectExceptionCostMicrousd(bigger, semantics, p) >= projectExceptionCostMicrousd(v, semantics, p)).toBe(true);
        },
      ),
    );
  });

  it('is strictly increasing in candidates and ceiling on a per-candidate route with a non-zero output price', () => {
    fc.assert(
      fc.property(volumeArb, priceArb, (v, p) => {
        fc.pre(p.outputPerMTokMicrousd > 0n || p.reasoningPerMTokMicrousd > 0n);
        // a million more output tokens per request cost at least the output rate
        const base = projectExceptionCostMicrousd(v, 'per_candidate', p);
        const more = projectExceptionCostMicrousd(
          { ...v, perCandidateOutputCeiling: v.perCandidateOutputCeiling + 1_000_000 },
          'per_candidate',
          p,
        );
        expect(more > base).toBe(true);
      }),
    );
  });
});

describe('priceInForceAt', () => {
  const at = (iso: string) => ({ id: iso, effectiveFrom: new Date(iso) });
  it('takes the latest revision not after the instant, whatever the order', () => {
    const prices = [at('2026-02-01T00:00:00Z'), at('2026-01-01T00:00:00Z'), at('2026-03-01T00:00:00Z')];
    expect(priceInForceAt(prices, new Date('2026-02-15T00:00:00Z'))?.id).toBe('2026-02-01T00:00:00Z');
    expect(priceInForceAt(prices, new Date('2026-02-01T00:00:00Z'))?.id).toBe('2026-02-01T00:00:00Z');
    expect(priceInForceAt(prices, new Date('2025-12-31T00:00:00Z'))).toBeNull();
    expect(priceInForceAt([], new Date())).toBeNull();
  });
});

describe('projectException', () => {
  const T = new Date('2026-12-01T10:00:00Z');
  const rev = (id: string, outputPerMTokMicrousd: bigint, effectiveFrom = new Date('2026-01-01T00:00:00Z')) => ({
    ...price,
    id,
    outputPerMTokMicrousd,
    reasoningPerMTokMicrousd: outputPerMTokMicrousd,
    effectiveFrom,
  });
  const routes: ProjectionRoute[] = [
    { routeId: 'cheap', semantics: 'per_candidate', prices: [rev('cheap-v1', 1_000_000n)] },
    {
      routeId: 'dear',
      semantics: 'per_candidate',
      prices: [rev('dear-v1', 10_000_000n), rev('dear-v2', 20_000_000n, new Date('2027-01-01T00:00:00Z'))],
    },
    { routeId: 'unpriced', semantics: 'per_candidate', prices: [] },
  ];

  it('takes the most expensive priced route at the prices in force, and says which revision it used', () => {
    expect(projectException(volume(), routes, T)).toEqual({ costMicrousd: 6_370_000n, routeId: 'dear', priceRevisionId: 'dear-v1', at: T });
    // after the later revision takes effect, the projection moves with it
    const later = new Date('2027-01-02T00:00:00Z');
    expect(projectException(volume(), routes, later)).toMatchObject({
      routeId: 'dear',
      priceRevisionId: 'dear-v2',
      costMicrousd: 11_490_000n,
    });
  });

  it('is null when no route has a price in force', () => {
    expect(projectException(volume(), [routes[2]], T)).toBeNull();
    expect(projectException(volume(), [], T)).toBeNull();
  });

  it('is never below the projection of any single priced route', () => {
    fc.assert(
      fc.property(volumeArb, fc.array(fc.tuple(priceArb, semanticsArb), { minLength: 1, maxLength: 5 }), (v, list) => {
        const rs: ProjectionRoute[] = list.map(([p, semantics], i) => ({
          routeId: `r${i}`,
          semantics,
          prices: [{ ...p, id: `r${i}-p`, effectiveFrom: T }],
        }));
        const best = projectException(v, rs, T)!;
        for (const [p, semantics] of list) expect(best.costMicrousd >= projectExceptionCostMicrousd(v, semantics, p)).toBe(true);
      }),
    );
  });
});

describe('checkApprovalProjection', () => {
  it.each<[string, bigint | null, string | null, ReturnType<typeof checkApprovalProjection>]>([
    ['within budget, no override', 1_000n, null, { ok: true, overrideRequired: false }],
    ['exactly the budget, no override', 2_000n, null, { ok: true, overrideRequired: false }],
    ['within budget, a reason given anyway', 1_000n, 'noted', { ok: true, overrideRequired: false }],
    ['over budget without a reason', 2_001n, null, { ok: false, reason: 'projection_exceeds_budget', projectionMicrousd: 2_001n }],
    ['over budget with a blank reason', 2_001n, '   ', { ok: false, reason: 'projection_exceeds_budget', projectionMicrousd: 2_001n }],
    ['over budget with a reason', 2_001n, 'one-off eval, budget caps it', { ok: true, overrideRequired: true }],
    ['no projection without a reason', null, null, { ok: false, reason: 'projection_exceeds_budget', projectionMicrousd: null }],
    ['no projection with a reason', null, 'legacy request', { ok: true, overrideRequired: true }],
  ])('%s', (_what, projectionMicrousd, overrideReason, expected) => {
    expect(checkApprovalProjection({ budgetMicrousd: 2_000n, projectionMicrousd, overrideReason })).toEqual(expected);
  });
});

describe('outcomeDirection', () => {
  it('reads the direction from the numbers and refuses a target equal to the baseline', () => {
    expect(outcomeDirection({ baseline: 0.62, target: 0.7 })).toBe('increase');
    expect(outcomeDirection({ baseline: 1200, target: 900 })).toBe('decrease');
    expect(() => outcomeDirection({ baseline: 1, target: 1 })).toThrow(RangeError);
    expect(() => outcomeDirection({ baseline: Number.NaN, target: 1 })).toThrow(RangeError);
  });
});
