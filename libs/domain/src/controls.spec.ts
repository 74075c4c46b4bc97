import { countCategory, CountDistribution, COUNT_CATEGORIES, detectCountShift, DEFAULT_SHIFT_THRESHOLDS } from './controls';
import { seededUniform } from './experiment';

/** A day of `n` requests drawn from `shares` (category → probability) with a seeded generator. */
function drawDay(shares: Record<string, number>, n: number, rng: () => number): CountDistribution {
  const out: Record<string, number> = {};
  const entries = Object.entries(shares);
  for (let i = 0; i < n; i++) {
    let u = rng();
    const [category] = entries.find(([, p]) => (u -= p) < 0) ?? entries[entries.length - 1];
    out[category] = (out[category] ?? 0) + 1;
  }
  return out;
}

describe('countCategory', () => {
  it('names omitted, 1 … 8 and 9+ and refuses nonsense', () => {
    expect([null, 1, 2, 8, 9, 128].map(countCategory)).toEqual(['omitted', '1', '2', '8', '9+', '9+']);
    expect(() => countCategory(0)).toThrow(RangeError);
    expect(() => countCategory(1.5)).toThrow(RangeError);
    expect(COUNT_CATEGORIES).toHaveLength(10);
  });
});

describe('detectCountShift', () => {
  // A typical workload: most clients omit n, a quarter send n=1, a few ask for 2.
  const usual = { omitted: 0.7, '1': 0.25, '2': 0.05 };
  const baseline: CountDistribution = { omitted: 980, '1': 350, '2': 70 }; // 7 days × 200

  it('does not alert on noise at the minimum sample', () => {
    // a day two standard deviations off on each share (n = 200: σ ≈ 3.2 % for 70 %, 3.1 % for 25 %)
    expect(detectCountShift({ omitted: 127, '1': 62, '2': 11 }, baseline)).toMatchObject({ alert: false });
    // and 1,000 seeded days drawn from the baseline's own shares: false alarms stay rare (both
    // conditions must hold: a chance TVD ≥ 0.1 at n = 200 that is also significant at 1 %)
    const rng = seededUniform(2026);
    let alerts = 0;
    for (let d = 0; d < 1_000; d++) {
      const r = detectCountShift(drawDay(usual, DEFAULT_SHIFT_THRESHOLDS.minSample, rng), baseline);
      expect(r.reason).not.toBe('insufficient_sample');
      if (r.alert) alerts += 1;
    }
    expect(alerts).toBeLessThanOrEqual(5);
  });

  it('alerts on a 1 → 3 shift: a client library starts asking for three candidates', () => {
    const day: CountDistribution = { omitted: 140, '3': 50, '2': 10 }; // the n=1 callers now send n=3
    const r = detectCountShift(day, baseline);
    expect(r).toMatchObject({ alert: true, reason: 'shift', dayTotal: 200, baselineTotal: 1400 });
    if (r.reason === 'insufficient_sample') throw new Error('unreachable');
    expect(r.distance).toBeCloseTo(0.25, 10);
    expect(r.grew[0]).toEqual({ category: '3', dayShare: 0.25, baselineShare: 0 });
    expect(r.chiSquare).toBeGreaterThan(r.criticalValue);
  });

  it('alerts on a partial shift once it is both large and clear, not before', () => {
    // 12 % of the day's requests move from omitted to n=2: large (TVD 0.12) and clear at n = 400
    const partial = detectCountShift({ omitted: 232, '1': 100, '2': 68 }, baseline);
    expect(partial).toMatchObject({ alert: true, reason: 'shift' });
    // 5 % moved: significant at this size, but below the 0.1 distance that matters
    const small = detectCountShift({ omitted: 2_080, '1': 800, '2': 320 }, baseline);
    expect(small).toMatchObject({ alert: false, reason: 'small_change' });
  });

  it('says the sample is too small below the minimum on either side, whatever the shift', () => {
    expect(detectCountShift({ '3': 199 }, baseline)).toEqual({
      alert: false,
      reason: 'insufficient_sample',
      dayTotal: 199,
      baselineTotal: 1400,
    });
    expect(detectCountShift({ '3': 500 }, { '1': 150 })).toMatchObject({ alert: false, reason: 'insufficient_sample' });
  });

  it('pools sparse categories so no expected cell is below 5, and still sees a shift into them', () => {
    // a handful of requests for n = 4 … 9+ on each side: pooled, not fatal
    const base: CountDistribution = { omitted: 1_000, '1': 380, '4': 3, '5': 2, '7': 1, '9+': 1 };
    const quiet = detectCountShift({ omitted: 142, '1': 56, '5': 1, '9+': 1 }, base);
    expect(quiet).toMatchObject({ alert: false });
    const loud = detectCountShift({ omitted: 100, '1': 40, '9+': 60 }, base);
    expect(loud).toMatchObject({ alert: true, reason: 'shift', grew: [expect.objectContaining({ category: '9+' })] });
  });

  it('refuses unknown categories and bad counts', () => {
    expect(() => detectCountShift({ '0': 5 } as CountDistribution, baseline)).toThrow(RangeError);
    expect(() => detectCountShift({ '1': -1 }, baseline)).toThrow(RangeError);
    expect(() => detectCountShift({ '1': 1.5 }, baseline)).toThrow(RangeError);
  });
});
