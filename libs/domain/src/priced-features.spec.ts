import fc from 'fast-check';
import { estimateRequestInputTokens, MediaKind } from './input-estimate';
import { PRICED_FEATURES, pricedFeaturesUsed, pricedShapeOf, ProviderFamily, unpricedFeature } from './priced-features';
import { estimateCostMicrousd, featureUnpricedBy, PriceRevision, PricedShape } from './pricing';
import { TEST_PRICE } from './price.fixture';

describe('pricedFeaturesUsed', () => {
  it.each<[string, ProviderFamily, Record<string, unknown>, string[]]>([
    ['plain chat', 'openai-chat', { messages: [] }, []],
    ['default tier', 'openai-chat', { service_tier: 'default' }, []],
    ['priority tier', 'openai-chat', { service_tier: 'priority' }, ['service_tier']],
    ['auto tier', 'openai-chat', { service_tier: 'auto' }, ['service_tier']],
    ['text modality', 'openai-chat', { modalities: ['text'] }, []],
    ['audio modality', 'openai-chat', { modalities: ['text', 'audio'] }, ['audio_output']],
    ['audio options', 'openai-chat', { audio: { voice: 'alloy' } }, ['audio_output']],
    ['image modality (aggregator)', 'openai-compatible', { modalities: ['image', 'text'] }, ['image_output']],
    ['web search', 'openai-chat', { web_search_options: {} }, ['web_search']],
    ['prediction', 'openai-chat', { prediction: { type: 'content' } }, ['predicted_output']],
    ['aggregator models', 'openai-compatible', { models: ['a', 'b'] }, ['model_routing']],
    ['aggregator plugins', 'openai-compatible', { plugins: [{ id: 'web' }] }, ['plugins']],
    ['models on OpenAI itself is not an aggregator field', 'openai-chat', { models: ['a'] }, []],
    ['gemini text', 'gemini-generate', { generationConfig: { responseModalities: ['TEXT'] } }, []],
    ['gemini audio', 'gemini-generate', { generationConfig: { responseModalities: ['AUDIO'] } }, ['audio_output']],
    ['gemini image (snake)', 'gemini-generate', { generation_config: { response_modalities: ['TEXT', 'IMAGE'] } }, ['image_output']],
    ['gemini search', 'gemini-generate', { tools: [{ googleSearch: {} }] }, ['search_grounding']],
    ['gemini search (snake)', 'gemini-generate', { tools: [{ google_search: {} }] }, ['search_grounding']],
    ['gemini retrieval', 'gemini-generate', { tools: [{ googleSearchRetrieval: {} }] }, ['search_grounding']],
    ['gemini code execution', 'gemini-generate', { tools: [{ code_execution: {} }] }, ['code_execution']],
    ['gemini url context', 'gemini-generate', { tools: [{ urlContext: {} }] }, ['url_context']],
    ['gemini functions are free', 'gemini-generate', { tools: [{ functionDeclarations: [] }] }, []],
    ['responses plain', 'openai-responses', { input: 'hi', tools: [{ type: 'function', name: 'f' }] }, []],
    ['responses default tier', 'openai-responses', { service_tier: 'default' }, []],
    ['responses flex tier', 'openai-responses', { service_tier: 'flex' }, ['service_tier']],
    ['responses web search', 'openai-responses', { tools: [{ type: 'web_search' }] }, ['web_search']],
    ['responses web search preview', 'openai-responses', { tools: [{ type: 'web_search_preview_2025_03_11' }] }, ['web_search']],
    ['responses file search', 'openai-responses', { tools: [{ type: 'file_search', vector_store_ids: ['vs'] }] }, ['file_search']],
    ['responses code interpreter', 'openai-responses', { tools: [{ type: 'code_interpreter' }] }, ['code_execution']],
    ['responses image generation', 'openai-responses', { tools: [{ type: 'image_generation' }] }, ['image_output']],
    ['responses computer use', 'openai-responses', { tools: [{ type: 'computer_use_preview' }] }, ['computer_use']],
    ['responses remote MCP', 'openai-responses', { tools: [{ type: 'mcp', server_url: 'https://x' }] }, ['remote_mcp']],
    ['responses tool types do not count on chat', 'openai-chat', { tools: [{ type: 'web_search' }] }, []],
  ])('%s', (_name, provider, body, features) => {
    expect(pricedFeaturesUsed(body, provider).map((u) => u.feature)).toEqual(features);
  });

  it('a declared feature passes, an undeclared one is named with its field', () => {
    const used = pricedFeaturesUsed({ tools: [{ googleSearch: {} }, { codeExecution: {} }] }, 'gemini-generate');
    expect(unpricedFeature(used, ['search_grounding'])).toEqual({ feature: 'code_execution', param: 'tools[1].codeExecution' });
    expect(unpricedFeature(used, ['search_grounding', 'code_execution'])).toBeNull();
  });

  it('property: declaring every feature lets any body pass; declaring none refuses whatever is used', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<ProviderFamily>('openai-chat', 'openai-compatible', 'gemini-generate', 'openai-responses'),
        fc.object(),
        (provider, body) => {
          const used = pricedFeaturesUsed(body as Record<string, unknown>, provider);
          expect(unpricedFeature(used, PRICED_FEATURES)).toBeNull();
          expect(unpricedFeature(used, []) === null).toBe(used.length === 0);
        },
      ),
    );
  });
});

/** The shape as admission builds it: the media counts come from the input estimate of the same body. */
function shapeOf(body: Record<string, unknown>, provider: ProviderFamily): PricedShape {
  const dialect = provider === 'openai-responses' ? 'openai-responses' : provider === 'gemini-generate' ? 'gemini-generate' : 'openai-chat';
  const estimate = estimateRequestInputTokens(body, dialect);
  if (!estimate.ok) throw new Error(estimate.message);
  return pricedShapeOf(body, provider, estimate.media);
}

const NO_MEDIA: Record<MediaKind, number> = { image: 0, audio: 0, video: 0, document: 0 };
const PLAIN: PricedShape = { serviceTier: null, audioInput: false, audioOutput: false, imageOutput: false, features: [] };
const audioPart = { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } };

describe('pricedShapeOf', () => {
  it.each<[string, ProviderFamily, Record<string, unknown>, Partial<PricedShape>]>([
    ['plain chat', 'openai-chat', { messages: [{ role: 'user', content: 'hi' }] }, {}],
    ['default tier is the base rates', 'openai-chat', { service_tier: 'default' }, {}],
    ['null tier is the base rates', 'openai-chat', { service_tier: null }, {}],
    ['priority tier', 'openai-chat', { service_tier: 'priority' }, { serviceTier: 'priority' }],
    ['flex tier (responses)', 'openai-responses', { input: 'hi', service_tier: 'flex' }, { serviceTier: 'flex' }],
    ['auto tier is kept (reserved at the dearest)', 'openai-compatible', { service_tier: 'auto' }, { serviceTier: 'auto' }],
    ['audio output', 'openai-chat', { modalities: ['text', 'audio'], audio: { voice: 'alloy' } }, { audioOutput: true }],
    ['web search is a per-call feature', 'openai-chat', { web_search_options: {} }, { features: ['web_search'] }],
    ['chat audio input', 'openai-chat', { messages: [{ role: 'user', content: [audioPart] }] }, { audioInput: true }],
    ['responses audio input', 'openai-responses', { input: [{ role: 'user', content: [audioPart] }] }, { audioInput: true }],
    [
      'responses image generation is image output, web search a fee',
      'openai-responses',
      { input: 'x', tools: [{ type: 'image_generation' }, { type: 'web_search' }, { type: 'web_search_preview' }] },
      { imageOutput: true, features: ['web_search'] },
    ],
    [
      'gemini audio input (camelCase)',
      'gemini-generate',
      { contents: [{ parts: [{ inlineData: { mimeType: 'audio/wav', data: 'AAAA' } }] }] },
      { audioInput: true },
    ],
    [
      'gemini audio input (snake_case)',
      'gemini-generate',
      { contents: [{ parts: [{ inline_data: { mime_type: 'AUDIO/MP3', data: 'AAAA' } }] }] },
      { audioInput: true },
    ],
    [
      'gemini audio in the system instruction (snake_case)',
      'gemini-generate',
      { contents: [], system_instruction: { parts: [{ inline_data: { mime_type: 'audio/ogg', data: 'AAAA' } }] } },
      { audioInput: true },
    ],
    [
      'gemini image input is not audio',
      'gemini-generate',
      { contents: [{ parts: [{ inlineData: { mimeType: 'image/png', data: 'AAAA' } }] }] },
      {},
    ],
    [
      'gemini image and audio output, grounding and code execution (camelCase)',
      'gemini-generate',
      { generationConfig: { responseModalities: ['IMAGE', 'AUDIO'] }, tools: [{ googleSearch: {} }, { codeExecution: {} }] },
      { imageOutput: true, audioOutput: true, features: ['search_grounding', 'code_execution'] },
    ],
    [
      'gemini speech config and grounding twice (snake_case) list the feature once',
      'gemini-generate',
      { generation_config: { speech_config: {} }, tools: [{ google_search: {} }, { google_search_retrieval: {} }] },
      { audioOutput: true, features: ['search_grounding'] },
    ],
    ['gemini has no service tier field', 'gemini-generate', { service_tier: 'priority', contents: [] }, {}],
  ])('%s', (_name, provider, body, expected) => {
    expect(shapeOf(body, provider)).toEqual({ ...PLAIN, ...expected });
  });

  it.each<[string, unknown, string]>([
    ['an empty name', '', ''],
    ['another spelling', 'PRIORITY', 'PRIORITY'],
    ['a prototype key', '__proto__', '__proto__'],
    ['a number', 2, '2'],
    ['an object', { tier: 'priority' }, '{"tier":"priority"}'],
    ['a list', ['priority'], '["priority"]'],
  ])('hostile service_tier: %s is kept as a name no revision prices', (_name, tier, expected) => {
    const shape = pricedShapeOf({ service_tier: tier }, 'openai-chat', NO_MEDIA);
    expect(shape.serviceTier).toBe(expected);
    const used = pricedFeaturesUsed({ service_tier: tier }, 'openai-chat');
    expect(featureUnpricedBy(used, shape, TIERED)).toEqual({ feature: 'service_tier', param: 'service_tier' });
  });

  it('property: any body gives a shape whose features are per-call ones the body uses', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<ProviderFamily>('openai-chat', 'openai-compatible', 'gemini-generate', 'openai-responses'),
        fc.object(),
        fc.nat(3),
        (provider, body, audio) => {
          const shape = pricedShapeOf(body as Record<string, unknown>, provider, { ...NO_MEDIA, audio });
          const used = pricedFeaturesUsed(body as Record<string, unknown>, provider).map((u) => u.feature);
          expect(shape.audioInput).toBe(audio > 0);
          for (const f of shape.features ?? []) expect(used).toContain(f);
          expect(shape.audioOutput).toBe(used.includes('audio_output'));
          expect(shape.imageOutput).toBe(used.includes('image_output'));
          expect(shape.serviceTier === null).toBe(!used.includes('service_tier'));
        },
      ),
    );
  });
});

/** A revision with a priority tier, audio output and a web search fee. */
const TIERED: PriceRevision = {
  ...TEST_PRICE,
  id: 'tiered',
  audioOutputPerMTokMicrousd: 80_000_000n,
  serviceTiers: {
    priority: {
      rates: {
        inputPerMTokMicrousd: 5_000_000n,
        cachedInputPerMTokMicrousd: 2_500_000n,
        outputPerMTokMicrousd: 20_000_000n,
        reasoningPerMTokMicrousd: 20_000_000n,
        audioOutputPerMTokMicrousd: 160_000_000n,
      },
    },
  },
  perCallFees: [{ feature: 'web_search', feeMicrousd: 25_000n, reservedCallsPerRequest: 4 }],
};

describe('featureUnpricedBy', () => {
  const check = (body: Record<string, unknown>, price: PriceRevision) =>
    featureUnpricedBy(pricedFeaturesUsed(body, 'openai-chat'), pricedShapeOf(body, 'openai-chat', NO_MEDIA), price);

  it.each<[string, Record<string, unknown>, PriceRevision, string | null]>([
    ['plain text on a flat revision', {}, TEST_PRICE, null],
    ['priority on a flat revision', { service_tier: 'priority' }, TEST_PRICE, 'service_tier'],
    ['auto on a flat revision (no tier priced at all)', { service_tier: 'auto' }, TEST_PRICE, 'service_tier'],
    ['priority on a revision with a priority tier', { service_tier: 'priority' }, TIERED, null],
    ['auto on a revision with tiers', { service_tier: 'auto' }, TIERED, null],
    ['flex on a revision with only priority', { service_tier: 'flex' }, TIERED, 'service_tier'],
    ['web search on a flat revision', { web_search_options: {} }, TEST_PRICE, 'web_search_options'],
    ['web search with its fee', { web_search_options: {} }, TIERED, null],
    ['audio output with its rate', { modalities: ['text', 'audio'] }, TIERED, null],
    ['audio output without', { modalities: ['text', 'audio'] }, TEST_PRICE, 'modalities'],
    ['a prediction nobody prices', { prediction: { type: 'content' } }, TIERED, 'prediction'],
  ])('%s', (_name, body, price, param) => {
    expect(check(body, price)?.param ?? null).toBe(param);
  });

  it('a priced tier and tool reserve at their rates: priority and four web searches cost more than the base', () => {
    const body = { service_tier: 'priority', web_search_options: {} };
    const shape = pricedShapeOf(body, 'openai-chat', NO_MEDIA);
    // 1000 in at $5, 100 out at $20, 4 × 25 000 micro-USD of searches
    expect(estimateCostMicrousd(1000, 100, TIERED, shape)).toBe(5_000n + 2_000n + 100_000n);
    expect(estimateCostMicrousd(1000, 100, TIERED, PLAIN)).toBe(2_500n + 1_000n);
  });
});
