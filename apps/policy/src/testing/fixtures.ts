import type { PriceInput } from '@gateway/db';
import type { Operator } from '@gateway/service-kit';
import type { CreateRouteCommand } from '../usecases/create-route/create-route.command';
import type { PutWorkloadCommand } from '../usecases/put-workload/put-workload.command';
import type { RequestExceptionCommand } from '../usecases/request-exception/request-exception.command';

/** The upstream allowlist the specs run with (the fixtures' upstream and the fake one). */
export const ALLOWLIST: readonly string[] = ['upstream.test', '127.0.0.1'];

export const T0 = new Date('2026-12-01T10:00:00.000Z');
export const DAY_MS = 24 * 60 * 60 * 1000;

export const alice: Operator = { subject: 'alice', roles: ['operator', 'approver'] };
export const bob: Operator = { subject: 'bob', roles: ['approver'] };
export const olga: Operator = { subject: 'olga', roles: ['operator'] };

export function routeCommand(overrides: Partial<CreateRouteCommand> = {}): CreateRouteCommand {
  return {
    id: 'rt-openai',
    alias: 'approved-standard',
    provider_kind: 'openai-chat',
    upstream_base_url: 'http://upstream.test',
    upstream_model: 'gpt-4o-mini',
    candidate_param: 'n',
    max_candidates: 4,
    output_cap_param: 'max_completion_tokens',
    output_cap_semantics: 'per_candidate',
    usage_shape: 'openai.usage',
    streaming_usage: 'final_chunk_with_include_usage',
    gateway_version: '0.1.0',
    client_library_version: 'openai@6.49.0',
    verification_ttl_seconds: 3600,
    ...overrides,
  };
}

export function workloadCommand(overrides: Partial<PutWorkloadCommand> = {}): PutWorkloadCommand {
  return {
    team: 'search',
    environment: 'prod',
    default_max_candidates: 1,
    per_candidate_output_ceiling: 512,
    budget_microusd: 5_000_000n,
    budget_period: 'month',
    allowed_aliases: [],
    fallback_chain: [],
    allow_length: false,
    allow_content_filter: false,
    allow_provider_storage: false,
    deadline_ms: 30_000,
    max_in_flight: 16,
    tokens_per_minute: null,
    max_calls_per_workflow: null,
    workflow_window_seconds: 60,
    workflow_id_field: null,
    ...overrides,
  };
}

export function exceptionCommand(overrides: Partial<RequestExceptionCommand> = {}): RequestExceptionCommand {
  return {
    owner: 'search-team',
    workload_id: 'wl',
    route_id: 'rt-openai',
    max_candidates: 3,
    per_candidate_output_ceiling: 256,
    budget_microusd: 2_000_000n,
    expires_at: new Date(T0.getTime() + 7 * DAY_MS),
    justification: 'A/B test of reranking three drafts',
    allows_streaming: false,
    allows_deterministic_sampling: false,
    outcome: { metric: 'rerank win rate', baseline: 0.5, target: 0.6 },
    // 200 × (500 in at $2.50 + 3 × 256 out at $10 per MTok) = 1.786 USD, within the 2 USD budget
    expected_requests: 200,
    typical_input_tokens: 500,
    ...overrides,
  };
}

/** A price revision as the repository takes it: $2.50 in, $1.25 cached, $10 out per MTok, in force since the day before T0. */
export function priceInput(overrides: Partial<PriceInput> = {}): PriceInput {
  return {
    id: 'p0',
    routeId: 'rt-openai',
    effectiveFrom: new Date(T0.getTime() - DAY_MS),
    inputPerMTokMicrousd: 2_500_000n,
    cachedInputPerMTokMicrousd: 1_250_000n,
    outputPerMTokMicrousd: 10_000_000n,
    reasoningPerMTokMicrousd: 10_000_000n,
    actor: 'seed',
    reason: 'seed',
    ...overrides,
  };
}
