// What a request asks for that the provider bills beyond text tokens, as the sim reads it to shape
// its answer: output media, hosted tools, the service tier. Independent of the gateway's own rules
// on purpose (like spend-fields): the sim answers as the provider would.
import type { SimScript } from './script';
import type { MediaAsked } from './simulate';

/** OpenAI chat: `modalities: ["text", "audio"]` (OpenRouter image models: `"image"`). */
export function openAiMediaAsked(body: Record<string, unknown>): MediaAsked {
  const modalities = Array.isArray(body.modalities) ? body.modalities : [];
  return { audio: modalities.includes('audio'), image: modalities.includes('image') };
}

/** Gemini: `generationConfig.responseModalities` (either spelling, any case). */
export function geminiMediaAsked(body: Record<string, unknown>): MediaAsked {
  const names: string[] = [];
  for (const configKey of ['generationConfig', 'generation_config']) {
    const config = record(body[configKey]);
    for (const key of ['responseModalities', 'response_modalities']) {
      const list = config?.[key];
      if (Array.isArray(list)) for (const m of list) if (typeof m === 'string') names.push(m.toUpperCase());
    }
  }
  return { audio: names.includes('AUDIO'), image: names.includes('IMAGE') };
}

/** Gemini grounding tools the request offers. */
export function geminiGrounding(body: Record<string, unknown>): { search: boolean; maps: boolean } {
  const keys = (Array.isArray(body.tools) ? body.tools : []).flatMap((t) => Object.keys(record(t) ?? {}));
  return {
    search: keys.some((k) => ['googleSearch', 'google_search', 'googleSearchRetrieval', 'google_search_retrieval'].includes(k)),
    maps: keys.some((k) => k === 'googleMaps' || k === 'google_maps'),
  };
}

/** Responses API hosted tools the request offers, by output item type they produce. */
export function responsesHostedTools(body: Record<string, unknown>): string[] {
  const types = (Array.isArray(body.tools) ? body.tools : []).map((t) => record(t)?.type).filter((t) => typeof t === 'string');
  const out: string[] = [];
  if (types.some((t) => t.startsWith('web_search'))) out.push('web_search_call');
  if (types.includes('file_search')) out.push('file_search_call');
  if (types.includes('code_interpreter')) out.push('code_interpreter_call');
  return out;
}

/** The tier an OpenAI-family answer reports: the script's, else the one asked (`auto` → `default`). */
export function reportedTier(body: Record<string, unknown>, script: SimScript): string {
  if (script.tier) return script.tier;
  const asked = body.service_tier;
  return typeof asked === 'string' && asked !== '' && asked !== 'auto' ? asked : 'default';
}

function record(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}
