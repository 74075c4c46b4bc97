// Deterministic text generation: a seeded PRNG (mulberry32) and a fixed vocabulary. 1 word = 1 token.

const VOCAB = (
  'the quick model answers every prompt with careful words about budgets tokens gateways and spend ' +
  'limits while a patient operator watches latency charts graphs queues retries streams candidates ' +
  'quotas billing ledgers metrics alerts errors requests replies summaries notes plans drafts ideas ' +
  'simple clear brief useful honest calm steady bright quiet'
).split(' ');

export type Rng = () => number;

/** mulberry32: small, fast, good enough for test data. Returns floats in [0, 1). */
export function createRng(seed: number): Rng {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** FNV-1a 32-bit hash, used to derive per-candidate seeds from strings. */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Uniform integer in [min, max]. */
export function randomInt(rng: Rng, min: number, max: number): number {
  return min + Math.floor(rng() * (max - min + 1));
}

/** `count` words drawn from the vocabulary; the first one capitalised. */
export function generateWords(rng: Rng, count: number): string[] {
  const words: string[] = [];
  for (let i = 0; i < count; i++) words.push(VOCAB[Math.floor(rng() * VOCAB.length)]);
  if (words.length) words[0] = words[0][0].toUpperCase() + words[0].slice(1);
  return words;
}

/** Prompt-size estimate: ceil(chars / 4) + 3 per message. */
export function estimatePromptTokens(messageLengths: number[]): number {
  return messageLengths.reduce((sum, chars) => sum + Math.ceil(chars / 4) + 3, 0);
}
