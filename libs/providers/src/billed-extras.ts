import type { ApiKind } from '@gateway/contracts';
import { FeatureCalls, ParsedResponse, tierName } from './adapter';

/** What an attempt is billed beyond its token counts: the service tier and the per-call features. */
export interface BilledExtras {
  serviceTier: string;
  featureCalls: FeatureCalls;
}

/**
 * Completes what the response evidences with what only the request says (docs/decisions.md,
 * "Billable usage detail"):
 * - the tier is the provider's report, else the `service_tier` an OpenAI-family request asked
 *   for, else `default`. A requested `auto` the provider did not resolve stays `auto`, which
 *   settlement bills at the dearest tier the price revision prices (the reservation held that
 *   much): a project may be configured for priority, and an unreported tier is not evidence of
 *   the cheap one.
 * - a chat completion with `web_search_options` (the search models) is one web search per
 *   answered response, whatever the answer cites; an error answer made no call.
 */
export function billedExtras(request: Record<string, unknown>, apiKind: ApiKind, parsed: ParsedResponse): BilledExtras {
  const featureCalls: FeatureCalls = { ...parsed.featureCalls };
  const answered = parsed.usage !== null || parsed.candidates.length > 0;
  if (apiKind === 'openai-chat' && answered && request.web_search_options != null) {
    featureCalls.web_search = Math.max(featureCalls.web_search ?? 0, 1);
  }
  return { serviceTier: parsed.serviceTier ?? requestedTier(request, apiKind) ?? 'default', featureCalls };
}

function requestedTier(request: Record<string, unknown>, apiKind: ApiKind): string | null {
  if (apiKind === 'gemini-generate') return null;
  return request.service_tier === 'auto' ? 'auto' : tierName(request.service_tier);
}
