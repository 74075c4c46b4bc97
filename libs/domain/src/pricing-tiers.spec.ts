import fc from 'fast-check';
import { PricedFeature } from './priced-features';
import {
  ContextTier,
  PriceRevision,
  PricedShape,
  RateSet,
  Usage,
  estimateCostMicrousd,
  isServiceTierPriced,
  priceRevisionProblems,
  priceUsage,
  pricedFeaturesOf,
  worstPricedShape,
} from './pricing';
import { usageOf } from './price.fixture';
import { PUBLISHED_PRICES, publishedPrice } from './published-prices.fixture';
import { worstReservationMicrousd } from './reservation';

const usage = usageOf;

/**
 * Golden bills, computed by hand from the published rates (micro-USD = tokens × $/MTok, each
 * category rounded up on its own).
 */
describe('priceUsage: golden bills at published prices', () => {
  const pro = publishedPrice('gemini-2.5-pro');
  it.each<[string, number, bigint, number | null]>([
    // 199,999 × 1.25 = 249,998.75 → 249,999; 1,000 × 10 = 10,000
    ['one token below the threshold', 199_999, 259_999n, null],
    // 200,000 × 1.25 = 250,000; "above 200k" starts at 200,001
    ['at the threshold', 200_000, 260_000n, null],
    // 200,001 × 2.50 = 500,002.5 → 500,003; output at the tier's 15: 15,000
    ['one token above the threshold', 200_001, 515_003n, 200_000],
  ])('gemini-2.5-pro context tier, %s', (_label, inputTokens, total, tier) => {
    const cost = priceUsage(usage({ inputTokens, outputTokens: 1_000, outputIncludesReasoning: false }), pro);
    expect(cost.total).toBe(total);
    expect(cost.contextTier).toBe(tier);
  });

  it('input_only tiers leave output at the base rate', () => {
    const inputOnly: PriceRevision = { ...pro, contextTierRule: 'input_only' };
    // 500,003 + 1,000 × 10
    expect(priceUsage(usage({ inputTokens: 200_001, outputTokens: 1_000 }), inputOnly).total).toBe(510_003n);
  });

  it('the context tier is chosen by all prompt tokens, cached ones included', () => {
    // 150,001 uncached × 2.50 = 375,002.5 → 375,003; 50,000 cached × 0.25 = 12,500
    const cost = priceUsage(usage({ inputTokens: 200_001, cachedInputTokens: 50_000 }), pro);
    expect(cost).toMatchObject({ input: 375_003n, cachedInput: 12_500n, total: 387_503n, contextTier: 200_000 });
  });

  const gpt5 = publishedPrice('gpt-5');
  // 10,000 input of which 2,000 cached; 500 output of which 200 reasoning (OpenAI counts it inside)
  const u = usage({ inputTokens: 10_000, cachedInputTokens: 2_000, outputTokens: 500, reasoningTokens: 200 });
  it.each<[string | null, bigint]>([
    [null, 10_000n + 250n + 3_000n + 2_000n],
    ['default', 15_250n],
    ['priority', 20_000n + 500n + 6_000n + 4_000n],
    ['flex', 5_000n + 125n + 1_500n + 1_000n],
  ])('gpt-5 service tier %s', (serviceTier, total) => {
    const cost = priceUsage({ ...u, serviceTier }, gpt5);
    expect(cost.total).toBe(total);
    expect(cost.serviceTier).toBe(serviceTier ?? 'default');
    expect(cost.unpriced).toEqual([]);
  });

  it('a tier the revision does not price is billed at the dearest priced tier and reported', () => {
    const cost = priceUsage({ ...u, serviceTier: 'scale' }, gpt5);
    expect(cost.total).toBe(30_500n);
    expect(cost.unpriced).toEqual(['service_tier:scale']);
  });

  it('cache writes and reads (claude-sonnet-4.5 on an openai-compatible route)', () => {
    // 1,000 uncached × 3 + 6,000 read × 0.30 + 3,000 written × 3.75 + 500 × 15
    const cost = priceUsage(
      usage({ inputTokens: 10_000, cachedInputTokens: 6_000, cacheWriteInputTokens: 3_000, outputTokens: 500 }),
      publishedPrice('claude-sonnet-4.5 (openai-compatible route)'),
    );
    expect(cost).toMatchObject({ input: 3_000n, cachedInput: 1_800n, cacheWrite: 11_250n, output: 7_500n, total: 23_550n });
  });

  it('cache writes on a route that does not price them are billed as input', () => {
    const cost = priceUsage(usage({ inputTokens: 1_000, cacheWriteInputTokens: 400 }), gpt5);
    expect(cost).toMatchObject({ input: 1_250n, cacheWrite: 0n, total: 1_250n });
  });

  it('per-call fees: Search grounding per grounded prompt, web search per call', () => {
    const flash = priceUsage(
      usage({ inputTokens: 1_000, outputTokens: 200, outputIncludesReasoning: false, featureCalls: { search_grounding: 1 } }),
      publishedPrice('gemini-2.5-flash'),
    );
    expect(flash).toMatchObject({ input: 300n, output: 500n, fees: 35_000n, total: 35_800n });
    expect(flash.feeLines).toEqual([{ feature: 'search_grounding', calls: 1, microusd: 35_000n }]);

    const search = priceUsage(usage({ inputTokens: 1_000, outputTokens: 100, featureCalls: { web_search: 3 } }), gpt5);
    expect(search).toMatchObject({ fees: 30_000n, total: 1_250n + 1_000n + 30_000n });
  });

  it('calls of a feature the revision does not price are listed, not billed silently', () => {
    const cost = priceUsage(usage({ inputTokens: 10, featureCalls: { code_execution: 2 } }), gpt5);
    expect(cost.feeLines).toEqual([{ feature: 'code_execution', calls: 2, microusd: 0n }]);
    expect(cost.unpriced).toEqual(['feature:code_execution']);
  });

  it('audio in and out (gpt-4o-audio-preview)', () => {
    // 600 text × 2.50 + 400 audio × 40 + 200 text × 10 + 300 audio × 80
    const cost = priceUsage(
      usage({ inputTokens: 1_000, audioInputTokens: 400, outputTokens: 500, audioOutputTokens: 300 }),
      publishedPrice('gpt-4o-audio-preview'),
    );
    expect(cost).toMatchObject({ input: 1_500n, audioInput: 16_000n, output: 2_000n, audioOutput: 24_000n, total: 43_500n });
  });

  it('image output (gemini-2.5-flash-image): one 1,290-token image is $0.039', () => {
    const cost = priceUsage(
      usage({ inputTokens: 100, outputTokens: 1_300, imageOutputTokens: 1_290, outputIncludesReasoning: false }),
      publishedPrice('gemini-2.5-flash-image'),
    );
    expect(cost).toMatchObject({ input: 30n, output: 25n, imageOutput: 38_700n, total: 38_755n });
  });

  it('refuses usage whose subsets exceed their totals', () => {
    expect(() => priceUsage(usage({ inputTokens: 10, audioInputTokens: 8, cacheWriteInputTokens: 3 }), gpt5)).toThrow(RangeError);
    expect(() => priceUsage(usage({ outputTokens: 10, reasoningTokens: 5, audioOutputTokens: 6 }), gpt5)).toThrow(RangeError);
  });
});

describe('estimateCostMicrousd: the worst reachable tier', () => {
  const pro = publishedPrice('gemini-2.5-pro');
  it('an estimate that can cross the threshold reserves at the higher tier; one that cannot, at the base', () => {
    expect(estimateCostMicrousd(200_000, 1_000, pro)).toBe(250_000n + 10_000n);
    expect(estimateCostMicrousd(200_001, 1_000, pro)).toBe(500_003n + 15_000n);
  });

  const gpt5 = publishedPrice('gpt-5');
  it('reserves at the requested service tier; auto at the dearest; a paid tool at its reserved calls', () => {
    // flex input 0.625 and cached 0.0625 are both fractional and less than $1/MTok apart: +1 for rounding
    expect(estimateCostMicrousd(1_000, 100, gpt5, { serviceTier: 'flex' })).toBe(625n + 1n + 500n);
    expect(estimateCostMicrousd(1_000, 100, gpt5, { serviceTier: 'priority' })).toBe(2_500n + 2_000n);
    expect(estimateCostMicrousd(1_000, 100, gpt5, { serviceTier: 'auto' })).toBe(2_500n + 2_000n);
    expect(estimateCostMicrousd(1_000, 100, gpt5, { features: ['web_search'] })).toBe(1_250n + 1_000n + 4n * 10_000n);
  });

  it('prices modality output only when the request asks for it', () => {
    const audio = publishedPrice('gpt-4o-audio-preview');
    expect(estimateCostMicrousd(1_000, 1_000, audio)).toBe(2_500n + 10_000n);
    expect(estimateCostMicrousd(1_000, 1_000, audio, { audioInput: true, audioOutput: true })).toBe(40_000n + 80_000n);
  });

  it('the worst reservation of a revision covers every tier, service tier, modality and fee', () => {
    for (const { price } of PUBLISHED_PRICES) {
      const worst = worstReservationMicrousd(price);
      for (const shape of [{}, { serviceTier: 'auto' }, worstPricedShape(price)] as PricedShape[]) {
        expect(worst >= estimateCostMicrousd(1_000_000, 100_000, price, shape)).toBe(true);
      }
    }
  });
});

describe('what a revision prices', () => {
  it('features priced by rates and by fees', () => {
    expect(pricedFeaturesOf(publishedPrice('gpt-5'))).toEqual(['service_tier', 'web_search']);
    expect(pricedFeaturesOf(publishedPrice('gpt-4o-audio-preview'))).toEqual(['audio_output']);
    expect(pricedFeaturesOf(publishedPrice('gemini-2.5-flash-image'))).toEqual(['image_output']);
    expect(pricedFeaturesOf(publishedPrice('gpt-5.5'))).toEqual([]);
  });

  it('service tiers', () => {
    const gpt5 = publishedPrice('gpt-5');
    for (const t of [undefined, null, 'default', 'auto', 'priority', 'flex']) expect(isServiceTierPriced(gpt5, t)).toBe(true);
    expect(isServiceTierPriced(gpt5, 'scale')).toBe(false);
    expect(isServiceTierPriced(publishedPrice('gpt-5.5'), 'priority')).toBe(false);
    expect(isServiceTierPriced(gpt5, '__proto__')).toBe(false);
  });
});

describe('priceRevisionProblems', () => {
  const base = publishedPrice('gpt-5.5');
  const tier = (aboveInputTokens: number, rates: RateSet = base): ContextTier => ({ aboveInputTokens, rates });

  it('every fixture is a valid revision', () => {
    for (const { price } of PUBLISHED_PRICES) expect(priceRevisionProblems(price)).toEqual([]);
  });

  it.each<[string, Partial<PriceRevision>, string, RegExp]>([
    ['unordered tiers', { contextTiers: [tier(300_000), tier(200_000)] }, 'contextTiers[1].aboveInputTokens', /ascending/],
    ['overlapping tiers', { contextTiers: [tier(200_000), tier(200_000)] }, 'contextTiers[1].aboveInputTokens', /overlaps/],
    ['a zero threshold', { contextTiers: [tier(0)] }, 'contextTiers[0].aboveInputTokens', /positive/],
    ['a fractional threshold', { contextTiers: [tier(1.5)] }, 'contextTiers[0].aboveInputTokens', /positive/],
    [
      'a negative tier rate',
      { contextTiers: [tier(10, { ...base, outputPerMTokMicrousd: -1n })] },
      'contextTiers[0].rates.outputPerMTokMicrousd',
      /non-negative/,
    ],
    [
      'a tier that leaves out a category the base prices',
      { cacheWritePerMTokMicrousd: 1n, contextTiers: [tier(10)] },
      'contextTiers[0].rates.cacheWritePerMTokMicrousd',
      /exactly the categories/,
    ],
    ['a service tier named default', { serviceTiers: { default: { rates: base } } }, 'serviceTiers.default', /named/],
    ['a service tier named auto', { serviceTiers: { auto: { rates: base } } }, 'serviceTiers.auto', /named/],
    [
      'unordered tiers inside a service tier',
      { serviceTiers: { priority: { rates: base, contextTiers: [tier(5), tier(4)] } } },
      'serviceTiers.priority.contextTiers[1].aboveInputTokens',
      /ascending/,
    ],
    [
      'a fee for a rate-priced feature',
      { perCallFees: [{ feature: 'service_tier', feeMicrousd: 1n, reservedCallsPerRequest: 1 }] },
      'perCallFees[0].feature',
      /one of/,
    ],
    [
      'a feature priced twice',
      {
        perCallFees: [
          { feature: 'web_search', feeMicrousd: 1n, reservedCallsPerRequest: 1 },
          { feature: 'web_search', feeMicrousd: 2n, reservedCallsPerRequest: 1 },
        ],
      },
      'perCallFees[1].feature',
      /twice/,
    ],
    [
      'zero reserved calls',
      { perCallFees: [{ feature: 'web_search', feeMicrousd: 1n, reservedCallsPerRequest: 0 }] },
      'perCallFees[0].reservedCallsPerRequest',
      /from 1/,
    ],
    ['an unknown tier rule', { contextTierRule: 'marginal' as never }, 'contextTierRule', /one of/],
  ])('refuses %s', (_label, change, path, message) => {
    const problems = priceRevisionProblems({ ...base, contextTiers: undefined, ...change });
    expect(problems).toContainEqual({ path, message: expect.stringMatching(message) });
  });
});

/**
 * The central property: for every fixture model, the reservation admission makes from an
 * input estimate, an output ceiling and the request's shape is never below what settlement bills for
 * any usage within them — any split of input into uncached / cached / cache-write / audio, of output
 * into text / reasoning / audio / image, any context tier the estimate can reach, the tier actually
 * served (any priced one under `auto`), and per-call features up to their reserved calls.
 */
describe('property: reservation ≥ settled cost for any usage within the ceilings', () => {
  const split = (total: number, parts: number) =>
    fc.array(fc.nat(), { minLength: parts, maxLength: parts }).map((ws) => {
      const sum = ws.reduce((a, b) => a + b, 0) || 1;
      const out = ws.map((w) => Math.floor((w / sum) * total));
      out[0] += total - out.reduce((a, b) => a + b, 0);
      return out;
    });

  const scenario = (price: PriceRevision) =>
    fc
      .record({
        estimate: fc.oneof(fc.integer({ min: 0, max: 2_000 }), fc.integer({ min: 150_000, max: 400_000 })),
        ceiling: fc.integer({ min: 0, max: 70_000 }),
        serviceTier: fc.constantFrom<string | null>(null, 'default', 'auto', ...Object.keys(price.serviceTiers ?? {})),
        audioInput: fc.boolean(),
        audioOutput: fc.boolean().map((b) => b && price.audioOutputPerMTokMicrousd !== undefined),
        imageOutput: fc.boolean().map((b) => b && price.imageOutputPerMTokMicrousd !== undefined),
        features: fc.subarray((price.perCallFees ?? []).map((f) => f.feature)),
        includes: fc.boolean(),
      })
      .chain((s) =>
        fc.record({
          s: fc.constant(s),
          input: fc.integer({ min: 0, max: s.estimate }),
          output: fc.integer({ min: 0, max: s.ceiling }),
          served:
            s.serviceTier === 'auto' ? fc.constantFrom('default', ...Object.keys(price.serviceTiers ?? {})) : fc.constant(s.serviceTier),
          calls: fc.array(fc.nat(), { minLength: s.features.length, maxLength: s.features.length }),
        }),
      )
      .chain(({ s, input, output, served, calls }) =>
        fc.record({
          s: fc.constant(s),
          served: fc.constant(served),
          calls: fc.constant(calls),
          inputParts: split(input, 4),
          outputParts: split(output, 4),
        }),
      )
      .map(({ s, served, calls, inputParts: [uncached, cached, written, audioIn], outputParts: [text, reasoning, audioOut, image] }) => {
        const shape: PricedShape = { ...s, features: s.features };
        const featureCalls: Partial<Record<PricedFeature, number>> = {};
        s.features.forEach((f, i) => {
          const fee = price.perCallFees?.find((x) => x.feature === f);
          featureCalls[f] = calls[i] % ((fee?.reservedCallsPerRequest ?? 0) + 1);
        });
        const u: Usage = {
          inputTokens: uncached + cached + written + (s.audioInput ? audioIn : 0),
          cachedInputTokens: cached,
          cacheWriteInputTokens: written,
          audioInputTokens: s.audioInput ? audioIn : 0,
          // the ceiling caps all output, thinking included; with separate reasoning the text side is the rest
          outputTokens: text + (s.includes ? reasoning : 0) + (s.audioOutput ? audioOut : 0) + (s.imageOutput ? image : 0),
          reasoningTokens: reasoning,
          outputIncludesReasoning: s.includes,
          audioOutputTokens: s.audioOutput ? audioOut : 0,
          imageOutputTokens: s.imageOutput ? image : 0,
          serviceTier: served,
          featureCalls,
        };
        return { estimate: s.estimate, ceiling: s.ceiling, shape, usage: u };
      });

  it.each(PUBLISHED_PRICES.map((p) => [p.model, p.price] as const))('%s', (_model, price) => {
    fc.assert(
      fc.property(scenario(price), ({ estimate, ceiling, shape, usage: u }) => {
        const reserved = estimateCostMicrousd(estimate, ceiling, price, shape);
        const settled = priceUsage(u, price).total;
        expect(settled <= reserved).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  // Arbitrary revisions with fractional rates, to exercise the rounding allowance beyond the fixtures.
  const rate = fc.oneof(
    fc.bigInt({ min: 0n, max: 3_000_000n }),
    fc.bigInt({ min: 0n, max: 100n }).map((x) => x * 1_000_000n),
  );
  const rates: fc.Arbitrary<RateSet> = fc.record({
    inputPerMTokMicrousd: rate,
    cachedInputPerMTokMicrousd: rate,
    outputPerMTokMicrousd: rate,
    reasoningPerMTokMicrousd: rate,
    cacheWritePerMTokMicrousd: rate,
    audioInputPerMTokMicrousd: rate,
    audioOutputPerMTokMicrousd: rate,
    imageOutputPerMTokMicrousd: rate,
  });
  const revision: fc.Arbitrary<PriceRevision> = fc
    .record({
      base: rates,
      tiers: fc.array(fc.record({ step: fc.integer({ min: 1, max: 500 }), rates }), { maxLength: 3 }),
      rule: fc.constantFrom('whole_request' as const, 'input_only' as const),
      priority: fc.option(rates, { nil: undefined }),
    })
    .map(({ base, tiers, rule, priority }) => {
      let at = 0;
      return {
        id: 'arb',
        ...base,
        contextTierRule: rule,
        contextTiers: tiers.map((t) => ({ aboveInputTokens: (at += t.step), rates: t.rates })),
        serviceTiers: priority ? { priority: { rates: priority } } : undefined,
      };
    });

  it('tight rounding: near-equal fractional rates and a few tokens per category', () => {
    const near = fc.integer({ min: 1, max: 999_999 }).map((x) => 2_000_000n + BigInt(x));
    const tight: fc.Arbitrary<PriceRevision> = fc.record({ a: near, b: near, c: near, d: near, w: near }).map(({ a, b, c, d, w }) => ({
      id: 'tight',
      inputPerMTokMicrousd: a,
      cachedInputPerMTokMicrousd: b,
      outputPerMTokMicrousd: c,
      reasoningPerMTokMicrousd: d,
      cacheWritePerMTokMicrousd: w,
    }));
    const few = fc.integer({ min: 0, max: 7 });
    fc.assert(
      fc.property(tight, few, few, few, few, few, fc.boolean(), (price, uncached, cached, written, text, reasoning, includes) => {
        const u = usage({
          inputTokens: uncached + cached + written,
          cachedInputTokens: cached,
          cacheWriteInputTokens: written,
          outputTokens: text + (includes ? reasoning : 0),
          reasoningTokens: reasoning,
          outputIncludesReasoning: includes,
        });
        expect(priceUsage(u, price).total <= estimateCostMicrousd(u.inputTokens, text + reasoning, price)).toBe(true);
      }),
      { numRuns: 5_000 },
    );
  });

  it('arbitrary revisions with context tiers, service tiers and fractional rates', () => {
    fc.assert(
      fc.property(
        revision.chain((price) => fc.record({ price: fc.constant(price), sc: scenario(price) })),
        ({ price, sc }) => {
          const small = { ...sc, estimate: sc.estimate % 2_000, usage: sc.usage };
          for (const c of [sc, small]) {
            if (c.usage.inputTokens > c.estimate) continue;
            const reserved = estimateCostMicrousd(c.estimate, c.ceiling, price, c.shape);
            expect(priceUsage(c.usage, price).total <= reserved).toBe(true);
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
