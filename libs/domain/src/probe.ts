/**
 * Route verification probes (DESIGN §7 "Route contract"; issue "Probe spend is spend"). A probe
 * is a real, billed call: it is reserved before it is sent and settled after, like any attempt,
 * against the budget of the gateway's own operations workload.
 */
import { estimateRequestInputTokens, InputEstimate } from './input-estimate';
import { PriceRevision } from './pricing';
import { RequestDialect } from './request-shape';
import { computeReservation, OutputCapSemantics } from './reservation';

/** The workload whose budget pays for the gateway's own calls (created by a migration, budget 0). */
export const OPERATIONS_WORKLOAD_ID = 'gateway-operations';
/** How many candidates a probe asks for (a contract that cannot serve them is verified without one). */
export const PROBE_CANDIDATES = 2;
/** The tiny per-candidate output cap a probe sets. */
export const PROBE_OUTPUT_CAP = 16;

export interface ProbeReservation {
  inputTokensEstimate: number;
  reservedOutputTokens: number;
  reservedMicrousd: bigint;
}

/**
 * What a probe of `body` reserves on a route with these cap semantics and this price: the same
 * estimate and worst case as an application request (an undocumented contract reserves per
 * candidate).
 */
export function probeReservation(
  body: Record<string, unknown>,
  dialect: RequestDialect,
  semantics: OutputCapSemantics | null,
  price: PriceRevision,
): ProbeReservation {
  const estimate: InputEstimate = estimateRequestInputTokens(body, dialect);
  if (!estimate.ok) throw new Error(`the probe's own request cannot be estimated: ${estimate.message}`);
  const r = computeReservation({
    inputTokensEstimate: estimate.tokens,
    effectiveCandidates: PROBE_CANDIDATES,
    perCandidateOutputCeiling: PROBE_OUTPUT_CAP,
    semantics: semantics ?? 'per_candidate',
    price,
  });
  return { inputTokensEstimate: estimate.tokens, ...r };
}
