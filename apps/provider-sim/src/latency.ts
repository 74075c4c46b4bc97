// The delay before a response starts: `latency=<range>` (uniform whole ms), optionally with a heavy
// tail `latency-tail=<per_mille>:<range>`. Draws come from the instance's seeded RNG; the exact
// distribution is computable from the directives (onTimeProbability), so experiments can compare a
// measured on-time rate with the truth.
import { parseDirectives, toScript, type LatencyRange, type SimScript } from './script';
import { randomInt, type Rng } from './text';

type LatencyScript = Pick<SimScript, 'latency' | 'latencyTail'>;

const NONE: LatencyRange = { min: 0, max: 0 };

/**
 * Draws one delay (ms). Without a tail: one uniform draw from `latency` (the sequence older seeds
 * produced). With a tail: one draw picks slow (probability perMille/1000) or fast, a second one the
 * delay within that range; `latency` absent means the fast range is 0 ms.
 */
export function drawLatency(rng: Rng, script: LatencyScript): number {
  const { latency, latencyTail } = script;
  if (!latencyTail) return latency ? randomInt(rng, latency.min, latency.max) : 0;
  const slow = rng() < latencyTail.perMille / 1000;
  const r = slow ? latencyTail : (latency ?? NONE);
  return randomInt(rng, r.min, r.max);
}

/** P(uniform whole-ms draw from `r` ≤ deadlineMs). */
function rangeOnTime(r: LatencyRange, deadlineMs: number): number {
  const onTime = Math.floor(deadlineMs) - r.min + 1;
  return Math.min(1, Math.max(0, onTime / (r.max - r.min + 1)));
}

/**
 * The true probability that a request's drawn delay is at most `deadlineMs` — the share of requests a
 * client with that deadline sees start in time, before transport and handling overhead (a few ms) and
 * before `ttft` / `stall`, which are constants a caller adds itself. `script`: a parsed script or the
 * directives as text (`latency=20-40;latency-tail=50:2000-4000`).
 */
export function onTimeProbability(script: LatencyScript | string, deadlineMs: number): number {
  const s = typeof script === 'string' ? toScript(parseDirectives(script)) : script;
  const fast = rangeOnTime(s.latency ?? NONE, deadlineMs);
  if (!s.latencyTail) return fast;
  const p = s.latencyTail.perMille / 1000;
  return (1 - p) * fast + p * rangeOnTime(s.latencyTail, deadlineMs);
}
