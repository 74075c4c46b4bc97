import { z } from 'zod';
import { providerKind } from '@gateway/contracts';
import { CREDENTIAL_REF_PATTERN } from '@gateway/domain';
import type { RouteContractInput, RouteContractVersionView } from '@gateway/db';
import { int, text } from './input';

/**
 * The documented facts of a route contract (DESIGN §7 "Route contract"). `candidate_param` and
 * `output_cap_semantics` must be stated, even as null: null means "undocumented", and admission
 * then fails closed for more than one candidate.
 */
/** An HTTP header name (RFC 9110 token), at most 64 characters. */
const HTTP_HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/;

export const contractFields = {
  provider_kind: providerKind,
  upstream_base_url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(2000),
  upstream_model: text(200),
  /**
   * the name of the upstream credential dispatch sends (GATEWAY_CREDENTIAL_<NAME> or its secrets
   * file), never the key itself; null: none. Omitted: none on a new route, unchanged on a PUT.
   */
  credential_ref: z
    .string()
    .regex(CREDENTIAL_REF_PATTERN, 'must be 1-64 characters of A-Z, 0-9 and _ (a name, not the key)')
    .nullable()
    .optional(),
  /**
   * the upstream's idempotency header (an HTTP header name, e.g. `Idempotency-Key`): the primary and
   * its retries send the action id in it. null: none. Omitted: none on a new route, unchanged on a PUT.
   */
  upstream_idempotency_header: z
    .string()
    .regex(HTTP_HEADER_NAME, "must be an HTTP header name: 1-64 characters of letters, digits and !#$%&'*+.^_`|~-")
    .nullable()
    .optional(),
  candidate_param: text(64).nullable(),
  max_candidates: int(1, 128),
  output_cap_param: text(64),
  output_cap_semantics: z.enum(['per_candidate', 'shared']).nullable(),
  usage_shape: text(200),
  streaming_usage: text(200),
  gateway_version: text(64),
  client_library_version: text(128),
  verification_ttl_seconds: int(60),
  /** price-changing request fields this route prices (issue 8); omitted: keep what the route has (none on a new route) */
  priced_features: z.array(text(64)).max(64).optional(),
  /** input tokens reserved at least per media item; omitted: keep (defaults on a new route) */
  image_input_tokens: int(1, 1_000_000).optional(),
  audio_input_tokens: int(1, 1_000_000).optional(),
  video_input_tokens: int(1, 1_000_000).optional(),
  document_input_tokens: int(1, 1_000_000).optional(),
};

/** Model aliases travel in `model` and in Gemini URL paths, so no `/` or `:`. */
export const routeAlias = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'must be 1-128 characters of letters, digits, . _ - (starting with a letter or digit)');

export type ContractFields = z.output<z.ZodObject<typeof contractFields>>;

export function toContractInput(routeId: string, alias: string, c: ContractFields, actor: string, reason: string): RouteContractInput {
  return {
    routeId,
    alias,
    providerKind: c.provider_kind,
    upstreamBaseUrl: c.upstream_base_url,
    upstreamModel: c.upstream_model,
    credentialRef: c.credential_ref ?? null,
    upstreamIdempotencyHeader: c.upstream_idempotency_header ?? null,
    candidateParam: c.candidate_param,
    maxCandidates: c.max_candidates,
    outputCapParam: c.output_cap_param,
    outputCapSemantics: c.output_cap_semantics,
    usageShape: c.usage_shape,
    streamingUsage: c.streaming_usage,
    gatewayVersion: c.gateway_version,
    clientLibraryVersion: c.client_library_version,
    verificationTtlSeconds: c.verification_ttl_seconds,
    pricedFeatures: c.priced_features,
    imageInputTokens: c.image_input_tokens,
    audioInputTokens: c.audio_input_tokens,
    videoInputTokens: c.video_input_tokens,
    documentInputTokens: c.document_input_tokens,
    actor,
    reason,
  };
}

/** Whether a proposed contract differs from a stored version in any documented fact. */
export function contractDiffers(v: RouteContractVersionView, c: ContractFields): boolean {
  return (
    v.providerKind !== c.provider_kind ||
    v.upstreamBaseUrl !== c.upstream_base_url ||
    v.upstreamModel !== c.upstream_model ||
    (v.credentialRef ?? null) !== (c.credential_ref ?? null) ||
    (v.upstreamIdempotencyHeader ?? null) !== (c.upstream_idempotency_header ?? null) ||
    v.candidateParam !== c.candidate_param ||
    v.maxCandidates !== c.max_candidates ||
    v.outputCapParam !== c.output_cap_param ||
    v.outputCapSemantics !== c.output_cap_semantics ||
    v.usageShape !== c.usage_shape ||
    v.streamingUsage !== c.streaming_usage ||
    v.gatewayVersion !== c.gateway_version ||
    v.clientLibraryVersion !== c.client_library_version ||
    v.verificationTtlSeconds !== c.verification_ttl_seconds ||
    (c.priced_features !== undefined && !sameSet(v.pricedFeatures ?? [], c.priced_features)) ||
    (c.image_input_tokens !== undefined && v.imageInputTokens !== c.image_input_tokens) ||
    (c.audio_input_tokens !== undefined && v.audioInputTokens !== c.audio_input_tokens) ||
    (c.video_input_tokens !== undefined && v.videoInputTokens !== c.video_input_tokens) ||
    (c.document_input_tokens !== undefined && v.documentInputTokens !== c.document_input_tokens)
  );
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === new Set(b).size && b.every((x) => a.includes(x));
}
