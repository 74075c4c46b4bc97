import { NO_USAGE_DETAILS, ParsedResponse } from './adapter';
import { billedExtras } from './billed-extras';

const answered = (over: Partial<ParsedResponse> = {}): ParsedResponse => ({
  providerRequestId: 'r1',
  candidates: [{ index: 0, finishReason: 'stop', hasContent: true }],
  promptBlockReason: null,
  usage: { ...NO_USAGE_DETAILS, inputTokens: 10, outputTokensTotal: 5, unknownFields: [] },
  serviceTier: null,
  featureCalls: {},
  ...over,
});

describe('billedExtras', () => {
  it.each([
    { name: 'reported beats requested', api: 'openai-chat', request: { service_tier: 'flex' }, reported: 'default', tier: 'default' },
    {
      name: 'requested when not reported',
      api: 'openai-responses',
      request: { service_tier: 'priority' },
      reported: null,
      tier: 'priority',
    },
    {
      name: 'an unresolved auto stays auto (billed at the dearest priced tier)',
      api: 'openai-chat',
      request: { service_tier: 'auto' },
      reported: null,
      tier: 'auto',
    },
    {
      name: 'a Gemini body field is not a tier',
      api: 'gemini-generate',
      request: { service_tier: 'flex' },
      reported: null,
      tier: 'default',
    },
  ] as const)('service tier: $name', ({ api, request, reported, tier }) => {
    expect(billedExtras(request, api, answered({ serviceTier: reported })).serviceTier).toBe(tier);
  });

  it('adds one web search for an answered chat completion with web_search_options, keeping the response-evidenced calls', () => {
    expect(billedExtras({ web_search_options: {} }, 'openai-chat', answered()).featureCalls).toEqual({ web_search: 1 });
    const response = answered({ featureCalls: { search_grounding: 2 } });
    expect(billedExtras({}, 'gemini-generate', response).featureCalls).toEqual({ search_grounding: 2 });
    // the parsed response is not changed
    expect(response.featureCalls).toEqual({ search_grounding: 2 });
  });

  it('an unanswered chat completion made no web search', () => {
    expect(billedExtras({ web_search_options: {} }, 'openai-chat', answered({ candidates: [], usage: null })).featureCalls).toEqual({});
  });
});
