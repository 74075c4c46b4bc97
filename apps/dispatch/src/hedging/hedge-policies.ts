import type { ExperimentPauseRepository, HedgePolicyRepository } from '@gateway/db';
import type { HedgePolicyRevision } from '@gateway/domain';

export type HedgePolicySource = Pick<HedgePolicyRepository, 'hedgePolicyFor'> & Partial<Pick<HedgePolicyRepository, 'revisionById'>>;
/** Reads an experiment's open pause (issue 11); absent: no pause is ever open. */
export type PauseSource = Pick<ExperimentPauseRepository, 'openPauseId'>;

/** How long one instance reuses the policy it read for a (workload, route). */
export const HEDGE_POLICY_TTL_MS = 5_000;
/**
 * How long one instance reuses an experiment's pause state: like admission's catalog reads, a
 * second. A pause another instance opened reaches this one within it; this instance's own
 * evaluations update it at once (`notePause`).
 */
export const PAUSE_STATE_TTL_MS = 1_000;

type Cmd = { workload_id: string; route: { route_id: string }; experiment?: { id: string; cohort: string; policy_revision_id: string } };

/** What an action runs under: its hedge policy (null: primary only) and the experiment pause open at dispatch. */
export interface RunsUnder {
  policy: HedgePolicyRevision | null;
  pauseId: string | null;
}

/**
 * The hedge policy in force per (workload, route), read through `hedgePolicyFor` and kept briefly
 * per dispatch instance: a policy change reaches every instance within the TTL. Concurrent reads
 * of one key share one query.
 */
export class HedgePolicies {
  private readonly cache = new Map<string, { at: number; value: Promise<unknown> }>();

  constructor(
    private readonly source: HedgePolicySource,
    private readonly ttlMs = HEDGE_POLICY_TTL_MS,
    private readonly pauses: PauseSource | null = null,
    private readonly pauseTtlMs = PAUSE_STATE_TTL_MS,
  ) {}

  /**
   * The policy and pause an action runs under (issue 11): while its experiment has an open pause,
   * the hedged cohort runs primary-only, like the holdout (no hedge, retry or fallback). Both
   * cohorts record the pause (the holdout's treatment is unchanged; the report counts both).
   */
  async runsUnder(cmd: Cmd, nowMs: number): Promise<RunsUnder> {
    const e = cmd.experiment;
    const pauseId = e && e.cohort !== 'ineligible' ? await this.openPause(e.id, nowMs) : null;
    if (pauseId !== null && e?.cohort === 'hedged') return { policy: null, pauseId };
    return { policy: await this.forCommand(cmd, nowMs), pauseId };
  }

  /** The experiment's open pause as this instance last read it (null: none open, or no pause source). */
  openPause(experimentId: string, nowMs: number): Promise<string | null> {
    const source = this.pauses;
    if (!source) return Promise.resolve(null);
    return this.cached(`pause:${experimentId}`, nowMs, () => source.openPauseId(experimentId), this.pauseTtlMs);
  }

  /** This instance's own evaluation opened or closed a pause: its actions see it at once. */
  notePause(experimentId: string, pauseId: string | null, nowMs: number): void {
    this.cache.set(`pause:${experimentId}`, { at: nowMs, value: Promise.resolve(pauseId) });
  }

  forAction(workloadId: string, routeId: string, nowMs: number): Promise<HedgePolicyRevision | null> {
    return this.cached(`${workloadId}\u0000${routeId}`, nowMs, () => this.source.hedgePolicyFor(workloadId, routeId));
  }

  /**
   * The policy an action runs under (issue 11): an experiment's holdout runs the primary only (no
   * hedge, retry or fallback: the cleanest comparison), its hedged cohort under the revision the
   * experiment names (revisions are immutable, so a later one cannot move a running experiment),
   * anything else under the policy in force.
   */
  forCommand(cmd: Cmd, nowMs: number): Promise<HedgePolicyRevision | null> {
    const e = cmd.experiment;
    if (e?.cohort === 'holdout') return Promise.resolve(null);
    const byId = this.source.revisionById?.bind(this.source);
    if (e?.cohort === 'hedged' && byId) return this.cached(`revision:${e.policy_revision_id}`, nowMs, () => byId(e.policy_revision_id));
    return this.forAction(cmd.workload_id, cmd.route.route_id, nowMs);
  }

  private cached<T>(key: string, nowMs: number, load: () => Promise<T>, ttlMs = this.ttlMs): Promise<T> {
    const hit = this.cache.get(key);
    if (hit && nowMs - hit.at < ttlMs) return hit.value as Promise<T>;
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
