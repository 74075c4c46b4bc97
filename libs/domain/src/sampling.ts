/**
 * Sampling sanity (issue 16 §3): several candidates drawn without randomness — temperature 0, or
 * top-k 1 — are the same answer N times (near-identical at best), and every one of them is billed
 * as output. `decideAdmission` refuses such a request unless an exception allows it.
 */
import { asRecord, GEMINI_GENERATION_CONFIG, RequestDialect } from './request-shape';

/** Every spelling a dialect's providers accept for the two fields that switch sampling off. */
const SPELLINGS: Readonly<Record<'temperature' | 'topK', readonly string[]>> = {
  temperature: ['temperature'],
  topK: ['topK', 'top_k'],
};

/**
 * The field (as the caller named it, with `generationConfig.` for Gemini) that makes sampling
 * deterministic, or null: `temperature` exactly 0, or top-k exactly 1. OpenAI's own API has no
 * top-k, but OpenAI-compatible aggregators pass `top_k` through to their engines, so it counts.
 * Other values (absent, non-numbers) leave sampling to the provider's defaults, which sample.
 */
export function deterministicSamplingParam(body: Record<string, unknown>, dialect: RequestDialect): string | null {
  const container = dialect === 'gemini-generate' ? asRecord(body[GEMINI_GENERATION_CONFIG]) : body;
  if (!container) return null;
  const prefix = dialect === 'gemini-generate' ? `${GEMINI_GENERATION_CONFIG}.` : '';
  for (const name of SPELLINGS.temperature) if (container[name] === 0) return `${prefix}${name}`;
  for (const name of SPELLINGS.topK) if (container[name] === 1) return `${prefix}${name}`;
  return null;
}
