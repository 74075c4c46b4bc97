import fc from 'fast-check';
import { drawLatency, onTimeProbability } from './latency';
import { resolveScript, ScriptError } from './script';
import { createRng, randomInt } from './text';

const script = (spec: string) => resolveScript(`sim;${spec}`).script;

describe('latency-tail directive', () => {
  it('parses per mille and the slow range next to latency', () => {
    expect(script('latency=20-40;latency-tail=50:2000-4000')).toMatchObject({
      latency: { min: 20, max: 40 },
      latencyTail: { perMille: 50, min: 2000, max: 4000 },
    });
    expect(script('latency-tail=1000:300').latencyTail).toEqual({ perMille: 1000, min: 300, max: 300 });
    expect(resolveScript('sim;latency-tail=5:100-200').directives).toEqual(['latency-tail=5:100-200']);
  });

  it.each([
    ['latency-tail=50', /per_mille/],
    ['latency-tail=1001:100-200', /between 0 and 1000/],
    ['latency-tail=50:200-100', /reversed/],
    ['latency-tail=50:1-2-3', /<min>-<max>/],
    ['latency-tail=x:100', /per_mille/],
    ['latency-tail=50:', /per_mille/],
    ['latency=1-2-3', /<min>-<max>/],
  ])('rejects %s', (spec, message) => {
    expect(() => script(spec)).toThrow(ScriptError);
    expect(() => script(spec)).toThrow(message);
  });
});

describe('drawLatency', () => {
  it('keeps the single-draw sequence when there is no tail', () => {
    const a = createRng(7);
    const b = createRng(7);
    const s = script('latency=10-90');
    for (let i = 0; i < 20; i++) expect(drawLatency(a, s)).toBe(randomInt(b, 10, 90));
    expect(drawLatency(a, script(''))).toBe(0);
  });

  it('is deterministic under the seed and draws the slow range at about perMille', () => {
    const s = script('latency=20-40;latency-tail=100:2000-4000');
    const draws = (seed: number) => {
      const rng = createRng(seed);
      return Array.from({ length: 4000 }, () => drawLatency(rng, s));
    };
    const first = draws(3);
    expect(draws(3)).toEqual(first);
    expect(first.every((ms) => (ms >= 20 && ms <= 40) || (ms >= 2000 && ms <= 4000))).toBe(true);
    const slowShare = first.filter((ms) => ms >= 2000).length / first.length;
    expect(slowShare).toBeGreaterThan(0.085);
    expect(slowShare).toBeLessThan(0.115);
  });
});

describe('onTimeProbability', () => {
  it('computes the mixture of two uniform whole-ms ranges', () => {
    const s = 'latency=20-39;latency-tail=50:2000-3999';
    expect(onTimeProbability(s, 19)).toBe(0);
    expect(onTimeProbability(s, 29)).toBeCloseTo(0.95 * 0.5, 12);
    expect(onTimeProbability(s, 39)).toBeCloseTo(0.95, 12);
    expect(onTimeProbability(s, 1000)).toBeCloseTo(0.95, 12);
    expect(onTimeProbability(s, 2999)).toBeCloseTo(0.95 + 0.05 * 0.5, 12);
    expect(onTimeProbability(s, 3999)).toBe(1);
    expect(onTimeProbability(script(s), 39)).toBeCloseTo(0.95, 12);
  });

  it('is 1 at any deadline ≥ 0 without latency and a step for a fixed latency', () => {
    expect(onTimeProbability('', 0)).toBe(1);
    expect(onTimeProbability('latency=100', 99.9)).toBe(0);
    expect(onTimeProbability('latency=100', 100)).toBe(1);
  });

  it('rejects nonsense directives', () => {
    expect(() => onTimeProbability('latency-tail=2000:1', 5)).toThrow(ScriptError);
  });

  it('matches the empirical share of seeded draws', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1000 }),
        fc.integer({ min: 0, max: 50 }),
        fc.integer({ min: 0, max: 300 }),
        fc.integer({ min: 1, max: 2 ** 31 }),
        (perMille, fastMax, deadline, seed) => {
          const s = script(`latency=0-${fastMax};latency-tail=${perMille}:100-400`);
          const rng = createRng(seed);
          const n = 3000;
          let onTime = 0;
          for (let i = 0; i < n; i++) if (drawLatency(rng, s) <= deadline) onTime++;
          // 5 standard deviations of a binomial share at worst (p = 1/2)
          expect(Math.abs(onTime / n - onTimeProbability(s, deadline))).toBeLessThan(5 * Math.sqrt(0.25 / n));
        },
      ),
      { numRuns: 40 },
    );
  });
});
