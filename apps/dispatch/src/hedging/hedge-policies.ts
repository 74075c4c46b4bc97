import type { HedgePolicyRepository } from '@gateway/db';
import type { HedgePolicyRevision } from '@gateway/domain';

export type HedgePolicySource = Pick<HedgePolicyRepository, 'hedgePolicyFor'>;

/** How long one instance reuses the policy it read for a (workload, route). */
export const HEDGE_POLICY_TTL_MS = 5_000;

/**
 * The hedge policy in force per (workload, route), read through `hedgePolicyFor` and kept briefly
 * per dispatch instance: a policy change reaches every instance within the TTL. Concurrent reads
 * of one key share one query.
 */
export class HedgePolicies {
  private readonly cache = new Map<string, { at: number; value: Promise<HedgePolicyRevision | null> }>();

  constructor(
    private readonly source: HedgePolicySource,
    private readonly ttlMs = HEDGE_POLICY_TTL_MS,
  ) {}

  forAction(workloadId: string, routeId: string, nowMs: number): Promise<HedgePolicyRevision | null> {
    const key = `${workloadId}\u0000${routeId}`;
    const hit = this.cache.get(key);
    if (hit && nowMs - hit.at < this.ttlMs) return hit.value;
    const value = this.source.hedgePolicyFor(workloadId, routeId);
    this.cache.set(key, { at: nowMs, value });
    // a failed read is not cached: the next action asks again
    value.catch(() => {
      if (this.cache.get(key)?.value === value) this.cache.delete(key);
    });
    if (this.cache.size > 10_000) this.cache.delete(this.cache.keys().next().value as string);
    return value;
  }
}
