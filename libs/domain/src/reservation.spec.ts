import fc from 'fast-check';
import { TEST_PRICE } from './price.fixture';
import { PriceRevision } from './pricing';
import {
  MAX_BUDGET_MICROUSD,
  MAX_INPUT_TOKENS_ESTIMATE,
  MAX_RESERVED_OUTPUT_TOKENS,
  MAX_STORED_MICROUSD,
  MAX_STORED_TOKENS,
  MAX_TOKENS_PER_MINUTE,
  OutputCapSemantics,
  computeReservation,
  estimateInputTokens,
  outputCeiling,
  reservationOutOfRange,
  worstReservationMicrousd,
} from './reservation';

const price = TEST_PRICE;

const priceArb: fc.Arbitrary<PriceRevision> = fc.record({
  id: fc.constant('arb'),
  inputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 100_000_000n }),
  cachedInputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 100_000_000n }),
  outputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 200_000_000n }),
  reasoningPerMTokMicrousd: fc.bigInt({ min: 0n, max: 200_000_000n }),
});

describe('computeReservation', () => {
  it.each<[number, number, number, OutputCapSemantics, number, bigint]>([
    [1_000, 1, 500, 'per_candidate', 500, 2_500n + 5_000n],
    [1_000, 4, 500, 'per_candidate', 2_000, 2_500n + 20_000n],
    [1_000, 4, 500, 'shared', 500, 2_500n + 5_000n],
    [0, 1, 1, 'shared', 1, 10n],
  ])('input %i, n=%i, ceiling %i, %s -> %i tokens, %p', (inputTokensEstimate, n, ceiling, semantics, tokens, micros) => {
    expect(
      computeReservation({
        inputTokensEstimate,
        effectiveCandidates: n,
        perCandidateOutputCeiling: ceiling,
        semantics,
        price,
      }),
    ).toEqual({ reservedOutputTokens: tokens, reservedMicrousd: micros });
  });

  it.each([
    [{ effectiveCandidates: 0 }],
    [{ perCandidateOutputCeiling: 0 }],
    [{ inputTokensEstimate: -1 }],
    [{ effectiveCandidates: 2 ** 30, perCandidateOutputCeiling: 2 ** 30 }],
  ])('throws on invalid input %j', (override) => {
    expect(() =>
      computeReservation({
        inputTokensEstimate: 10,
        effectiveCandidates: 1,
        perCandidateOutputCeiling: 10,
        semantics: 'per_candidate',
        price,
        ...override,
      }),
    ).toThrow(RangeError);
  });

  const reservationArgs = fc.record({
    inputTokensEstimate: fc.nat(1_000_000),
    effectiveCandidates: fc.integer({ min: 1, max: 16 }),
    perCandidateOutputCeiling: fc.integer({ min: 1, max: 200_000 }),
    price: priceArb,
  });

  it('property: per_candidate reserves at least as much as shared', () => {
    fc.assert(
      fc.property(reservationArgs, (a) => {
        const per = computeReservation({ ...a, semantics: 'per_candidate' });
        const shared = computeReservation({ ...a, semantics: 'shared' });
        expect(per.reservedOutputTokens).toBeGreaterThanOrEqual(shared.reservedOutputTokens);
        expect(per.reservedMicrousd >= shared.reservedMicrousd).toBe(true);
      }),
    );
  });

  it('property: monotonic in effective candidates, and per_candidate scales linearly in tokens', () => {
    fc.assert(
      fc.property(reservationArgs, fc.constantFrom<OutputCapSemantics>('per_candidate', 'shared'), (a, semantics) => {
        const one = computeReservation({ ...a, semantics });
        const more = computeReservation({
          ...a,
          semantics,
          effectiveCandidates: a.effectiveCandidates + 1,
        });
        expect(more.reservedMicrousd >= one.reservedMicrousd).toBe(true);
        expect(more.reservedOutputTokens).toBeGreaterThanOrEqual(one.reservedOutputTokens);
        if (semantics === 'per_candidate') {
          expect(one.reservedOutputTokens).toBe(a.effectiveCandidates * a.perCandidateOutputCeiling);
        }
      }),
    );
  });

  it('property: monotonic in the input estimate and the ceiling', () => {
    fc.assert(
      fc.property(reservationArgs, fc.nat(10_000), fc.nat(10_000), (a, dIn, dCeil) => {
        const base = computeReservation({ ...a, semantics: 'per_candidate' });
        const bigger = computeReservation({
          ...a,
          semantics: 'per_candidate',
          inputTokensEstimate: a.inputTokensEstimate + dIn,
          perCandidateOutputCeiling: a.perCandidateOutputCeiling + dCeil,
        });
        expect(bigger.reservedMicrousd >= base.reservedMicrousd).toBe(true);
      }),
    );
  });
});

describe('outputCeiling', () => {
  it.each([
    [null, 4_096, 4_096],
    [1_000, 4_096, 1_000],
    [10_000, 4_096, 4_096],
    [4_096, 4_096, 4_096],
    [0, 4_096, 1],
    [-5, 4_096, 1],
  ])('requested %p, policy %i -> %i', (requested, policyCeiling, expected) => {
    expect(outputCeiling({ requested, policyCeiling })).toBe(expected);
  });

  it('throws on a fractional request or a bad policy ceiling', () => {
    expect(() => outputCeiling({ requested: 1.5, policyCeiling: 10 })).toThrow(RangeError);
    expect(() => outputCeiling({ requested: null, policyCeiling: 0 })).toThrow(RangeError);
  });

  it('property: result is within [1, policyCeiling] and never above what was asked (when asked ≥ 1)', () => {
    fc.assert(
      fc.property(fc.option(fc.integer({ min: -10, max: 1_000_000 })), fc.integer({ min: 1, max: 500_000 }), (requested, policyCeiling) => {
        const c = outputCeiling({ requested, policyCeiling });
        expect(c).toBeGreaterThanOrEqual(1);
        expect(c).toBeLessThanOrEqual(policyCeiling);
        if (requested !== null && requested >= 1) expect(c).toBeLessThanOrEqual(requested);
      }),
    );
  });
});

describe('estimateInputTokens', () => {
  it.each<[string[], number, number]>([
    [[], 0, 3],
    [[''], 1, 7],
    [['abc'], 1, 1 + 4 + 3],
    [['abcd'], 1, 2 + 4 + 3],
    [['hello world', 'hi'], 2, Math.ceil(13 / 3) + 8 + 3],
    [['日本語'], 1, 3 + 4 + 3], // 9 UTF-8 bytes
    [['😀'], 1, 2 + 4 + 3], // 4 UTF-8 bytes
  ])('%j over %i messages -> %i', (texts, messages, expected) => {
    expect(estimateInputTokens(texts, messages)).toBe(expected);
  });

  it('throws on a bad message count', () => {
    expect(() => estimateInputTokens([], -1)).toThrow(RangeError);
  });

  it('property: deterministic, monotonic in text and messages, and at least one token per 3 bytes', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'grapheme' })), fc.string(), fc.nat(100), (texts, extra, messages) => {
        const base = estimateInputTokens(texts, messages);
        expect(estimateInputTokens([...texts], messages)).toBe(base);
        expect(estimateInputTokens([...texts, extra], messages)).toBeGreaterThanOrEqual(base);
        expect(estimateInputTokens(texts, messages + 1)).toBe(base + 4);
        const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
        expect(base * 3).toBeGreaterThanOrEqual(bytes);
      }),
    );
  });
});

describe('storage bounds of a reservation', () => {
  /** Rates up to ~5e15 micro-USD/MTok: around where the worst reservation stops fitting bigint. */
  const boundaryPriceArb: fc.Arbitrary<PriceRevision> = fc.record({
    id: fc.constant('edge'),
    inputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 5_000_000_000_000_000n }),
    cachedInputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 5_000_000_000_000_000n }),
    outputPerMTokMicrousd: fc.bigInt({ min: 0n, max: 5_000_000_000_000_000n }),
    reasoningPerMTokMicrousd: fc.bigInt({ min: 0n, max: 5_000_000_000_000_000n }),
  });

  it('leaves room: a budget plus one reservation, and a token window plus one request, fit their columns', () => {
    expect(MAX_BUDGET_MICROUSD * 2n).toBeLessThanOrEqual(MAX_STORED_MICROUSD);
    expect(MAX_TOKENS_PER_MINUTE * 2).toBeLessThanOrEqual(MAX_STORED_TOKENS);
    expect(MAX_INPUT_TOKENS_ESTIMATE + MAX_RESERVED_OUTPUT_TOKENS).toBe(MAX_STORED_TOKENS);
    // A 2 MB body of one-byte messages stays far below the input bound.
    const messages = Math.floor((2 * 1024 * 1024) / 3);
    expect(estimateInputTokens(['x'.repeat(messages)], messages)).toBeLessThan(MAX_INPUT_TOKENS_ESTIMATE);
  });

  it.each<[string, number, number, number, boolean]>([
    ['the issue: one candidate at 2147483647', 0, 1, 2_147_483_647, false],
    ['exactly the output bound', MAX_INPUT_TOKENS_ESTIMATE, 1, MAX_RESERVED_OUTPUT_TOKENS, true],
    ['one token past the output bound', 0, 1, MAX_RESERVED_OUTPUT_TOKENS + 1, false],
    ['128 candidates at the largest ceiling that fits', MAX_INPUT_TOKENS_ESTIMATE, 128, Math.floor(MAX_RESERVED_OUTPUT_TOKENS / 128), true],
    ['128 candidates one token over', 0, 128, Math.floor(MAX_RESERVED_OUTPUT_TOKENS / 128) + 1, false],
    ['input past its bound with the full output', MAX_INPUT_TOKENS_ESTIMATE + 1, 1, MAX_RESERVED_OUTPUT_TOKENS, false],
  ])('%s', (_name, inputTokensEstimate, n, ceiling, fits) => {
    const r = computeReservation({
      inputTokensEstimate,
      effectiveCandidates: n,
      perCandidateOutputCeiling: ceiling,
      semantics: 'per_candidate',
      price,
    });
    expect(reservationOutOfRange({ inputTokensEstimate, ...r }) === null).toBe(fits);
  });

  it('names micro-USD beyond bigint', () => {
    expect(reservationOutOfRange({ inputTokensEstimate: 1, reservedOutputTokens: 1, reservedMicrousd: MAX_STORED_MICROUSD + 1n })).toMatch(
      /micro-USD/,
    );
  });

  it('whatever a policy that passed the write-time checks allows, the reservation fits its columns', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 128 }),
        fc.integer({ min: 1, max: MAX_STORED_TOKENS }),
        fc.integer({ min: 0, max: MAX_INPUT_TOKENS_ESTIMATE }),
        fc.constantFrom<OutputCapSemantics>('per_candidate', 'shared'),
        boundaryPriceArb,
        (n, ceiling, inputTokensEstimate, semantics, p) => {
          // the checks the policy service makes when the workload/exception and the price are written
          fc.pre(n * ceiling <= MAX_RESERVED_OUTPUT_TOKENS);
          fc.pre(worstReservationMicrousd(p) <= MAX_STORED_MICROUSD);
          const r = computeReservation({
            inputTokensEstimate,
            effectiveCandidates: n,
            perCandidateOutputCeiling: ceiling,
            semantics,
            price: p,
          });
          expect(reservationOutOfRange({ inputTokensEstimate, ...r })).toBeNull();
        },
      ),
      { numRuns: 500 },
    );
  });

  it('a count × ceiling past the bound is always refused, never stored', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 128 }), fc.integer({ min: 1, max: MAX_STORED_TOKENS }), (n, ceiling) => {
        fc.pre(n * ceiling > MAX_RESERVED_OUTPUT_TOKENS);
        const r = computeReservation({
          inputTokensEstimate: 0,
          effectiveCandidates: n,
          perCandidateOutputCeiling: ceiling,
          semantics: 'per_candidate',
          price,
        });
        expect(reservationOutOfRange({ inputTokensEstimate: 0, ...r })).not.toBeNull();
      }),
    );
  });
});
