import { z } from 'zod';
import { CONTROL_ALERT_KINDS, COUNT_CATEGORIES, ControlAlertKind, ControlThresholds, parseUtcDay } from '@gateway/domain';

/**
 * `gateway.controls.alerts.v1` (DESIGN §5): one daily-control alert per workload × route × UTC
 * day × kind. Sanitised: ids, counts, shares, codes; never text from a request.
 */
const share = z.number().min(0).max(1);
const count = z.number().int().nonnegative();
const code = z.string().regex(/^[a-z0-9_]{1,64}$/);
const microusd = z.string().regex(/^-?\d+$/, 'integer micro-USD as a decimal string');

export const controlAlertKind = z.enum(CONTROL_ALERT_KINDS as [ControlAlertKind, ...ControlAlertKind[]]);

export const controlAlertV1 = z.object({
  event_id: z.string().uuid(),
  alert_id: z.string(),
  timestamp: z.string().datetime({ offset: true }),
  day: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
  workload_id: z.string(),
  /** `*` = the whole workload (an exception without a route); `` = requests naming no known route */
  route_id: z.string(),
  kind: controlAlertKind,
  /** count_shift and refusal_rate_jump: requests on the day; output_per_request: actions settled */
  day_total: count.nullable(),
  baseline_total: count.nullable(),
  /** count_shift: total-variation distance and the categories whose share grew */
  distance: share.nullable(),
  grew: z
    .array(z.object({ category: z.enum(COUNT_CATEGORIES as [string, ...string[]]), day_share: share, baseline_share: share }))
    .nullable(),
  /** output_per_request */
  p95_output_tokens: count.nullable(),
  threshold_output_tokens: count.nullable(),
  /** refusal_rate_jump */
  refusal_rate: share.nullable(),
  baseline_refusal_rate: share.nullable(),
  refusals_by_code: z.record(code, count).nullable(),
  /** exception_budget */
  exceptions: z
    .array(
      z.object({
        exception_id: z.string(),
        share: z.number().nonnegative(),
        spent_microusd: microusd,
        budget_microusd: microusd,
        days_to_expiry: count,
      }),
    )
    .nullable(),
});
export type ControlAlertV1 = z.infer<typeof controlAlertV1>;

/**
 * `PUT /workloads/{id}/controls` (policy): a workload's daily-control thresholds, every field
 * optional (absent = the default). Types here; bounds in libs/domain `controlThresholdProblems`.
 */
export const controlThresholdsBody = z
  .object({
    shift: z
      .object({ min_sample: z.number().int().optional(), min_distance: z.number().optional(), significance: z.number().optional() })
      .strict()
      .optional(),
    output_p95_max_tokens: z.number().int().nullable().optional(),
    exception_budget_share: z.number().optional(),
    refusal: z.object({ min_sample: z.number().int().optional(), min_increase: z.number().optional() }).strict().optional(),
    reason: z.string().min(1).max(500),
  })
  .strict();
export type ControlThresholdsBody = z.infer<typeof controlThresholdsBody>;

/** The stored / answered shape of a workload's thresholds (all fields present). */
export interface ControlThresholdsDto {
  shift: { min_sample: number; min_distance: number; significance: number };
  output_p95_max_tokens: number | null;
  exception_budget_share: number;
  refusal: { min_sample: number; min_increase: number };
}

/** Thresholds from a stored or requested document, absent fields taken from `base` (the defaults). */
export function controlThresholdsOf(
  doc: Partial<Omit<ControlThresholdsBody, 'reason'>> | null | undefined,
  base: ControlThresholds,
): ControlThresholds {
  const d = doc ?? {};
  return {
    shift: {
      minSample: d.shift?.min_sample ?? base.shift.minSample,
      minDistance: d.shift?.min_distance ?? base.shift.minDistance,
      significance: (d.shift?.significance ?? base.shift.significance) as ControlThresholds['shift']['significance'],
    },
    outputP95MaxTokens: d.output_p95_max_tokens === undefined ? base.outputP95MaxTokens : d.output_p95_max_tokens,
    exceptionBudgetShare: d.exception_budget_share ?? base.exceptionBudgetShare,
    refusal: {
      minSample: d.refusal?.min_sample ?? base.refusal.minSample,
      minIncrease: d.refusal?.min_increase ?? base.refusal.minIncrease,
    },
  };
}

export function controlThresholdsDto(t: ControlThresholds): ControlThresholdsDto {
  return {
    shift: { min_sample: t.shift.minSample, min_distance: t.shift.minDistance, significance: t.shift.significance },
    output_p95_max_tokens: t.outputP95MaxTokens,
    exception_budget_share: t.exceptionBudgetShare,
    refusal: { min_sample: t.refusal.minSample, min_increase: t.refusal.minIncrease },
  };
}

/** The weekly audit's longest period, in days (a month of data per call, inclusive). */
export const AUDIT_MAX_DAYS = 31;

const utcDay = z.string().refine((d) => parseUtcDay(d) !== null, 'must be a UTC day YYYY-MM-DD');

/**
 * `GET /audit` (issue 13): the UTC days [from, to] (inclusive), at most `AUDIT_MAX_DAYS` long, an
 * optional workload, and the answer's format.
 */
export const auditQuery = z
  .object({
    from: utcDay,
    to: utcDay,
    workload_id: z.string().min(1).max(200).optional(),
    format: z.enum(['json', 'csv']).optional(),
  })
  .strict()
  .superRefine((q, ctx) => {
    const from = parseUtcDay(q.from);
    const to = parseUtcDay(q.to);
    if (!from || !to) return;
    if (from.getTime() > to.getTime()) ctx.addIssue({ code: 'custom', path: ['to'], message: 'must not be before from' });
    else if ((to.getTime() - from.getTime()) / 86_400_000 + 1 > AUDIT_MAX_DAYS) {
      ctx.addIssue({ code: 'custom', path: ['to'], message: `the period is at most ${AUDIT_MAX_DAYS} days` });
    }
  });
export type AuditQuery = z.infer<typeof auditQuery>;
