import fc from 'fast-check';
import { TEST_PRICE, usageOf } from './price.fixture';
import {
  PriceRevision,
  Usage,
  costOfTokensMicrousd,
  estimateCostMicrousd,
  nonReasoningOutputTokens,
  outputTokensWithReasoning,
  priceUsage,
} from './pricing';

const price = TEST_PRICE;

const usage = usageOf;

const priceArb: fc.Arbitrary<PriceRevision> = fc.record({
  id: fc.constant('arb'),
  inputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 100_000_000n }),
  cachedInputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 100_000_000n }),
  outputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 200_000_000n }),
  reasoningPerMTokMicrousd: fc.bigInt({ min: 0n, max: 200_000_000n }),
});

const tokens = fc.integer({ min: 0, max: 2_000_000 });
const usageArb: fc.Arbitrary<Usage> = fc
  .record({ a: tokens, b: tokens, c: tokens, d: tokens, includes: fc.boolean() })
  .map(({ a, b, c, d, includes }) => ({
    inputTokens: Math.max(a, b),
    cachedInputTokens: Math.min(a, b),
    outputTokens: includes ? Math.max(c, d) : c,
    reasoningTokens: includes ? Math.min(c, d) : d,
    outputIncludesReasoning: includes,
  }));

describe('costOfTokensMicrousd', () => {
  it.each([
    [0, 2_500_000n, 0n],
    [1, 1_000_000n, 1n],
    [1, 1n, 1n], // 1e-6 micro-USD rounds up to 1
    [1_000_000, 2_500_000n, 2_500_000n],
    [400, 2_500_000n, 1_000n],
    [3, 333_333n, 1n],
    [7, 0n, 0n],
  ])('%i tokens at %p/MTok = %p', (t, p, expected) => {
    expect(costOfTokensMicrousd(t, p)).toBe(expected);
  });

  it('property: ceil — never below the exact amount, less than 1 micro-USD above it', () => {
    fc.assert(
      fc.property(tokens, fc.bigInt({ min: 0n, max: 10n ** 12n }), (t, p) => {
        const c = costOfTokensMicrousd(t, p);
        const exactScaled = BigInt(t) * p;
        expect(c * 1_000_000n).toBeGreaterThanOrEqual(exactScaled);
        expect((c - 1n) * 1_000_000n).toBeLessThan(exactScaled === 0n ? 1n : exactScaled);
      }),
    );
  });
});

describe('priceUsage', () => {
  it.each<[string, Partial<Usage>, { input: bigint; cachedInput: bigint; output: bigint; reasoning: bigint; total: bigint }]>([
    ['nothing', {}, { input: 0n, cachedInput: 0n, output: 0n, reasoning: 0n, total: 0n }],
    [
      'plain input and output',
      { inputTokens: 1_000, outputTokens: 500 },
      { input: 2_500n, cachedInput: 0n, output: 5_000n, reasoning: 0n, total: 7_500n },
    ],
    [
      'cached tokens are a subset of input',
      { inputTokens: 1_000, cachedInputTokens: 400 },
      { input: 1_500n, cachedInput: 500n, output: 0n, reasoning: 0n, total: 2_000n },
    ],
    [
      'reasoning included in output (OpenAI style)',
      { outputTokens: 500, reasoningTokens: 200, outputIncludesReasoning: true },
      { input: 0n, cachedInput: 0n, output: 3_000n, reasoning: 2_000n, total: 5_000n },
    ],
    [
      'reasoning reported separately (Gemini style)',
      { outputTokens: 500, reasoningTokens: 200, outputIncludesReasoning: false },
      { input: 0n, cachedInput: 0n, output: 5_000n, reasoning: 2_000n, total: 7_000n },
    ],
    [
      'each category rounds up on its own',
      { inputTokens: 3, cachedInputTokens: 1, outputTokens: 1 },
      { input: 5n, cachedInput: 2n, output: 10n, reasoning: 0n, total: 17n },
    ],
  ])('%s', (_label, u, expected) => {
    expect(priceUsage(usage(u), price)).toMatchObject({
      ...expected,
      fees: 0n,
      feeLines: [],
      contextTier: null,
      serviceTier: 'default',
      unpriced: [],
    });
  });

  it.each<[string, Partial<Usage>]>([
    ['negative input', { inputTokens: -1 }],
    ['fractional output', { outputTokens: 1.5 }],
    ['NaN reasoning', { reasoningTokens: NaN }],
    ['cached > input', { inputTokens: 1, cachedInputTokens: 2 }],
    ['included reasoning > output', { outputTokens: 1, reasoningTokens: 2, outputIncludesReasoning: true }],
    ['unsafe integer', { inputTokens: 2 ** 60 }],
  ])('throws on %s', (_label, u) => {
    expect(() => priceUsage(usage(u), price)).toThrow(RangeError);
  });

  it('allows separate reasoning to exceed visible output', () => {
    expect(() => priceUsage(usage({ outputTokens: 1, reasoningTokens: 9, outputIncludesReasoning: false }), price)).not.toThrow();
  });

  it('throws on a negative price', () => {
    expect(() => priceUsage(usage({}), { ...price, outputPerMTokMicrousd: -1n })).toThrow(RangeError);
  });

  it('property: total is the sum of the parts; all parts are non-negative bigints', () => {
    fc.assert(
      fc.property(usageArb, priceArb, (u, p) => {
        const c = priceUsage(u, p);
        for (const v of [c.input, c.cachedInput, c.output, c.reasoning, c.total]) {
          expect(typeof v).toBe('bigint');
          expect(v >= 0n).toBe(true);
        }
        expect(c.total).toBe(c.input + c.cachedInput + c.output + c.reasoning);
      }),
    );
  });

  // "More tokens" means one more billed token of a given kind, keeping the subset
  // relations intact (a cached token is also an input token; included reasoning is also output).
  const moreOf: Array<[string, (u: Usage) => Usage]> = [
    ['uncached input', (u) => ({ ...u, inputTokens: u.inputTokens + 1 })],
    ['cached input', (u) => ({ ...u, inputTokens: u.inputTokens + 1, cachedInputTokens: u.cachedInputTokens + 1 })],
    ['visible output', (u) => ({ ...u, outputTokens: u.outputTokens + 1 })],
    [
      'reasoning',
      (u) => ({
        ...u,
        reasoningTokens: u.reasoningTokens + 1,
        outputTokens: u.outputIncludesReasoning ? u.outputTokens + 1 : u.outputTokens,
      }),
    ],
  ];
  it.each(moreOf)('property: monotonic in %s tokens', (_label, bump) => {
    fc.assert(
      fc.property(usageArb, priceArb, fc.integer({ min: 1, max: 5_000 }), (u, p, k) => {
        let bigger = u;
        for (let i = 0; i < k; i++) bigger = bump(bigger);
        expect(priceUsage(bigger, p).total >= priceUsage(u, p).total).toBe(true);
      }),
    );
  });

  it('property: no double counting — at a flat rate the bill matches billed tokens within rounding', () => {
    fc.assert(
      fc.property(usageArb, fc.bigInt({ min: 0n, max: 100_000_000n }), (u, rate) => {
        const flat: PriceRevision = {
          id: 'flat',
          inputPerMTokMicrousd: rate,
          cachedInputPerMTokMicrousd: rate,
          outputPerMTokMicrousd: rate,
          reasoningPerMTokMicrousd: rate,
        };
        const billedTokens = u.inputTokens + u.outputTokens + (u.outputIncludesReasoning ? 0 : u.reasoningTokens);
        const single = costOfTokensMicrousd(billedTokens, rate);
        const total = priceUsage(u, flat).total;
        // Four categories each round up by < 1 micro-USD.
        expect(total >= single).toBe(true);
        expect(total - single <= 3n).toBe(true);
      }),
    );
  });
});

describe('estimateCostMicrousd', () => {
  it.each([
    [0, 0, price, 0n],
    [1_000, 500, price, 2_500n + 5_000n],
    [1_000, 500, { ...price, reasoningPerMTokMicrousd: 60_000_000n }, 2_500n + 30_000n],
    [1_000, 0, { ...price, cachedInputPerMTokMicrousd: 5_000_000n }, 5_000n],
  ])('(%i in, %i out), case %#', (i, o, p, expected) => {
    expect(estimateCostMicrousd(i, o, p)).toBe(expected);
  });

  it('throws on invalid token counts', () => {
    expect(() => estimateCostMicrousd(-1, 0, price)).toThrow(RangeError);
    expect(() => estimateCostMicrousd(0, 0.5, price)).toThrow(RangeError);
  });

  it('property: covers any usage within the estimated token counts, per-category rounding included', () => {
    fc.assert(
      fc.property(usageArb, priceArb, (u, p) => {
        const billedOutput = u.outputTokens + (u.outputIncludesReasoning ? 0 : u.reasoningTokens);
        const estimate = estimateCostMicrousd(u.inputTokens, billedOutput, p);
        // the estimate carries the rounding allowance (pricing-tiers.spec.ts tests it where it is tight)
        expect(priceUsage(u, p).total <= estimate).toBe(true);
      }),
    );
  });

  it('property: monotonic in both token counts', () => {
    fc.assert(
      fc.property(tokens, tokens, fc.nat(1_000), fc.nat(1_000), priceArb, (i, o, di, dO, p) => {
        expect(estimateCostMicrousd(i + di, o + dO, p) >= estimateCostMicrousd(i, o, p)).toBe(true);
      }),
    );
  });
});

describe('output tokens and reasoning, whichever way the provider counts', () => {
  const openAi = { outputTokens: 12, reasoningTokens: 5, outputIncludesReasoning: true }; // completion_tokens holds reasoning
  const gemini = { outputTokens: 7, reasoningTokens: 5, outputIncludesReasoning: false }; // thoughts reported apart

  it('the same call reads the same both ways: 12 with reasoning, 7 without', () => {
    expect([outputTokensWithReasoning(openAi), nonReasoningOutputTokens(openAi)]).toEqual([12, 7]);
    expect([outputTokensWithReasoning(gemini), nonReasoningOutputTokens(gemini)]).toEqual([12, 7]);
  });

  it('no reasoning: both are the output', () => {
    const plain = { outputTokens: 9, reasoningTokens: 0, outputIncludesReasoning: false };
    expect([outputTokensWithReasoning(plain), nonReasoningOutputTokens(plain)]).toEqual([9, 9]);
  });
});
