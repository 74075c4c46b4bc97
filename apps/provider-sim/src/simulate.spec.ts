import { resolveScript } from './script';
import { DEFAULT_AUDIO_TOKENS, DEFAULT_WORDS, FILTERED_TOKENS, interleave, planResponse, type PlanInput } from './simulate';

const input = (directives: string, over: Partial<PlanInput> = {}): PlanInput => ({
  asked: null,
  cap: null,
  promptTokens: 20,
  seed: 1,
  fingerprint: 'fp',
  script: resolveScript(`m;${directives}`).script,
  ...over,
});

describe('planResponse', () => {
  it('serves one candidate with the default length when nothing is scripted', () => {
    const plan = planResponse(input(''));
    expect(plan.candidates).toHaveLength(1);
    expect(plan.candidates[0]).toMatchObject({ index: 0, outputTokens: DEFAULT_WORDS, reasoningTokens: 0, finish: 'stop' });
    expect(plan.candidates[0].words).toHaveLength(DEFAULT_WORDS);
    expect(plan).toMatchObject({ promptTokens: 20, cachedTokens: 0, outputTokens: DEFAULT_WORDS, reasoningTokens: 0 });
  });

  it('is deterministic in seed + fingerprint, and candidates differ from each other', () => {
    const a = planResponse(input('', { asked: 3 }));
    expect(planResponse(input('', { asked: 3 }))).toEqual(a);
    expect(planResponse(input('', { asked: 3, seed: 2 }))).not.toEqual(a);
    expect(planResponse(input('', { asked: 3, fingerprint: 'other' }))).not.toEqual(a);
    expect(a.candidates[0].words).not.toEqual(a.candidates[1].words);
  });

  it('caps each candidate at the max-tokens cap and reports length', () => {
    const plan = planResponse(input('words=30', { asked: 2, cap: 10 }));
    for (const c of plan.candidates) expect(c).toMatchObject({ outputTokens: 10, finish: 'length' });
    expect(plan.outputTokens).toBe(20);
    expect(planResponse(input('words=10', { cap: 10 })).candidates[0].finish).toBe('stop');
  });

  it('counts reasoning against the cap', () => {
    const plan = planResponse(input('words=10;reasoning=6', { asked: 2, cap: 10 }));
    for (const c of plan.candidates) expect(c).toMatchObject({ reasoningTokens: 6, outputTokens: 4, finish: 'length' });
    expect(plan.reasoningTokens).toBe(12);
    const starved = planResponse(input('reasoning=50', { cap: 10 })).candidates[0];
    expect(starved).toMatchObject({ reasoningTokens: 10, outputTokens: 0, words: [], finish: 'length' });
  });

  it('serve limits, extra adds', () => {
    expect(planResponse(input('serve=1', { asked: 4 })).candidates).toHaveLength(1);
    expect(planResponse(input('serve=5', { asked: 2 })).candidates).toHaveLength(2);
    expect(planResponse(input('extra=2', { asked: 2 })).candidates).toHaveLength(4);
    expect(planResponse(input('extra=1')).candidates).toHaveLength(2);
    expect(planResponse(input('serve=0', { asked: 2 })).candidates).toHaveLength(0);
  });

  it('under-usage reports the first candidate only, and serves every candidate in full', () => {
    const honest = planResponse(input('words=8;reasoning=2', { asked: 3 }));
    const under = planResponse(input('words=8;reasoning=2;under-usage', { asked: 3 }));
    expect(under.candidates).toEqual(honest.candidates);
    expect(honest).toMatchObject({ outputTokens: 24, reasoningTokens: 6 });
    expect(under).toMatchObject({ outputTokens: 8, reasoningTokens: 2 });
  });

  it('filters candidates but still counts a few tokens for them', () => {
    const plan = planResponse(input('filter=1;words=5', { asked: 3 }));
    expect(plan.candidates[1]).toMatchObject({ finish: 'filter', words: [], outputTokens: FILTERED_TOKENS });
    expect(plan.candidates[0].finish).toBe('stop');
    expect(plan.outputTokens).toBe(5 + FILTERED_TOKENS + 5);
    // the other candidates are unaffected by the filter
    expect(plan.candidates[0]).toEqual(planResponse(input('words=5', { asked: 3 })).candidates[0]);
  });

  it('caps cached tokens at the prompt size', () => {
    expect(planResponse(input('cached=5')).cachedTokens).toBe(5);
    expect(planResponse(input('cached=500')).cachedTokens).toBe(20);
  });
});

describe('interleave', () => {
  it('round-robins lists of different lengths', () => {
    expect(interleave<number | string>([[1, 2, 3], ['a'], [10, 20]])).toEqual([1, 'a', 10, 2, 20, 3]);
    expect(interleave([])).toEqual([]);
  });
});

describe('planResponse with echo', () => {
  it('answers with the last prompt text word for word, within the cap', () => {
    const text = 'naïve 日本 🚀  double space';
    const plan = planResponse(input('echo', { lastText: text }));
    expect(plan.candidates[0].words.join(' ')).toBe(text);
    expect(plan.outputTokens).toBe(text.split(' ').length);
    expect(planResponse(input('echo', { lastText: text, cap: 2 })).candidates[0]).toMatchObject({
      words: ['naïve', '日本'],
      finish: 'length',
    });
  });
});

describe('planResponse billable detail', () => {
  it('adds audio and image output per candidate, within the cap and before the words', () => {
    const plan = planResponse(input('words=10;audio-out=5;image-out=7', { asked: 2, media: { audio: true, image: true } }));
    for (const c of plan.candidates) expect(c).toMatchObject({ audioTokens: 5, imageTokens: 7, outputTokens: 22, finish: 'stop' });
    expect(plan).toMatchObject({ audioOutputTokens: 10, imageOutputTokens: 14, outputTokens: 44 });
    const capped = planResponse(input('words=10', { cap: 40, media: { audio: true, image: true } })).candidates[0];
    expect(capped).toMatchObject({
      audioTokens: DEFAULT_AUDIO_TOKENS,
      imageTokens: 40 - DEFAULT_AUDIO_TOKENS,
      words: [],
      finish: 'length',
    });
  });

  it('media directives change nothing unless the request asks for media; filtered candidates carry none', () => {
    expect(planResponse(input('audio-out=5;image-out=7'))).toEqual(planResponse(input('')));
    const plan = planResponse(input('filter=0', { media: { audio: true, image: false } }));
    expect(plan.candidates[0]).toMatchObject({ audioTokens: 0, outputTokens: FILTERED_TOKENS });
  });

  it('reports cache writes and audio input as parts of the prompt', () => {
    expect(planResponse(input('cached=12;cache-write=50;audio-in=30'))).toMatchObject({
      promptTokens: 20,
      cachedTokens: 12,
      cacheWriteTokens: 8,
      audioInputTokens: 20,
    });
  });
});
