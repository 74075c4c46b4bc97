import { createRng, estimatePromptTokens, generateWords, hash32, randomInt } from './text';

describe('text generation', () => {
  it('is deterministic for a seed and differs across seeds', () => {
    const a = generateWords(createRng(42), 20);
    expect(generateWords(createRng(42), 20)).toEqual(a);
    expect(generateWords(createRng(43), 20)).not.toEqual(a);
  });

  it('produces exactly the requested number of words, first one capitalised', () => {
    const words = generateWords(createRng(1), 9);
    expect(words).toHaveLength(9);
    expect(words[0][0]).toBe(words[0][0].toUpperCase());
    expect(words.every((w) => /^[A-Za-z]+$/.test(w))).toBe(true);
    expect(generateWords(createRng(1), 0)).toEqual([]);
  });

  it('keeps rng output in [0, 1) and randomInt within bounds', () => {
    const rng = createRng(7);
    for (let i = 0; i < 1000; i++) {
      const x = rng();
      expect(x).toBeGreaterThanOrEqual(0);
      expect(x).toBeLessThan(1);
      const n = randomInt(rng, 50, 200);
      expect(n).toBeGreaterThanOrEqual(50);
      expect(n).toBeLessThanOrEqual(200);
    }
    expect(randomInt(rng, 5, 5)).toBe(5);
  });

  it('hashes strings stably', () => {
    expect(hash32('abc')).toBe(hash32('abc'));
    expect(hash32('abc')).not.toBe(hash32('abd'));
    expect(hash32('')).toBe(0x811c9dc5);
  });

  it('estimates prompt tokens as ceil(chars/4) + 3 per message', () => {
    expect(estimatePromptTokens([])).toBe(0);
    expect(estimatePromptTokens([0])).toBe(3);
    expect(estimatePromptTokens([5, 8])).toBe(2 + 3 + 2 + 3);
  });
});
