import { resolveScript } from './script';
import { planResponse } from './simulate';
import { abortPoint, newProgress, NOTHING_BILLED, wouldBill, type BillProgress } from './would-bill';

// 2 candidates × (4 reasoning + 10 words), 20 prompt tokens of which 6 cached
const plan = planResponse({
  asked: 2,
  cap: null,
  promptTokens: 20,
  seed: 1,
  fingerprint: 'f',
  script: resolveScript('sim;words=10;reasoning=4;cached=6').script,
});
const progress = (over: Partial<BillProgress>): BillProgress => ({ ...newProgress(), plan, delayStartMs: 10, delayMs: 100, ...over });

describe('wouldBill', () => {
  it('bills nothing for a request that never became an answer', () => {
    expect(wouldBill(newProgress(), 50)).toEqual(NOTHING_BILLED);
  });

  it('whole response: the prompt, and output generated evenly over the latency delay', () => {
    expect(wouldBill(progress({}), 10)).toEqual({ promptTokens: 20, cachedTokens: 6, outputTokens: 0, reasoningTokens: 0 });
    expect(wouldBill(progress({}), 60)).toEqual({ promptTokens: 20, cachedTokens: 6, outputTokens: 10, reasoningTokens: 4 });
    expect(wouldBill(progress({}), 85)).toEqual({ promptTokens: 20, cachedTokens: 6, outputTokens: 15, reasoningTokens: 6 });
    expect(wouldBill(progress({ delayDone: true }), 105)).toMatchObject({ outputTokens: 20, reasoningTokens: 8 });
    expect(wouldBill(progress({ delayMs: 0 }), 10)).toMatchObject({ outputTokens: 20, reasoningTokens: 8 });
  });

  it('stream: the share of content written; reasoning in full once content started', () => {
    expect(wouldBill(progress({ streaming: true, delayDone: true }), 500)).toMatchObject({ outputTokens: 0, reasoningTokens: 0 });
    expect(wouldBill(progress({ streaming: true, delayDone: true, streamed: 0.55 }), 500)).toMatchObject({
      promptTokens: 20,
      outputTokens: 11,
      reasoningTokens: 8,
    });
  });

  it('counts the true output, not what under-usage reports', () => {
    const under = planResponse({
      asked: 2,
      cap: null,
      promptTokens: 5,
      seed: 1,
      fingerprint: 'f',
      script: resolveScript('sim;under-usage').script,
    });
    expect(under.outputTokens).toBe(12);
    expect(wouldBill(progress({ plan: under, delayDone: true }), 200).outputTokens).toBe(24);
  });
});

describe('abortPoint', () => {
  it('is before the first byte until body bytes are written', () => {
    expect(abortPoint(progress({}), false)).toBe('before_first_byte');
    expect(abortPoint(progress({}), true)).toBe('mid_response');
    expect(abortPoint(progress({ streaming: true }), true)).toBe('before_first_byte');
    expect(abortPoint(progress({ streaming: true, streamed: 0.5 }), true)).toBe('mid_response');
  });
});
