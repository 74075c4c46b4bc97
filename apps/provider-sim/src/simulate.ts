// Provider-neutral core: decides how many candidates are served, their text, token counts and finish reasons.
import type { SimScript } from './script';
import { createRng, generateWords, hash32 } from './text';

export const DEFAULT_WORDS = 12;
/** Tokens a filtered candidate "produced" before being stopped (counted in usage). */
export const FILTERED_TOKENS = 3;

export type SimFinish = 'stop' | 'length' | 'filter';

export interface SimCandidate {
  index: number;
  /** Visible words (1 word = 1 token); empty for filtered candidates. */
  words: string[];
  /** Visible (or filtered) output tokens, excluding reasoning. */
  outputTokens: number;
  reasoningTokens: number;
  finish: SimFinish;
}

export interface SimPlan {
  candidates: SimCandidate[];
  promptTokens: number;
  cachedTokens: number;
  /** Sum of outputTokens over candidates (the first candidate's only under `under-usage`): what usage reports. */
  outputTokens: number;
  /** Sum of reasoningTokens over candidates (likewise). */
  reasoningTokens: number;
}

export interface PlanInput {
  /** Candidates asked for (`n` / `candidateCount`), null when omitted. */
  asked: number | null;
  /** Per-candidate output cap (reasoning + visible), null when omitted. */
  cap: number | null;
  promptTokens: number;
  /** the last prompt text, answered word for word under `echo` */
  lastText?: string;
  seed: number;
  fingerprint: string;
  script: SimScript;
}

export function planResponse(input: PlanInput): SimPlan {
  const { script, cap } = input;
  let count = (input.asked ?? 1) + script.extra;
  if (script.serve !== undefined) count = Math.min(count, script.serve);

  const candidates: SimCandidate[] = [];
  for (let index = 0; index < count; index++) {
    const rng = createRng(hash32(`${input.seed}:${input.fingerprint}:${index}`));
    const reasoningTokens = cap === null ? script.reasoning : Math.min(script.reasoning, cap);
    const budget = cap === null ? Infinity : cap - reasoningTokens;
    const filtered = script.filter.includes(index);
    const echoed = script.echo ? (input.lastText ?? '').split(' ') : null;
    const target = filtered ? FILTERED_TOKENS : (echoed?.length ?? script.words ?? DEFAULT_WORDS);
    const outputTokens = Math.min(target, budget);
    candidates.push({
      index,
      words: filtered ? [] : (echoed?.slice(0, outputTokens) ?? generateWords(rng, outputTokens)),
      outputTokens,
      reasoningTokens,
      finish: filtered ? 'filter' : target > budget ? 'length' : 'stop',
    });
  }
  const reported = script.underUsage ? candidates.slice(0, 1) : candidates;
  return {
    candidates,
    promptTokens: input.promptTokens,
    cachedTokens: Math.min(script.cached, input.promptTokens),
    outputTokens: reported.reduce((s, c) => s + c.outputTokens, 0),
    reasoningTokens: reported.reduce((s, c) => s + c.reasoningTokens, 0),
  };
}

/**
 * Interleaves per-candidate event lists round-robin: a0 b0 c0 a1 b1 c1 ...
 * so that stream consumers must route pieces by candidate index.
 */
export function interleave<T>(lists: T[][]): T[] {
  const out: T[] = [];
  const longest = Math.max(0, ...lists.map((l) => l.length));
  for (let step = 0; step < longest; step++) for (const list of lists) if (step < list.length) out.push(list[step]);
  return out;
}
