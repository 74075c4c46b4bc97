import fc from 'fast-check';
import { generatedTextBytes, MAX_BYTES_PER_TOKEN, outputTokensFloor, usageImplausible } from './usage-plausibility';

describe('generatedTextBytes', () => {
  it.each([
    ['ascii', 'Budgets and tokens', 18],
    ['multi-byte characters count their UTF-8 bytes', 'prix: 5 €', 11],
    ['a run of one repeated character counts once', `${' '.repeat(64)}x${'-'.repeat(40)}`, 3],
    ['empty', '', 0],
  ])('%s', (_name, text, bytes) => {
    expect(generatedTextBytes(text)).toBe(bytes);
  });
});

describe('outputTokensFloor', () => {
  it('sums per candidate: bytes / 8 rounded up, or the provider’s own per-candidate count when higher', () => {
    expect(outputTokensFloor([{ textBytes: 80 }, { textBytes: 81 }])).toBe(10 + 11);
    expect(
      outputTokensFloor([
        { textBytes: 80, tokenCount: 30 },
        { textBytes: 80, tokenCount: 2 },
      ]),
    ).toBe(30 + 10);
    expect(outputTokensFloor([{ textBytes: 0, tokenCount: null }])).toBe(0);
    expect(outputTokensFloor([])).toBe(0);
  });

  it('never exceeds what a tokeniser of at most 8 bytes per token would count (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'grapheme' }), { maxLength: 6 }), (texts) => {
        // an honest usage: one token per 8 bytes, rounded up, per candidate
        const honest = texts.reduce((s, t) => s + Math.ceil(Buffer.byteLength(t, 'utf8') / MAX_BYTES_PER_TOKEN), 0);
        expect(outputTokensFloor(texts.map((t) => ({ textBytes: generatedTextBytes(t) })))).toBeLessThanOrEqual(honest);
      }),
    );
  });
});

describe('usageImplausible', () => {
  it.each([
    ['two candidates, usage below the floor', { effectiveCandidates: 2, outputTokensTotal: 12, outputTokensFloor: 20 }, true],
    ['two candidates, usage at the floor', { effectiveCandidates: 2, outputTokensTotal: 20, outputTokensFloor: 20 }, false],
    ['two candidates, usage above the floor', { effectiveCandidates: 2, outputTokensTotal: 48, outputTokensFloor: 20 }, false],
    ['one candidate is not judged', { effectiveCandidates: 1, outputTokensTotal: 0, outputTokensFloor: 20 }, false],
    ['no floor measured', { effectiveCandidates: 2, outputTokensTotal: 0, outputTokensFloor: undefined }, false],
    ['no usage (a case of its own)', { effectiveCandidates: 2, outputTokensTotal: null, outputTokensFloor: 20 }, false],
  ])('%s → %p', (_name, input, expected) => {
    expect(usageImplausible(input)).toBe(expected);
  });
});
