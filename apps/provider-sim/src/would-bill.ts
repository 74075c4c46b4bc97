// What a provider would bill for a request the client aborted: the ground truth for hedge losers
// (issue 10) and for a provider's own export (issue 15). The rule (README "Aborted requests"):
// - nothing for a request that never became an answer: body unread or invalid, a scripted error
//   (`status`, a pending `fail-first`, `block`, `reject-n`);
// - otherwise the whole prompt (read on arrival), and the output generated until the abort:
//   - whole response: generated evenly during the `latency` delay, so fraction f = elapsed / delay
//     (1 once the delay is over, or without one);
//   - stream: generated as it is written, so f = content characters written / all content
//     characters (0 before the first content byte: `latency` and `ttft` are time to first token);
//     reasoning comes before the first visible token, so it counts in full once content started;
//   - output tokens = floor(f × the answer's true output tokens over all candidates), reasoning
//     likewise (the truth, not what `under-usage` would report).
import type { SimPlan } from './simulate';

export interface BillProgress {
  /** The answer the request gets; null until known, or when it is a scripted error. */
  plan: SimPlan | null;
  /** ms after arrival the latency delay began (null before it), and its length (set with `plan`). */
  delayStartMs: number | null;
  delayMs: number;
  /** The delay ran to its end (the whole answer is generated). */
  delayDone: boolean;
  /** The response is a stream (headers written by sendStream). */
  streaming: boolean;
  /** Streams: share of the content characters written so far; null before the first content byte. */
  streamed: number | null;
}

export interface WouldBill {
  promptTokens: number;
  cachedTokens: number;
  outputTokens: number;
  reasoningTokens: number;
}

export const NOTHING_BILLED: WouldBill = { promptTokens: 0, cachedTokens: 0, outputTokens: 0, reasoningTokens: 0 };

export function newProgress(): BillProgress {
  return { plan: null, delayStartMs: null, delayMs: 0, delayDone: false, streaming: false, streamed: null };
}

/** Usage the provider would bill for a request aborted `abortAfterMs` after arrival. */
export function wouldBill(p: BillProgress, abortAfterMs: number): WouldBill {
  const { plan } = p;
  if (!plan) return { ...NOTHING_BILLED };
  let output: number;
  let reasoning: number;
  if (p.streaming) {
    output = p.streamed ?? 0;
    reasoning = p.streamed === null ? 0 : 1;
  } else {
    output = generatedShare(p, abortAfterMs);
    reasoning = output;
  }
  const sum = (f: (c: SimPlan['candidates'][number]) => number) => plan.candidates.reduce((s, c) => s + f(c), 0);
  return {
    promptTokens: plan.promptTokens,
    cachedTokens: plan.cachedTokens,
    outputTokens: Math.floor(output * sum((c) => c.outputTokens)),
    reasoningTokens: Math.floor(reasoning * sum((c) => c.reasoningTokens)),
  };
}

/** Whole responses: the share of the answer generated `abortAfterMs` after arrival. */
function generatedShare(p: BillProgress, abortAfterMs: number): number {
  if (p.delayDone || p.delayMs <= 0) return 1;
  if (p.delayStartMs === null) return 0;
  return Math.min(1, Math.max(0, (abortAfterMs - p.delayStartMs) / p.delayMs));
}

/** Where the response was when the client went away: no body byte written yet, or part of it. */
export function abortPoint(p: BillProgress, headersSent: boolean): 'before_first_byte' | 'mid_response' {
  const bodyStarted = p.streaming ? p.streamed !== null : headersSent;
  return bodyStarted ? 'mid_response' : 'before_first_byte';
}
