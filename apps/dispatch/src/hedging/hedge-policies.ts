import type { HedgePolicyRepository } from '@gateway/db';
import type { HedgePolicyRevision } from '@gateway/domain';

export type HedgePolicySource = Pick<HedgePolicyRepository, 'hedgePolicyFor'> & Partial<Pick<HedgePolicyRepository, 'revisionById'>>;

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
    return this.cached(`${workloadId}\u0000${routeId}`, nowMs, () => this.source.hedgePolicyFor(workloadId, routeId));
  }

  /**
   * The policy an action runs under (issue 11): an experiment's holdout runs the primary only (no
   * hedge, retry or fallback: the cleanest comparison), its hedged cohort under the revision the
   * experiment names (revisions are immutable, so a later one cannot move a running experiment),
   * anything else under the policy in force.
   */
  forCommand(
    cmd: { workload_id: string; route: { route_id: string }; experiment?: { cohort: string; policy_revision_id: string } },
    nowMs: number,
  ): Promise<HedgePolicyRevision | null> {
    const e = cmd.experiment;
    if (e?.cohort === 'holdout') return Promise.resolve(null);
    const byId = this.source.revisionById?.bind(this.source);
    if (e?.cohort === 'hedged' && byId) return this.cached(`revision:${e.policy_revision_id}`, nowMs, () => byId(e.policy_revision_id));
    return this.forAction(cmd.workload_id, cmd.route.route_id, nowMs);
  }

  private cached(key: string, nowMs: number, load: () => Promise<HedgePolicyRevision | null>): Promise<HedgePolicyRevision | null> {
    const hit = this.cache.get(key);
    if (hit && nowMs - hit.at < this.ttlMs) return hit.value;
    const value = load();
    this.cache.set(key, { at: nowMs, value });
    // a failed read is not cached: the next action asks again
    value.catch(() => {
      if (this.cache.get(key)?.value === value) this.cache.delete(key);
    });
    if (this.cache.size > 10_000) this.cache.delete(this.cache.keys().next().value as string);
    return value;
  }
}
