import { Inject, Injectable, Optional } from '@nestjs/common';
import { Clock, InjectClock } from '@gateway/service-kit';
import {
  CatalogRepository,
  ExperimentRepository,
  PriceRevision,
  RouteContract,
  RunningExperiment,
  ScopeLimits,
  WorkloadPolicy,
} from '@gateway/db';

/**
 * A short-lived cache of the read side admission needs on every request (key → workload policy,
 * alias → current route contract, route → price in force). Worst-case staleness is the TTL
 * (ADMISSION_CATALOG_TTL_MS, default 1000 ms; 0 disables it): a revoked key, a new contract
 * version or a new price applies within that time on every instance. Candidate exceptions are
 * never cached: they are read fresh whenever a request asks for more than the workload default.
 */
@Injectable()
export class CatalogCache {
  private readonly entries = new Map<string, { until: number; value: unknown }>();
  /** Loads under way, by key: requests that miss together share one read (no stampede at expiry). */
  private readonly loading = new Map<string, Promise<unknown>>();
  private readonly ttlMs: number;

  constructor(
    @Inject(CatalogRepository)
    private readonly catalog: Pick<CatalogRepository, 'workloadByKeyHash' | 'routeByAlias' | 'priceAt' | 'scopeLimitsFor'>,
    @InjectClock() private readonly clock: Clock,
    @Optional()
    @Inject(ExperimentRepository)
    private readonly experiments: Pick<ExperimentRepository, 'runningFor'> | null = null,
  ) {
    const env = process.env.ADMISSION_CATALOG_TTL_MS;
    const raw = env === undefined || env.trim() === '' ? 1000 : Number(env);
    this.ttlMs = Number.isFinite(raw) && raw >= 0 ? raw : 1000;
  }

  workloadByKeyHash(keyHash: string): Promise<WorkloadPolicy | null> {
    return this.cached(`key:${keyHash}`, () => this.catalog.workloadByKeyHash(keyHash));
  }

  routeByAlias(alias: string): Promise<RouteContract | null> {
    return this.cached(`route:${alias}`, () => this.catalog.routeByAlias(alias));
  }

  priceAt(routeId: string, at: Date): Promise<PriceRevision | null> {
    return this.cached(`price:${routeId}`, () => this.catalog.priceAt(routeId, at));
  }

  /** A team's and an environment's limits: stale by at most the TTL, like the workload policy. */
  async scopeLimitsFor(team: string, environment: string): Promise<ScopeLimits> {
    const limits = await this.cached(`scopes:${team}\u0000${environment}`, () => this.catalog.scopeLimitsFor(team, environment));
    return limits ?? { team: null, environment: null };
  }

  /**
   * The workload's running experiment (issue 11), stale by at most the TTL: an experiment started
   * or stopped a moment ago assigns cohorts within that time. "None running" is the common answer,
   * so it is cached too (wrapped: a bare null is a miss).
   */
  async runningExperiment(workloadId: string): Promise<RunningExperiment | null> {
    const source = this.experiments;
    if (!source) return null;
    const hit = await this.cached(`experiment:${workloadId}`, async () => ({ running: await source.runningFor(workloadId) }));
    return hit?.running ?? null;
  }

  /**
   * Misses (null) are not cached, so a key or route created a moment ago works at once. Requests
   * that miss while a load of the same key is under way wait for that load instead of starting
   * their own: when an entry expires under load, every request in flight would otherwise read
   * the same row at once (one ORM read each, about half a millisecond of CPU).
   */
  private cached<T>(key: string, load: () => Promise<T | null>): Promise<T | null> {
    if (this.ttlMs === 0) return load();
    const now = this.clock.now().getTime();
    const hit = this.entries.get(key);
    if (hit && hit.until > now) return Promise.resolve(hit.value as T);
    const pending = this.loading.get(key);
    if (pending) return pending as Promise<T | null>;
    const loaded = (async () => {
      try {
        const value = await load();
        if (value !== null) {
          if (this.entries.size > 10_000) this.entries.clear();
          this.entries.set(key, { until: now + this.ttlMs, value });
        } else {
          this.entries.delete(key);
        }
        return value;
      } finally {
        this.loading.delete(key);
      }
    })();
    this.loading.set(key, loaded);
    return loaded;
  }
}
