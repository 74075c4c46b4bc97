/**
 * Request fields that change what the provider bills (DESIGN §4 `unpriced_feature`). Unknown
 * fields pass through for drop-in compatibility, but these ones buy something the reservation
 * does not price (a faster tier, audio or image output, per-call tool fees, a different model),
 * so they are refused unless the route contract declares the feature as priced.
 *
 * This is the one per-provider list; admission asks `pricedFeaturesUsed` and nothing else
 * decides what a field costs.
 */
import type { MediaKind } from './input-estimate';
import type { PricedShape } from './pricing';
import { asRecord } from './request-shape';

/** A provider kind, or the Responses dialect (served on `openai-chat` routes, with its own tools). */
export type ProviderFamily = 'openai-chat' | 'openai-compatible' | 'gemini-generate' | 'openai-responses';

export const PRICED_FEATURES = [
  'service_tier',
  'audio_output',
  'image_output',
  'web_search',
  'predicted_output',
  'search_grounding',
  'maps_grounding',
  'code_execution',
  'url_context',
  'model_routing',
  'plugins',
  'file_search',
  'computer_use',
  'remote_mcp',
] as const;
export type PricedFeature = (typeof PRICED_FEATURES)[number];

/** Features priced by rates, not by per-call fees. */
export const RATE_PRICED_FEATURES = ['service_tier', 'audio_output', 'image_output'] as const satisfies readonly PricedFeature[];
export const FEE_PRICED_FEATURES = PRICED_FEATURES.filter((f) => !(RATE_PRICED_FEATURES as readonly string[]).includes(f));

export interface FeatureUse {
  feature: PricedFeature;
  /** the request field that asks for it */
  param: string;
}

/** Gemini tools with per-call fees, in both JSON spellings. */
const GEMINI_TOOL_FEATURES: Readonly<Record<string, PricedFeature>> = {
  googleSearch: 'search_grounding',
  google_search: 'search_grounding',
  googleSearchRetrieval: 'search_grounding',
  google_search_retrieval: 'search_grounding',
  enterpriseWebSearch: 'search_grounding',
  enterprise_web_search: 'search_grounding',
  googleMaps: 'maps_grounding',
  google_maps: 'maps_grounding',
  codeExecution: 'code_execution',
  code_execution: 'code_execution',
  urlContext: 'url_context',
  url_context: 'url_context',
};

/**
 * Responses API hosted tools (`tools[i].type`) with per-call fees or billed work the reservation
 * does not see. Function and custom tools run at the caller and are free; a type starting with
 * `web_search` (`web_search_preview`, dated variants) is web search.
 */
const RESPONSES_TOOL_FEATURES: Readonly<Record<string, PricedFeature>> = {
  file_search: 'file_search',
  code_interpreter: 'code_execution',
  image_generation: 'image_output',
  computer_use: 'computer_use',
  computer_use_preview: 'computer_use',
  mcp: 'remote_mcp',
};

/**
 * The price-changing features a request body uses. Gemini bodies are read in both spellings (they
 * are normally canonical by now, but this list must not depend on that).
 */
export function pricedFeaturesUsed(body: Record<string, unknown>, provider: ProviderFamily): FeatureUse[] {
  switch (provider) {
    case 'openai-chat':
      return openAiFeatures(body);
    case 'openai-compatible':
      return [
        ...openAiFeatures(body),
        ...(present(body.models) ? [{ feature: 'model_routing' as const, param: 'models' }] : []),
        ...(present(body.plugins) ? [{ feature: 'plugins' as const, param: 'plugins' }] : []),
      ];
    case 'gemini-generate':
      return geminiFeatures(body);
    case 'openai-responses':
      return [...openAiFeatures(body), ...responsesToolFeatures(body)];
  }
}

/**
 * What the request asks for that changes its worst-case price (`estimateCostMicrousd`), from the
 * same reading of the body as `pricedFeaturesUsed`: the service tier it names (OpenAI family; absent,
 * null or `default` is the base rates; a value that is not a string never names a priced tier),
 * audio and image output, the per-call-billed features it enables, and whether the prompt carries
 * audio — counted by the input estimate (`estimateRequestInputTokens(...).media`), the one reader
 * of prompt content: OpenAI `input_audio` parts, Gemini inline data with an `audio/*` MIME type.
 */
export function pricedShapeOf(
  body: Record<string, unknown>,
  provider: ProviderFamily,
  inputMedia: Readonly<Record<MediaKind, number>>,
): PricedShape {
  const used = pricedFeaturesUsed(body, provider);
  const uses = (f: PricedFeature) => used.some((u) => u.feature === f);
  const features = [...new Set(used.map((u) => u.feature))].filter((f) => (FEE_PRICED_FEATURES as readonly string[]).includes(f));
  return {
    serviceTier: uses('service_tier') ? requestedServiceTier(body.service_tier) : null,
    audioInput: inputMedia.audio > 0,
    audioOutput: uses('audio_output'),
    imageOutput: uses('image_output'),
    features,
  };
}

/** A tier name as sent; anything else becomes its JSON text, which no revision's tier names match. */
function requestedServiceTier(v: unknown): string {
  return typeof v === 'string' ? v : String(JSON.stringify(v));
}

/** The first used feature the contract does not declare as priced, or null. */
export function unpricedFeature(used: readonly FeatureUse[], declared: readonly string[]): FeatureUse | null {
  return used.find((u) => !declared.includes(u.feature)) ?? null;
}

function openAiFeatures(body: Record<string, unknown>): FeatureUse[] {
  const out: FeatureUse[] = [];
  if (present(body.service_tier) && body.service_tier !== 'default') out.push({ feature: 'service_tier', param: 'service_tier' });
  for (const m of Array.isArray(body.modalities) ? body.modalities : []) {
    if (m === 'audio') out.push({ feature: 'audio_output', param: 'modalities' });
    else if (m !== 'text') out.push({ feature: 'image_output', param: 'modalities' });
  }
  if (present(body.modalities) && !Array.isArray(body.modalities)) out.push({ feature: 'audio_output', param: 'modalities' });
  if (present(body.audio)) out.push({ feature: 'audio_output', param: 'audio' });
  if (present(body.web_search_options)) out.push({ feature: 'web_search', param: 'web_search_options' });
  if (present(body.prediction)) out.push({ feature: 'predicted_output', param: 'prediction' });
  return out;
}

function responsesToolFeatures(body: Record<string, unknown>): FeatureUse[] {
  const out: FeatureUse[] = [];
  const tools = Array.isArray(body.tools) ? body.tools : [];
  tools.forEach((tool, i) => {
    const type = asRecord(tool)?.type;
    if (typeof type !== 'string') return;
    const feature = type.startsWith('web_search')
      ? 'web_search'
      : Object.hasOwn(RESPONSES_TOOL_FEATURES, type)
        ? RESPONSES_TOOL_FEATURES[type]
        : null;
    if (feature) out.push({ feature, param: `tools[${i}].type` });
  });
  return out;
}

function geminiFeatures(body: Record<string, unknown>): FeatureUse[] {
  const out: FeatureUse[] = [];
  for (const configKey of ['generationConfig', 'generation_config']) {
    const config = asRecord(body[configKey]);
    if (!config) continue;
    for (const key of ['responseModalities', 'response_modalities']) {
      const modalities = config[key];
      const list = Array.isArray(modalities) ? modalities : present(modalities) ? [modalities] : [];
      for (const m of list) {
        const name = typeof m === 'string' ? m.toUpperCase() : '';
        if (name === 'TEXT') continue;
        out.push({ feature: name === 'IMAGE' ? 'image_output' : 'audio_output', param: `${configKey}.${key}` });
      }
    }
    for (const key of ['speechConfig', 'speech_config']) {
      if (present(config[key])) out.push({ feature: 'audio_output', param: `${configKey}.${key}` });
    }
  }
  const tools = Array.isArray(body.tools) ? body.tools : [];
  tools.forEach((tool, i) => {
    for (const key of Object.keys(asRecord(tool) ?? {})) {
      const feature = GEMINI_TOOL_FEATURES[key];
      if (feature) out.push({ feature, param: `tools[${i}].${key}` });
    }
  });
  return out;
}

function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}
