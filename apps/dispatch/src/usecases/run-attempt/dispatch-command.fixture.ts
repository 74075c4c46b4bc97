import type { DispatchCommandV1, ProviderKind } from '@gateway/contracts';

/** Test fixture: a valid dispatch command for one route of `providerKind`, deadline 30 s after 12:00:00. */
export function dispatchCommand(over: Partial<DispatchCommandV1> = {}, providerKind: ProviderKind = 'gemini-generate'): DispatchCommandV1 {
  return {
    action_id: 'act-1',
    request_id: 'req-1',
    workload_id: 'wl-1',
    environment: 'prod',
    api_kind: providerKind === 'gemini-generate' ? 'gemini-generate' : 'openai-chat',
    stream: false,
    route: {
      route_id: 'route-1',
      route_version: 4,
      model_alias: 'approved-standard',
      provider_kind: providerKind,
      base_url: 'http://upstream.example',
      upstream_model: 'model-x',
      candidate_param: providerKind === 'gemini-generate' ? 'candidateCount' : 'n',
      output_cap_param: providerKind === 'gemini-generate' ? 'maxOutputTokens' : 'max_tokens',
      output_cap_semantics: 'per_candidate',
      price_revision_id: 'price-1',
    },
    requested_candidates: 3,
    effective_candidates: 3,
    output_ceiling: 200,
    include_usage_for_client: false,
    deadline: '2026-03-01T12:00:30.000Z',
    dispatch_deadline: '2026-03-01T12:00:10.000Z',
    acceptance: { allow_length: false, allow_content_filter: false },
    request: {},
    ...over,
  };
}
