import { z } from 'zod';
import type { HedgeDelay, HedgePolicy } from '@gateway/domain';
import { HEDGE_LIMITS, TRANSIENT_FAILURES } from '@gateway/domain';

/**
 * A hedge policy's wire shape: snake_case, as the policy API takes it and shows it, money as a
 * JSON integer or digit string in and a string out. The one translation between it and the domain
 * `HedgePolicy` (without its revision id); what the numbers may be is `hedgePolicyProblems`' to say.
 */

export type HedgeSettingsDomain = Omit<HedgePolicy, 'revisionId'>;

export type HedgeDelayWire =
  | { kind: 'fixed'; ms: number }
  | { kind: 'quantile'; quantile_per_mille: number; floor_ms: number; ceiling_ms: number; min_samples: number };

export type HedgePolicyWire<M> = {
  owner: string;
  enabled: boolean;
  delay: HedgeDelayWire;
  max_hedges: number;
  retry: { transient: (typeof TRANSIENT_FAILURES)[number][]; max_retries: number };
  allowance: { max_attempts: number; max_extra_spend_microusd: M };
  stop: { spend_floor_microusd: M; max_route_error_per_mille: number; max_route_in_flight: number; min_useful_remaining_ms: number };
  bucket: { max_milli_tokens: number; success_refill_milli_tokens: number };
  approved_premium_microusd: M;
  experiment_allowance: { budget_microusd: M; period: 'day' | 'month' } | null;
  read_only_tools: string[];
};

/**
 * The zod fields of the wire shape, with `money` parsing each amount. Every object is strict and
 * every list bounded; numbers are only checked to be integers here, the domain checks ranges.
 */
export function hedgePolicyWireFields<M extends z.ZodType<bigint>>(money: M) {
  const int = z.number().int();
  const delay = z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('fixed'), ms: int }).strict(),
    z.object({ kind: z.literal('quantile'), quantile_per_mille: int, floor_ms: int, ceiling_ms: int, min_samples: int }).strict(),
  ]);
  return {
    owner: z.string().trim().min(1).max(128),
    enabled: z.boolean(),
    delay,
    max_hedges: int,
    retry: z
      .object({
        transient: z.array(z.enum(TRANSIENT_FAILURES)).max(TRANSIENT_FAILURES.length, `at most ${TRANSIENT_FAILURES.length} classes`),
        max_retries: int,
      })
      .strict(),
    allowance: z.object({ max_attempts: int, max_extra_spend_microusd: money }).strict(),
    stop: z
      .object({ spend_floor_microusd: money, max_route_error_per_mille: int, max_route_in_flight: int, min_useful_remaining_ms: int })
      .strict(),
    bucket: z.object({ max_milli_tokens: int, success_refill_milli_tokens: int }).strict(),
    approved_premium_microusd: money,
    experiment_allowance: z
      .object({ budget_microusd: money, period: z.enum(['day', 'month']) })
      .strict()
      .nullable()
      .default(null),
    read_only_tools: z
      .array(z.string().max(HEDGE_LIMITS.maxToolNameLength))
      .max(HEDGE_LIMITS.maxReadOnlyTools, `at most ${HEDGE_LIMITS.maxReadOnlyTools} tools`)
      .default([]),
  };
}

function delayFromWire(d: HedgeDelayWire): HedgeDelay {
  return d.kind === 'fixed'
    ? { kind: 'fixed', ms: d.ms }
    : { kind: 'quantile', quantilePerMille: d.quantile_per_mille, floorMs: d.floor_ms, ceilingMs: d.ceiling_ms, minSamples: d.min_samples };
}

function delayToWire(d: HedgeDelay): HedgeDelayWire {
  return d.kind === 'fixed'
    ? { kind: 'fixed', ms: d.ms }
    : { kind: 'quantile', quantile_per_mille: d.quantilePerMille, floor_ms: d.floorMs, ceiling_ms: d.ceilingMs, min_samples: d.minSamples };
}

/** The domain settings of a wire policy. `max_hedges` is narrowed by `hedgePolicyProblems`, which refuses anything but 0 or 1. */
export function hedgePolicyFromWire(w: HedgePolicyWire<bigint>): HedgeSettingsDomain {
  return {
    owner: w.owner,
    enabled: w.enabled,
    delay: delayFromWire(w.delay),
    maxHedges: w.max_hedges as 0 | 1,
    retry: { transient: w.retry.transient, maxRetries: w.retry.max_retries },
    allowance: { maxAttempts: w.allowance.max_attempts, maxExtraSpendMicrousd: w.allowance.max_extra_spend_microusd },
    stop: {
      spendFloorMicrousd: w.stop.spend_floor_microusd,
      maxRouteErrorPerMille: w.stop.max_route_error_per_mille,
      maxRouteInFlight: w.stop.max_route_in_flight,
      minUsefulRemainingMs: w.stop.min_useful_remaining_ms,
    },
    bucket: { maxMilliTokens: w.bucket.max_milli_tokens, successRefillMilliTokens: w.bucket.success_refill_milli_tokens },
    approvedPremiumMicrousd: w.approved_premium_microusd,
    experimentAllowance: w.experiment_allowance && {
      budgetMicrousd: w.experiment_allowance.budget_microusd,
      period: w.experiment_allowance.period,
    },
    readOnlyTools: w.read_only_tools,
  };
}

/** The wire form of a policy's settings: what the policy API shows, money as strings. */
export function hedgePolicyToWire(p: HedgeSettingsDomain): HedgePolicyWire<string> {
  return {
    owner: p.owner,
    enabled: p.enabled,
    delay: delayToWire(p.delay),
    max_hedges: p.maxHedges,
    retry: { transient: [...p.retry.transient], max_retries: p.retry.maxRetries },
    allowance: { max_attempts: p.allowance.maxAttempts, max_extra_spend_microusd: p.allowance.maxExtraSpendMicrousd.toString() },
    stop: {
      spend_floor_microusd: p.stop.spendFloorMicrousd.toString(),
      max_route_error_per_mille: p.stop.maxRouteErrorPerMille,
      max_route_in_flight: p.stop.maxRouteInFlight,
      min_useful_remaining_ms: p.stop.minUsefulRemainingMs,
    },
    bucket: { max_milli_tokens: p.bucket.maxMilliTokens, success_refill_milli_tokens: p.bucket.successRefillMilliTokens },
    approved_premium_microusd: p.approvedPremiumMicrousd.toString(),
    experiment_allowance: p.experimentAllowance && {
      budget_microusd: p.experimentAllowance.budgetMicrousd.toString(),
      period: p.experimentAllowance.period,
    },
    read_only_tools: [...p.readOnlyTools],
  };
}
