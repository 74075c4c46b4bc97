import fc from 'fast-check';
import { PRICED_FEATURES, pricedFeaturesUsed, ProviderFamily, unpricedFeature } from './priced-features';

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
