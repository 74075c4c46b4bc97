import { spendFieldsOf } from './spend-fields';

describe('spendFieldsOf', () => {
  it('records every spelling of the count and the cap by path, and no text', () => {
    const f = spendFieldsOf({
      contents: [{ parts: [{ text: 'the secret prompt' }] }],
      generationConfig: { candidateCount: 2, maxOutputTokens: 50 },
      generation_config: { candidate_count: 8, max_output_tokens: 'lots' },
      tools: [{ googleSearch: {} }, { functionDeclarations: [] }],
    });
    expect(f).toEqual({
      candidateFields: { 'generationConfig.candidateCount': 2, 'generation_config.candidate_count': 8 },
      capFields: { 'generationConfig.maxOutputTokens': 50, 'generation_config.max_output_tokens': '<string>' },
      pricedFields: ['tools[0].googleSearch'],
      store: null,
    });
    expect(JSON.stringify(f)).not.toContain('secret');
  });

  it('records OpenAI top-level fields and store', () => {
    expect(spendFieldsOf({ messages: [], n: 1, max_completion_tokens: 9, service_tier: 'flex', store: false })).toEqual({
      candidateFields: { n: 1 },
      capFields: { max_completion_tokens: 9 },
      pricedFields: ['service_tier'],
      store: false,
    });
  });

  it('records the Responses cap and hosted tools by type', () => {
    expect(
      spendFieldsOf({
        input: 'q',
        max_output_tokens: 64,
        store: false,
        tools: [{ type: 'function', name: 'f' }, { type: 'web_search_preview' }, { type: 'file_search' }],
      }),
    ).toEqual({
      candidateFields: {},
      capFields: { max_output_tokens: 64 },
      pricedFields: ['tools[1].type', 'tools[2].type'],
      store: false,
    });
  });
});
