/**
 * The admission decision (DESIGN §4, §7): everything that can be decided before money is
 * reserved, in a fixed order, each refusal with its stable code. The database transaction that
 * follows only checks what needs shared state (budget, concurrency).
 */
import { fixedWindow } from './quota-scopes';
import { approvedMaxCandidates, normaliseCandidateCount } from './candidates';
import { DenialCode } from './errors';
import type { ExceptionStatus } from './state-machines';
import { PriceRevision, PricedShape } from './pricing';
import { computeReservation, OutputCapSemantics, outputCeiling, reservationOutOfRange } from './reservation';

export type ContractStatus = 'verified' | 'unverified' | 'stale';

export interface ContractFacts {
  routeId: string;
  candidateParam: string | null;
  maxCandidates: number;
  outputCapSemantics: OutputCapSemantics | null;
  verifiedAt: Date | null;
  verificationTtlSeconds: number;
}

/** A verification older than its TTL no longer vouches for the route. */
export function contractStatus(c: Pick<ContractFacts, 'verifiedAt' | 'verificationTtlSeconds'>, now: Date): ContractStatus {
  if (!c.verifiedAt) return 'unverified';
  return now.getTime() - c.verifiedAt.getTime() > c.verificationTtlSeconds * 1000 ? 'stale' : 'verified';
}

/** Multi-candidate needs a current contract that documents both the parameter and the cap. */
export function contractAllowsMultiCandidate(c: ContractFacts, effective: number, now: Date): boolean {
  return (
    contractStatus(c, now) === 'verified' && c.candidateParam !== null && c.outputCapSemantics !== null && effective <= c.maxCandidates
  );
}

export interface ExceptionGrant {
  id: string;
  routeId: string | null;
  maxCandidates: number;
  perCandidateOutputCeiling: number;
  budgetMicrousd: bigint;
  expiresAt: Date;
  status: ExceptionStatus;
  allowsStreaming?: boolean;
  /** several candidates at temperature 0 / top-k 1 (near-identical, each billed) */
  allowsDeterministicSampling?: boolean;
}

export interface AdmissionInput {
  now: Date;
  workload: { defaultMaxCandidates: number; perCandidateOutputCeiling: number };
  route: ContractFacts;
  fallbackRoutes: ContractFacts[];
  exceptions: ExceptionGrant[];
  requestedCandidates: unknown;
  candidateParamName: string;
  requestedOutputCap: number | null;
  stream: boolean;
  /** the field that switches sampling off (`deterministicSamplingParam`), null or absent when it samples */
  deterministicSampling?: string | null;
  inputTokensEstimate: number;
  price: PriceRevision;
  /** what the request asks for that the price list charges more for (`pricedShapeOf`); absent: plain text */
  pricedShape?: PricedShape;
}

export type AdmissionDecision =
  | {
      ok: true;
      requested: number | null;
      effective: number;
      approvedMax: number;
      exception: ExceptionGrant | null;
      outputCeiling: number;
      semantics: OutputCapSemantics;
      reservedOutputTokens: number;
      reservedMicrousd: bigint;
      /** fallback is disabled when a fallback route cannot honour a multi-candidate request */
      fallbackRouteIds: string[];
    }
  | {
      ok: false;
      code: DenialCode;
      message: string;
      param: string | null;
      /** the maximum the count was judged against (every refusal of `decideAdmission` knows it) */
      approvedMax?: number;
    };

/** The exceptions that apply to this request, the widest of them, and the maximum they approve. */
function grants(input: AdmissionInput) {
  const { now, route } = input;
  const applicable = input.exceptions.filter(
    (e) => e.status === 'active' && e.expiresAt.getTime() > now.getTime() && (e.routeId === null || e.routeId === route.routeId),
  );
  // The widest applicable grant decides; ties prefer a route-specific one.
  const best =
    [...applicable].sort((a, b) => b.maxCandidates - a.maxCandidates || Number(b.routeId !== null) - Number(a.routeId !== null))[0] ?? null;
  const approved = approvedMaxCandidates({
    workloadDefaultMax: input.workload.defaultMaxCandidates,
    exception: best,
    routeId: route.routeId,
    now,
  });
  return { applicable, best, approved };
}

/** Every decision, allow or deny, says which maximum it applied (the decision event records it). */
export function decideAdmission(input: AdmissionInput): AdmissionDecision {
  const decision = decide(input);
  return decision.ok ? decision : { ...decision, approvedMax: grants(input).approved.max };
}

function decide(input: AdmissionInput): AdmissionDecision {
  const { now, route } = input;
  const { applicable, best, approved } = grants(input);
  const count = normaliseCandidateCount({
    requested: input.requestedCandidates,
    approvedMax: approved.max,
    param: input.candidateParamName,
  });
  if (!count.ok) return { ok: false, code: count.code, message: count.message, param: count.param };
  const exception = approved.source === 'exception' && count.effective > input.workload.defaultMaxCandidates ? best : null;

  // Every request, one candidate included, needs a verified contract that has not gone stale:
  // an unverified route (a new upstream, a new model) takes no traffic until a probe vouches for it.
  const status = contractStatus(route, now);
  if (status !== 'verified') {
    return {
      ok: false,
      code: 'route_contract_unverified',
      message: `route ${route.routeId} has no verified contract in force (contract ${status}); ask an operator to verify the route`,
      param: null,
    };
  }
  if (count.effective > 1) {
    if (!contractAllowsMultiCandidate(route, count.effective, now)) {
      return {
        ok: false,
        code: 'route_contract_unverified',
        message:
          `route ${route.routeId} has no current verified contract for ${count.effective} candidates ` +
          `(contract ${status}${route.candidateParam === null ? ', candidate parameter undocumented' : ''}` +
          `${route.outputCapSemantics === null ? ', output-cap semantics undocumented' : ''}); ` +
          `send one candidate or ask an operator to verify the route`,
        param: input.candidateParamName,
      };
    }
    if (input.stream && !(exception?.allowsStreaming ?? false)) {
      return {
        ok: false,
        code: 'candidate_count_exceeds_policy',
        message: 'streaming with more than one candidate needs an exception that allows it; send one candidate or stream: false',
        param: input.candidateParamName,
      };
    }
    // Without sampling the candidates are copies of one answer, each billed: only an exception
    // that covers this count and says so lets that through.
    const sampling = input.deterministicSampling ?? null;
    if (sampling !== null && !applicable.some((e) => e.allowsDeterministicSampling === true && e.maxCandidates >= count.effective)) {
      return {
        ok: false,
        code: 'candidate_count_without_sampling',
        message:
          `${count.effective} candidates with ${sampling} (sampling off) are near-identical and each is billed; ` +
          `sample (temperature > 0, top-k > 1), send one candidate, or ask for an exception with allows_deterministic_sampling`,
        param: sampling,
      };
    }
  }

  const policyCeiling = exception ? exception.perCandidateOutputCeiling : input.workload.perCandidateOutputCeiling;
  if (input.requestedOutputCap !== null && (!Number.isInteger(input.requestedOutputCap) || input.requestedOutputCap < 1)) {
    return { ok: false, code: 'invalid_request', message: 'the output token cap must be an integer ≥ 1', param: 'max_tokens' };
  }
  const ceiling = outputCeiling({ requested: input.requestedOutputCap, policyCeiling });
  // One candidate is the same under either semantics; an undocumented contract reserves per candidate.
  const semantics: OutputCapSemantics = route.outputCapSemantics ?? 'per_candidate';
  const reservation = computeReservation({
    inputTokensEstimate: input.inputTokensEstimate,
    effectiveCandidates: count.effective,
    perCandidateOutputCeiling: ceiling,
    semantics,
    price: input.price,
    shape: input.pricedShape,
  });
  // A policy stored before the policy service checked its products: refuse, never fail the INSERT.
  const outOfRange = reservationOutOfRange({ inputTokensEstimate: input.inputTokensEstimate, ...reservation });
  if (outOfRange !== null) {
    return {
      ok: false,
      code: 'invalid_request',
      message: `${outOfRange}; lower the output token cap or the candidate count, or ask an operator to lower the policy's per_candidate_output_ceiling`,
      param: 'max_tokens',
    };
  }
  // A fallback route without a verified, fresh contract is never called.
  const fallbackRouteIds =
    count.effective > 1 && !input.fallbackRoutes.every((f) => contractAllowsMultiCandidate(f, count.effective, now))
      ? []
      : input.fallbackRoutes.filter((f) => contractStatus(f, now) === 'verified').map((f) => f.routeId);
  return {
    ok: true,
    requested: count.requested,
    effective: count.effective,
    approvedMax: approved.max,
    exception,
    outputCeiling: ceiling,
    semantics,
    reservedOutputTokens: reservation.reservedOutputTokens,
    reservedMicrousd: reservation.reservedMicrousd,
    fallbackRouteIds,
  };
}

/** Budget periods start at UTC midnight (day) or the first of the month (month). */
export function budgetPeriodStart(period: 'day' | 'month', now: Date): Date {
  switch (period) {
    case 'day':
      return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
    case 'month':
      return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  }
}

/** Token-rate windows are whole UTC minutes; a refusal says when the next one starts. */
export function tokenWindow(now: Date): { windowStart: Date; retryAfterSeconds: number } {
  return fixedWindow(now, 60);
}
