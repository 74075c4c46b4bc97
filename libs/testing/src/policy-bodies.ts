import { z } from 'zod';
import {
  decimalMicrousd,
  experimentDesignFromWire,
  experimentDesignWireFields,
  hedgePolicyFromWire,
  hedgePolicyWireFields,
  HedgeSettingsDomain,
} from '@gateway/contracts';
import type { ExperimentDesign } from '@gateway/domain';

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

/** Per-MTok rates in the policy API's shape, with cache-write and audio-output rates. */
function ratesBody(input: bigint, output: bigint) {
  return {
    input_per_mtok_microusd: String(input),
    cached_input_per_mtok_microusd: String(input / 10n),
    output_per_mtok_microusd: String(output),
    reasoning_per_mtok_microusd: String(output),
    cache_write_per_mtok_microusd: String((input * 5n) / 4n),
    audio_output_per_mtok_microusd: String(output * 8n),
  };
}

/**
 * A structured price revision as an operator posts it: a context tier above 200,000 input tokens
 * (whole request), priority and flex service tiers, and a web_search fee.
 */
export function structuredPriceBody(id: string) {
  return {
    id,
    ...ratesBody(1_250_000n, 10_000_000n),
    context_tier_rule: 'whole_request',
    context_tiers: [{ above_input_tokens: 200_000, rates: ratesBody(2_500_000n, 15_000_000n) }],
    service_tiers: {
      priority: { rates: ratesBody(2_500_000n, 20_000_000n) },
      flex: {
        rates: ratesBody(625_000n, 5_000_000n),
        context_tiers: [{ above_input_tokens: 200_000, rates: ratesBody(1_250_000n, 7_500_000n) }],
      },
    },
    per_call_fees: [{ feature: 'web_search', fee_microusd: '10000', reserved_calls_per_request: 5 }],
    reason: 'structured price',
  };
}

/** A sound `PUT /workloads/{id}/hedging` body (snake_case, money as strings), with overrides. */
export function hedgePolicyBody(overrides: Record<string, unknown> = {}) {
  return {
    owner: 'search-team',
    enabled: true,
    delay: { kind: 'quantile', quantile_per_mille: 950, floor_ms: 200, ceiling_ms: 2000, min_samples: 20 },
    max_hedges: 1,
    retry: { transient: ['connection_error', 'rate_limited'], max_retries: 1 },
    allowance: { max_attempts: 3, max_extra_spend_microusd: '10000' },
    stop: { spend_floor_microusd: '1000', max_route_error_per_mille: 100, max_route_in_flight: 50, min_useful_remaining_ms: 500 },
    bucket: { max_milli_tokens: 10000, success_refill_milli_tokens: 100 },
    approved_premium_microusd: '2000',
    experiment_allowance: { budget_microusd: '5000000', period: 'month' },
    read_only_tools: ['lookup'],
    ...overrides,
  };
}

/** A valid POST /workloads/{id}/experiments body (issue 11) for `revisionId`; `overrides` replace top-level fields. */
export function experimentBody(revisionId: string, overrides: Record<string, unknown> = {}) {
  return {
    owner: 'search-team',
    hedge_policy_revision_id: revisionId,
    holdout_share_bps: 1000,
    useful_deadline_ms: 2000,
    acceptance: { non_empty_content: true, allowed_finish_reasons: ['stop', 'STOP'], refusals_invalid: true },
    sample_plan: { metric: 'incremental_cost_per_on_time_answer', min_actions_per_cohort: 300, max_unresolved_share_bps: 0 },
    overhead_microusd_per_attempt: '20',
    pause: { holdout_p95_above_ms: 3000, route_error_per_mille_above: 200, window_actions: 200 },
    seed: 11,
    reason: 'does the hedge buy on-time answers?',
    ...overrides,
  };
}

/** An experiment design as the policy service stores it from `experimentBody(revisionId, overrides)` (tests that write it directly). */
export function experimentDesign(revisionId: string, overrides: Record<string, unknown> = {}): ExperimentDesign {
  const { reason: _reason, ...body } = experimentBody(revisionId, overrides);
  return experimentDesignFromWire(z.object(experimentDesignWireFields(decimalMicrousd, z.string())).parse(body));
}

/**
 * Hedge policy settings as the policy service stores them from `hedgePolicyBody(overrides)`, with
 * dispatch tests' permissive defaults: a 200 ms fixed delay, every transient class and one retry,
 * three attempts, no spend floor, no route-health stop, no experiment allowance, no tools.
 */
export function hedgeSettings(overrides: Record<string, unknown> = {}): HedgeSettingsDomain {
  return hedgePolicyFromWire(
    z.object(hedgePolicyWireFields(decimalMicrousd)).parse(
      hedgePolicyBody({
        delay: { kind: 'fixed', ms: 200 },
        retry: { transient: ['connection_error', 'timeout_before_first_byte', 'rate_limited', 'server_error'], max_retries: 1 },
        allowance: { max_attempts: 3, max_extra_spend_microusd: '10000000' },
        stop: { spend_floor_microusd: '0', max_route_error_per_mille: 1000, max_route_in_flight: 1000, min_useful_remaining_ms: 500 },
        experiment_allowance: null,
        read_only_tools: [],
        ...overrides,
      }),
    ),
  );
}
