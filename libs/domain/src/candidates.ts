/**
 * Candidate count (`n` for OpenAI, `candidateCount` for Gemini) is a cost multiplier:
 * every extra candidate is billed output. So the gateway validates the raw field strictly
 * and refuses — rather than silently clamps — counts above what the workload is approved for.
 */
import type { ExceptionStatus } from './state-machines';
import { assertPositiveInteger } from './validation';

export type CandidateCountResult =
  | { ok: true; requested: number | null; effective: number }
  | { ok: false; code: 'invalid_request' | 'candidate_count_exceeds_policy'; message: string; param: string };

export function normaliseCandidateCount(input: {
  /** The raw field value as sent; `undefined` when omitted. */
  requested: unknown;
  approvedMax: number;
  /** Request field name to report back; defaults to OpenAI's `n`. */
  param?: string;
}): CandidateCountResult {
  const { requested, approvedMax } = input;
  const param = input.param ?? 'n';
  assertPositiveInteger(approvedMax, 'approvedMax');

  if (requested === undefined || requested === null) return { ok: true, requested: null, effective: 1 };

  // typeof first: Number.isInteger alone would already reject "2" and true, but being
  // explicit documents that no coercion of any kind is intended.
  if (typeof requested !== 'number' || !Number.isInteger(requested) || requested < 1) {
    return {
      ok: false,
      code: 'invalid_request',
      message: `${param} must be an integer greater than or equal to 1`,
      param,
    };
  }

  if (requested > approvedMax) {
    return {
      ok: false,
      code: 'candidate_count_exceeds_policy',
      message:
        `${param}=${requested} exceeds the approved maximum of ${approvedMax} candidate(s) for this workload; ` +
        `request at most ${approvedMax} candidate(s) or obtain an approved exception`,
      param,
    };
  }

  return { ok: true, requested, effective: requested };
}

export type CandidateException = {
  maxCandidates: number;
  /** 'approved' is accepted as a synonym of 'active' for stores that use that wording. */
  status: ExceptionStatus | 'approved';
  expiresAt: Date;
  /** null = applies to every route of the workload. */
  routeId: string | null;
};

export function approvedMaxCandidates(input: {
  workloadDefaultMax: number;
  exception?: CandidateException | null;
  routeId: string;
  now: Date;
}): { max: number; source: 'workload' | 'exception' } {
  const { workloadDefaultMax, exception, routeId, now } = input;
  assertPositiveInteger(workloadDefaultMax, 'workloadDefaultMax');

  const applies =
    exception != null &&
    (exception.status === 'active' || exception.status === 'approved') &&
    now.getTime() < exception.expiresAt.getTime() &&
    (exception.routeId === null || exception.routeId === routeId);

  // An exception is a grant, never a restriction: a smaller exception max must not
  // quietly tighten the workload's own limit.
  if (applies && Number.isInteger(exception.maxCandidates) && exception.maxCandidates > workloadDefaultMax) {
    return { max: exception.maxCandidates, source: 'exception' };
  }
  return { max: workloadDefaultMax, source: 'workload' };
}
