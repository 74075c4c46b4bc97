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
    ...overrides,
  };
}
