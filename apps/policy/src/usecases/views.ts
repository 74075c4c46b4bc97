import type {
  ApiKeyView,
  ExceptionEventView,
  ExceptionView,
  PriceRevisionView,
  ScopeLimitView,
  RouteContractVersionView,
  RouteView,
  WorkloadView,
} from '@gateway/db';
import { hedgePolicyToWire, priceRevisionToWire } from '@gateway/contracts';
import type { HedgePolicyRevision } from '@gateway/domain';
import { contractStatus, effectiveExceptionStatus, ExceptionProjection, outcomeDirection, priceInForceAt } from '@gateway/domain';

/**
 * JSON shapes of the policy API: snake_case, money as integer micro-USD strings, instants as ISO
 * strings, statuses as of `now` (a verification past its TTL reads `stale`, an exception past
 * its expiry reads `expired`, whatever the stored row says).
 */

export function contractVersionJson(v: RouteContractVersionView, currentVersion: number, now: Date) {
  return {
    version: v.version,
    current: v.version === currentVersion,
    provider_kind: v.providerKind,
    upstream_base_url: v.upstreamBaseUrl,
    upstream_model: v.upstreamModel,
    credential_ref: v.credentialRef ?? null,
    upstream_idempotency_header: v.upstreamIdempotencyHeader ?? null,
    candidate_param: v.candidateParam,
    max_candidates: v.maxCandidates,
    output_cap_param: v.outputCapParam,
    output_cap_semantics: v.outputCapSemantics,
    usage_shape: v.usageShape,
    streaming_usage: v.streamingUsage,
    gateway_version: v.gatewayVersion,
    client_library_version: v.clientLibraryVersion,
    verification_ttl_seconds: v.verificationTtlSeconds,
    priced_features: v.pricedFeatures ?? [],
    media_input_tokens: {
      image: v.imageInputTokens ?? null,
      audio: v.audioInputTokens ?? null,
      video: v.videoInputTokens ?? null,
      document: v.documentInputTokens ?? null,
    },
    verification_state: contractStatus(v, now),
    verified_at: iso(v.verifiedAt),
    verified_by: v.verifiedBy,
    verification_expires_at: v.verifiedAt ? new Date(v.verifiedAt.getTime() + v.verificationTtlSeconds * 1000).toISOString() : null,
    verification_notes: v.verificationNotes ?? null,
    created_at: v.createdAt.toISOString(),
    created_by: v.createdBy,
    change_reason: v.changeReason,
  };
}

/** A revision as the body that created it (optional rates and structure only when present), plus who and when. */
export function priceJson(p: PriceRevisionView) {
  return {
    id: p.id,
    route_id: p.routeId,
    effective_from: p.effectiveFrom.toISOString(),
    ...priceRevisionToWire(p),
    created_at: p.createdAt.toISOString(),
    created_by: p.createdBy,
    reason: p.reason,
  };
}

export function currentVersionOf(r: RouteView): RouteContractVersionView {
  const v = r.versions.find((x) => x.version === r.currentVersion);
  if (!v) throw new Error(`route ${r.id} has no row for its current version ${r.currentVersion}`);
  return v;
}

/** The price in force at `now`: latest effective_from ≤ now (what admission would use). */
export function priceInForce(r: RouteView, now: Date): PriceRevisionView | null {
  return priceInForceAt(r.prices, now);
}

export function routeSummaryJson(r: RouteView, now: Date) {
  const current = currentVersionOf(r);
  return {
    id: r.id,
    alias: r.alias,
    current_version: r.currentVersion,
    verification_state: contractStatus(current, now),
    created_at: r.createdAt.toISOString(),
    contract: contractVersionJson(current, r.currentVersion, now),
    price_in_force: mapOrNull(priceInForce(r, now), priceJson),
  };
}

export function routeJson(r: RouteView, now: Date) {
  return {
    ...routeSummaryJson(r, now),
    versions: r.versions.map((v) => contractVersionJson(v, r.currentVersion, now)),
    prices: r.prices.map(priceJson),
  };
}

export function apiKeyJson(k: ApiKeyView) {
  return {
    id: k.id,
    workload_id: k.workloadId,
    key_prefix: k.keyPrefix,
    status: k.revokedAt ? 'revoked' : 'active',
    created_at: k.createdAt.toISOString(),
    created_by: k.createdBy,
    revoked_at: iso(k.revokedAt),
    revoked_by: k.revokedBy,
    revoked_reason: k.revokedReason,
  };
}

export function workloadJson(w: WorkloadView) {
  return {
    id: w.id,
    team: w.team,
    environment: w.environment,
    default_max_candidates: w.defaultMaxCandidates,
    per_candidate_output_ceiling: w.perCandidateOutputCeiling,
    budget_microusd: w.budgetMicrousd.toString(),
    budget_period: w.budgetPeriod,
    allowed_aliases: w.allowedAliases,
    fallback_chain: w.fallbackChain,
    allow_length: w.allowLength,
    allow_content_filter: w.allowContentFilter,
    allow_provider_storage: w.allowProviderStorage ?? false,
    deadline_ms: w.deadlineMs,
    max_in_flight: w.maxInFlight,
    tokens_per_minute: w.tokensPerMinute,
    max_calls_per_workflow: w.maxCallsPerWorkflow ?? null,
    workflow_window_seconds: w.workflowWindowSeconds ?? 60,
    workflow_id_field: w.workflowIdField ?? null,
    created_at: w.createdAt.toISOString(),
    updated_at: w.updatedAt.toISOString(),
    updated_by: w.updatedBy,
    change_reason: w.changeReason,
    keys: w.keys.map(apiKeyJson),
  };
}

export function exceptionJson(e: ExceptionView, now: Date, events?: ExceptionEventView[]) {
  return {
    id: e.id,
    workload_id: e.workloadId,
    route_id: e.routeId,
    owner: e.owner,
    max_candidates: e.maxCandidates,
    per_candidate_output_ceiling: e.perCandidateOutputCeiling,
    budget_microusd: e.budgetMicrousd.toString(),
    allows_streaming: e.allowsStreaming,
    allows_deterministic_sampling: e.allowsDeterministicSampling,
    expires_at: e.expiresAt.toISOString(),
    justification: e.justification,
    status: effectiveExceptionStatus(e, now),
    stored_status: e.status,
    requested_by: e.requestedBy,
    requested_at: e.requestedAt.toISOString(),
    updated_at: e.updatedAt.toISOString(),
    outcome: e.outcome ? { ...e.outcome, direction: outcomeDirection(e.outcome) } : null,
    expected_requests: e.expectedRequests,
    typical_input_tokens: e.typicalInputTokens,
    projection: {
      budget_microusd: e.budgetMicrousd.toString(),
      at_request: mapOrNull(e.requestProjection, (p) => projectionJson(p, e.budgetMicrousd)),
      at_approval: mapOrNull(e.approvalProjection, (p) => projectionJson(p, e.budgetMicrousd)),
      override_reason: e.overrideReason,
    },
    ...(events
      ? {
          events: events.map((x) => ({
            event: x.event,
            from_status: x.fromStatus,
            to_status: x.toStatus,
            actor: x.actor,
            reason: x.reason,
            at: x.at.toISOString(),
            override_reason: x.overrideReason,
          })),
        }
      : {}),
  };
}

/** A projected cost beside the budget it is compared with (exceeding it needs an override to approve). */
function projectionJson(p: ExceptionProjection, budgetMicrousd: bigint) {
  return {
    cost_microusd: p.costMicrousd.toString(),
    exceeds_budget: p.costMicrousd > budgetMicrousd,
    route_id: p.routeId,
    price_revision_id: p.priceRevisionId,
    at: p.at.toISOString(),
  };
}

function iso(d: Date | null): string | null {
  return d ? d.toISOString() : null;
}

function mapOrNull<T, R>(v: T | null, f: (v: T) => R): R | null {
  return v === null ? null : f(v);
}

export function scopeLimitJson(l: ScopeLimitView) {
  return {
    scope: l.scope,
    scope_id: l.scopeId,
    tokens_per_minute: l.tokensPerMinute,
    token_rate_enforcement: l.tokenRateEnforcement,
    budget_microusd: l.budgetMicrousd?.toString() ?? null,
    budget_period: l.budgetPeriod,
    created_at: l.createdAt.toISOString(),
    updated_at: l.updatedAt.toISOString(),
    updated_by: l.updatedBy,
    change_reason: l.changeReason,
  };
}

/** A hedge policy revision as the policy API shows it (money as strings). */
export function hedgePolicyJson(r: HedgePolicyRevision) {
  return {
    id: r.revisionId,
    workload_id: r.workloadId,
    route_id: r.routeId,
    revision: r.revision,
    ...hedgePolicyToWire(r),
    created_at: r.createdAt.toISOString(),
    created_by: r.createdBy,
    reason: r.reason,
  };
}
