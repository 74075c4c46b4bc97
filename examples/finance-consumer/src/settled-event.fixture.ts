import { Topics, UsageSettledV1 } from '@gateway/contracts';

/** A settled event as the gateway publishes it, for this app's specs. */
export const settledEvent = (over: Partial<UsageSettledV1> = {}): UsageSettledV1 =>
  Topics.usageSettled.schema.parse({
    event_id: '6f1c1a4e-2d7b-4c55-9a51-1f0d3c2b9e10',
    timestamp: '2026-12-01T23:59:59.900Z',
    request_id: 'req-1',
    action_id: 'act-1',
    attempt_id: 'att-1',
    attempt_role: 'primary',
    workload_id: 'wl-a',
    environment: 'prod',
    route_id: 'r',
    route_version: 1,
    model_alias: 'approved-standard',
    provider_request_id: 'p-1',
    requested_candidate_count: null,
    effective_candidate_count: 1,
    returned_candidate_count: 1,
    input_tokens: 10,
    output_tokens_total: 20,
    total_tokens: 30,
    stream_mode: 'none',
    usage_source: 'provider_response',
    quota_scope: 'workload',
    policy_result: null,
    policy_reason: null,
    price_revision: 'price-r-v1',
    cost_microusd: '9007199254740993',
    cost_microusd_by_category: { input: '1', cached_input: '0', output: '9007199254740992', reasoning: '0' },
    settled_at: '2026-12-01T23:59:59.999Z',
    ...over,
  });
