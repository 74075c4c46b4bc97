import { Inject, Injectable } from '@nestjs/common';
import { QuotaCounterRepository } from '@gateway/db';
import { DomainError, quotaScopeName, reconcileInstanceCounters, ReconciledWindow } from '@gateway/domain';
import { ReconciliationMetrics } from '../../reconciliation.metrics';

export type InstanceCounterPort = Pick<QuotaCounterRepository, 'instanceScopedTokenCounters'>;

/** How far back a report looks when the caller names no start: the last ten token windows. */
const DEFAULT_LOOKBACK_MS = 10 * 60_000;
const MAX_LOOKBACK_MS = 24 * 3600_000;

/**
 * Token rates enforced per gateway instance are kept on one counter per instance, so no instance
 * sees what the organisation admitted. This sums them per scope and window into the
 * organisation-wide figure, reports what no single instance counted and how far the sum went
 * past the configured limit, and publishes the newest window of each scope as metrics.
 */
@Injectable()
export class ReconcileInstanceCounters {
  constructor(
    @Inject(QuotaCounterRepository) private readonly counters: InstanceCounterPort,
    private readonly metrics: ReconciliationMetrics,
  ) {}

  async execute(now: Date, query: { since?: string } = {}) {
    const since = query.since === undefined ? new Date(now.getTime() - DEFAULT_LOOKBACK_MS) : new Date(query.since);
    if (Number.isNaN(since.getTime()) || since.getTime() < now.getTime() - MAX_LOOKBACK_MS) {
      throw new DomainError('invalid_request', 'since must be an ISO-8601 instant within the last 24 hours', 'since');
    }
    const windows = reconcileInstanceCounters(await this.counters.instanceScopedTokenCounters(since));
    this.publish(windows);
    return { since: since.toISOString(), windows: windows.map(windowJson) };
  }

  private publish(windows: ReconciledWindow[]): void {
    this.metrics.instanceScopedTokens.reset();
    this.metrics.instanceScopedOverLimit.reset();
    const seen = new Set<string>();
    for (const w of windows) {
      const scope = quotaScopeName(w.scope, w.scopeId);
      if (seen.has(scope)) continue; // newest window first
      seen.add(scope);
      this.metrics.instanceScopedTokens.set({ scope }, w.organisationTokens);
      this.metrics.instanceScopedOverLimit.set({ scope }, w.overLimitTokens);
    }
  }
}

function windowJson(w: ReconciledWindow) {
  return {
    scope: quotaScopeName(w.scope, w.scopeId),
    window_start: w.windowStart.toISOString(),
    enforcement: 'instance',
    instances: w.instances.map((i) => ({ quota_scope: quotaScopeName(w.scope, w.scopeId, i.instanceId), tokens: i.tokens })),
    organisation_tokens: w.organisationTokens,
    largest_instance_tokens: w.largestInstanceTokens,
    unseen_by_any_instance_tokens: w.unseenByAnyInstanceTokens,
    tokens_per_minute_limit: w.limit,
    over_limit_tokens: w.overLimitTokens,
  };
}
