/**
 * Request bodies for the policy API as an operator sends them (snake_case, money as strings), shared
 * by the policy integration tests and the e2e suite.
 */
export function openAiContractBody(upstreamBaseUrl: string, overrides: Record<string, unknown> = {}) {
  return {
    provider_kind: 'openai-chat',
    upstream_base_url: upstreamBaseUrl,
    upstream_model: 'gpt-test',
    candidate_param: 'n',
    max_candidates: 4,
    output_cap_param: 'max_completion_tokens',
    output_cap_semantics: 'per_candidate',
    usage_shape: 'openai.usage',
    streaming_usage: 'final_chunk_with_include_usage',
    gateway_version: '0.1.0',
    client_library_version: 'openai@6.49.0',
    verification_ttl_seconds: 86400,
    ...overrides,
  };
}
