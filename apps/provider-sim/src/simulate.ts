// Provider-neutral core: decides how many candidates are served, their text, token counts and finish reasons.
import type { SimScript } from './script';
import { createRng, generateWords, hash32 } from './text';

export const DEFAULT_WORDS = 12;
/** Output tokens of a candidate's audio, and of its image, when the request asks for them. */
export const DEFAULT_AUDIO_TOKENS = 32;
export const DEFAULT_IMAGE_TOKENS = 64;
/** Tokens a filtered candidate "produced" before being stopped (counted in usage). */
export const FILTERED_TOKENS = 3;

export type SimFinish = 'stop' | 'length' | 'filter';

export interface SimCandidate {
  index: number;
  /** Visible words (1 word = 1 token); empty for filtered candidates. */
  words: string[];
  /** Visible (or filtered) output tokens, excluding reasoning; media tokens included. */
  outputTokens: number;
  reasoningTokens: number;
  /** Of outputTokens: audio and image (generated before the words, within the cap). */
  audioTokens: number;
  imageTokens: number;
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
  /** Of promptTokens: written to the prompt cache, and audio. */
  cacheWriteTokens: number;
  audioInputTokens: number;
  /** Of outputTokens: audio and image (likewise). */
  audioOutputTokens: number;
  imageOutputTokens: number;
}

/** Output media a request asks for. */
export interface MediaAsked {
  audio: boolean;
  image: boolean;
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
  /** output media the request asks for (none when omitted) */
  media?: MediaAsked;
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
    const audioTokens = filtered || !input.media?.audio ? 0 : Math.min(script.audioOut ?? DEFAULT_AUDIO_TOKENS, budget);
    const imageTokens = filtered || !input.media?.image ? 0 : Math.min(script.imageOut ?? DEFAULT_IMAGE_TOKENS, budget - audioTokens);
    const left = budget - audioTokens - imageTokens;
    const echoed = script.echo ? (input.lastText ?? '').split(' ') : null;
    const target = filtered ? FILTERED_TOKENS : (echoed?.length ?? script.words ?? DEFAULT_WORDS);
    const wordTokens = Math.min(target, left);
    candidates.push({
      index,
      words: filtered ? [] : (echoed?.slice(0, wordTokens) ?? generateWords(rng, wordTokens)),
      outputTokens: wordTokens + audioTokens + imageTokens,
      reasoningTokens,
      audioTokens,
      imageTokens,
      finish: filtered ? 'filter' : target > left ? 'length' : 'stop',
    });
  }
  const reported = script.underUsage ? candidates.slice(0, 1) : candidates;
  const sum = (f: (c: SimCandidate) => number) => reported.reduce((s, c) => s + f(c), 0);
  const cachedTokens = Math.min(script.cached, input.promptTokens);
  return {
    candidates,
    promptTokens: input.promptTokens,
    cachedTokens,
    outputTokens: sum((c) => c.outputTokens),
    reasoningTokens: sum((c) => c.reasoningTokens),
    cacheWriteTokens: Math.min(script.cacheWrite, input.promptTokens - cachedTokens),
    audioInputTokens: Math.min(script.audioIn, input.promptTokens),
    audioOutputTokens: sum((c) => c.audioTokens),
    imageOutputTokens: sum((c) => c.imageTokens),
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
