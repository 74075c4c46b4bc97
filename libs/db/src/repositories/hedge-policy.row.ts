import { z } from 'zod';
import type { HedgePolicyRevision } from '@gateway/domain';
import { TRANSIENT_FAILURES } from '@gateway/domain';

/** The `hedge_policy_revision` columns (Prisma's names). */
export interface HedgePolicyRow {
  id: string;
  workloadId: string;
  routeId: string | null;
  revision: number;
  owner: string;
  enabled: boolean;
  delayKind: string;
  delayMs: number | null;
  delayQuantilePerMille: number | null;
  delayFloorMs: number | null;
  delayCeilingMs: number | null;
  delayMinSamples: number | null;
  maxHedges: number;
  retryTransient: string[];
  maxRetries: number;
  maxAttempts: number;
  maxExtraSpendMicrousd: bigint;
  spendFloorMicrousd: bigint;
  maxRouteErrorPerMille: number;
  maxRouteInFlight: number;
  minUsefulRemainingMs: number;
  bucketMaxMilliTokens: number;
  bucketSuccessRefillMilliTokens: number;
  approvedPremiumMicrousd: bigint;
  experimentBudgetMicrousd: bigint | null;
  experimentBudgetPeriod: string | null;
  readOnlyTools: string[];
  createdAt: Date;
  createdBy: string;
  reason: string;
}

const transient = z.array(z.enum(TRANSIENT_FAILURES));
const period = z.enum(['day', 'month']);
const maxHedges = z.union([z.literal(0), z.literal(1)]);

/** A column the row's delay kind requires (the table's CHECK guarantees it; a null here is a bug). */
function required(v: number | null, column: string, id: string): number {
  if (v === null) throw new Error(`hedge_policy_revision ${id}: ${column} is null`);
  return v;
}

/**
 * The one mapping between a `hedge_policy_revision` row and a domain `HedgePolicyRevision`; the
 * row's id is the policy's `revisionId`, which every attempt records. Enumerated text columns are
 * parsed strictly so a bad row fails loudly here.
 */
export function hedgePolicyFromRow(row: HedgePolicyRow): HedgePolicyRevision {
  const delay: HedgePolicyRevision['delay'] =
    row.delayKind === 'fixed'
      ? { kind: 'fixed', ms: required(row.delayMs, 'delay_ms', row.id) }
      : {
          kind: z.literal('quantile').parse(row.delayKind),
          quantilePerMille: required(row.delayQuantilePerMille, 'delay_quantile_per_mille', row.id),
          floorMs: required(row.delayFloorMs, 'delay_floor_ms', row.id),
          ceilingMs: required(row.delayCeilingMs, 'delay_ceiling_ms', row.id),
          minSamples: required(row.delayMinSamples, 'delay_min_samples', row.id),
        };
  return {
    revisionId: row.id,
    workloadId: row.workloadId,
    routeId: row.routeId,
    revision: row.revision,
    owner: row.owner,
    enabled: row.enabled,
    delay,
    maxHedges: maxHedges.parse(row.maxHedges),
    retry: { transient: transient.parse(row.retryTransient), maxRetries: row.maxRetries },
    allowance: { maxAttempts: row.maxAttempts, maxExtraSpendMicrousd: row.maxExtraSpendMicrousd },
    stop: {
      spendFloorMicrousd: row.spendFloorMicrousd,
      maxRouteErrorPerMille: row.maxRouteErrorPerMille,
      maxRouteInFlight: row.maxRouteInFlight,
      minUsefulRemainingMs: row.minUsefulRemainingMs,
    },
    bucket: { maxMilliTokens: row.bucketMaxMilliTokens, successRefillMilliTokens: row.bucketSuccessRefillMilliTokens },
    approvedPremiumMicrousd: row.approvedPremiumMicrousd,
    experimentAllowance:
      row.experimentBudgetMicrousd === null
        ? null
        : { budgetMicrousd: row.experimentBudgetMicrousd, period: period.parse(row.experimentBudgetPeriod) },
    readOnlyTools: row.readOnlyTools,
    createdAt: row.createdAt,
    createdBy: row.createdBy,
    reason: row.reason,
  };
}

/** The columns of a new row. */
export function hedgePolicyToRow(p: HedgePolicyRevision): HedgePolicyRow {
  const d = p.delay;
  return {
    id: p.revisionId,
    workloadId: p.workloadId,
    routeId: p.routeId,
    revision: p.revision,
    owner: p.owner,
    enabled: p.enabled,
    delayKind: d.kind,
    delayMs: d.kind === 'fixed' ? d.ms : null,
    delayQuantilePerMille: d.kind === 'quantile' ? d.quantilePerMille : null,
    delayFloorMs: d.kind === 'quantile' ? d.floorMs : null,
    delayCeilingMs: d.kind === 'quantile' ? d.ceilingMs : null,
    delayMinSamples: d.kind === 'quantile' ? d.minSamples : null,
    maxHedges: p.maxHedges,
    retryTransient: [...p.retry.transient],
    maxRetries: p.retry.maxRetries,
    maxAttempts: p.allowance.maxAttempts,
    maxExtraSpendMicrousd: p.allowance.maxExtraSpendMicrousd,
    spendFloorMicrousd: p.stop.spendFloorMicrousd,
    maxRouteErrorPerMille: p.stop.maxRouteErrorPerMille,
    maxRouteInFlight: p.stop.maxRouteInFlight,
    minUsefulRemainingMs: p.stop.minUsefulRemainingMs,
    bucketMaxMilliTokens: p.bucket.maxMilliTokens,
    bucketSuccessRefillMilliTokens: p.bucket.successRefillMilliTokens,
    approvedPremiumMicrousd: p.approvedPremiumMicrousd,
    experimentBudgetMicrousd: p.experimentAllowance?.budgetMicrousd ?? null,
    experimentBudgetPeriod: p.experimentAllowance?.period ?? null,
    readOnlyTools: [...p.readOnlyTools],
    createdAt: p.createdAt,
    createdBy: p.createdBy,
    reason: p.reason,
  };
}
