import type { RouteContractInput } from '@gateway/db';
import type { Prices } from './seed';

/**
 * Routes to the real providers that `npm start` adds when OPENAI_API_KEY and/or GEMINI_API_KEY is
 * set: one small current chat model per provider, at its published list price, with the key
 * referenced by name (`credential_ref` OPENAI / GEMINI: dispatch reads GATEWAY_CREDENTIAL_OPENAI /
 * GATEWAY_CREDENTIAL_GEMINI, which `npm start` sets from those variables). They are seeded
 * **unverified**: nothing is sent to a provider until an operator verifies the contract (with the
 * probe, or by hand).
 *
 * Prices are micro-USD per million tokens, as the providers' pricing pages list them for standard
 * (non-batch, short-context) use when this was written: gpt-4.1-mini $0.40 input, $0.10 cached
 * input, $1.60 output; gemini-2.5-flash $0.30 input (text/image/video), $0.03 cached input, $2.50
 * output with thinking billed as output. Check them before relying on the numbers; a change is a
 * new price revision through the policy API (lowering one is four-eyes).
 */
export interface RealRoute {
  provider: 'openai' | 'gemini';
  /** the variable whose presence adds the route (its value is never read here) */
  keyVariable: 'OPENAI_API_KEY' | 'GEMINI_API_KEY';
  /** upstream host, for GATEWAY_UPSTREAM_ALLOWLIST */
  host: string;
  contract: Omit<RouteContractInput, 'actor' | 'reason'>;
  price: Prices;
}

const THIRTY_DAYS_S = 30 * 24 * 3600;

export const REAL_ROUTES: readonly RealRoute[] = [
  {
    provider: 'openai',
    keyVariable: 'OPENAI_API_KEY',
    host: 'api.openai.com',
    contract: {
      routeId: 'gpt-4.1-mini',
      alias: 'gpt-4.1-mini',
      providerKind: 'openai-chat',
      // The adapter appends /v1/chat/completions.
      upstreamBaseUrl: 'https://api.openai.com',
      upstreamModel: 'gpt-4.1-mini',
      credentialRef: 'OPENAI',
      candidateParam: 'n',
      maxCandidates: 8,
      outputCapParam: 'max_completion_tokens',
      outputCapSemantics: 'per_candidate',
      usageShape: 'openai.usage',
      streamingUsage: 'final_chunk_with_include_usage',
      gatewayVersion: '0.1.0',
      clientLibraryVersion: 'openai@6',
      verificationTtlSeconds: THIRTY_DAYS_S,
    },
    price: {
      inputPerMTokMicrousd: 400_000n,
      cachedInputPerMTokMicrousd: 100_000n,
      outputPerMTokMicrousd: 1_600_000n,
      // not a reasoning model: anything reported as reasoning is billed at the output rate
      reasoningPerMTokMicrousd: 1_600_000n,
    },
  },
  {
    provider: 'gemini',
    keyVariable: 'GEMINI_API_KEY',
    host: 'generativelanguage.googleapis.com',
    contract: {
      routeId: 'gemini-2.5-flash',
      alias: 'gemini-2.5-flash',
      providerKind: 'gemini-generate',
      // The adapter appends /v1beta/models/{model}:generateContent.
      upstreamBaseUrl: 'https://generativelanguage.googleapis.com',
      upstreamModel: 'gemini-2.5-flash',
      credentialRef: 'GEMINI',
      candidateParam: 'candidateCount',
      maxCandidates: 8,
      outputCapParam: 'maxOutputTokens',
      outputCapSemantics: 'per_candidate',
      usageShape: 'gemini.usageMetadata',
      streamingUsage: 'final_chunk_usageMetadata',
      gatewayVersion: '0.1.0',
      clientLibraryVersion: '@google/genai@2',
      verificationTtlSeconds: THIRTY_DAYS_S,
    },
    price: {
      inputPerMTokMicrousd: 300_000n,
      cachedInputPerMTokMicrousd: 30_000n,
      outputPerMTokMicrousd: 2_500_000n,
      reasoningPerMTokMicrousd: 2_500_000n,
    },
  },
];

/** The real routes to seed: those whose provider key variable is set (non-empty). */
export function realRoutesFor(env: Record<string, string | undefined>): RealRoute[] {
  return REAL_ROUTES.filter((r) => (env[r.keyVariable] ?? '').trim() !== '');
}

/**
 * How `npm start` wires the services for the seeded real routes, by name only (it never sees a
 * key here): each route's credential variable and the provider variable to fill it from, and the
 * hosts the upstream allowlist must hold. Printed by the seed CLI for scripts/stack.mjs.
 */
export function realRouteWiring(routes: readonly RealRoute[]): { credentials: Record<string, string>; hosts: string[] } {
  return {
    credentials: Object.fromEntries(routes.map((r) => [`GATEWAY_CREDENTIAL_${r.contract.credentialRef}`, r.keyVariable])),
    hosts: [...new Set(routes.map((r) => r.host))],
  };
}
