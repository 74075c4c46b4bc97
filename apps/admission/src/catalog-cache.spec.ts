import type { PriceRevision, RouteContract, WorkloadPolicy } from '@gateway/db';
import { CatalogCache } from './catalog-cache';

const T0 = Date.parse('2026-03-17T10:00:00.000Z');

const workload = (id: string) => ({ id }) as WorkloadPolicy;
const routeOf = (alias: string, version: number) => ({ alias, routeId: `rt-${alias}`, version }) as RouteContract;
const price = (id: string) => ({ id }) as PriceRevision;

/** Counts loads per cache key; what it returns can be changed between calls. */
class FakeCatalog {
  readonly loads: string[] = [];
  workloads = new Map<string, WorkloadPolicy>([['h1', workload('wl-1')]]);
  routes = new Map<string, RouteContract>([['std', routeOf('std', 1)]]);
  prices = new Map<string, PriceRevision>([['rt-std', price('p-1')]]);
  failNext: Error | null = null;

  async scopeLimitsFor(): Promise<{ team: null; environment: null }> {
    return { team: null, environment: null };
  }

  async workloadByKeyHash(keyHash: string): Promise<WorkloadPolicy | null> {
    return this.load(`key:${keyHash}`, this.workloads.get(keyHash));
  }

  async routeByAlias(alias: string): Promise<RouteContract | null> {
    return this.load(`route:${alias}`, this.routes.get(alias));
  }

  async priceAt(routeId: string, at: Date): Promise<PriceRevision | null> {
    return this.load(`price:${routeId}@${at.toISOString()}`, this.prices.get(routeId));
  }

  private load<T>(what: string, value: T | undefined): T | null {
    this.loads.push(what);
    if (this.failNext) {
      const err = this.failNext;
      this.failNext = null;
      throw err;
    }
    return value ?? null;
  }
}

describe('CatalogCache', () => {
  const saved = process.env.ADMISSION_CATALOG_TTL_MS;
  let now = T0;

  beforeEach(() => {
    now = T0;
  });

  afterEach(() => {
    if (saved === undefined) delete process.env.ADMISSION_CATALOG_TTL_MS;
    else process.env.ADMISSION_CATALOG_TTL_MS = saved;
  });

  const setup = (ttl: string | undefined) => {
    if (ttl === undefined) delete process.env.ADMISSION_CATALOG_TTL_MS;
    else process.env.ADMISSION_CATALOG_TTL_MS = ttl;
    const catalog = new FakeCatalog();
    return { catalog, cache: new CatalogCache(catalog, { now: () => new Date(now) }) };
  };

  it('serves hits within the TTL without reloading', async () => {
    const { catalog, cache } = setup('1000');
    const first = await cache.workloadByKeyHash('h1');
    now = T0 + 999;
    catalog.workloads.set('h1', workload('wl-changed'));
    await expect(cache.workloadByKeyHash('h1')).resolves.toBe(first);
    expect(catalog.loads).toEqual(['key:h1']);
  });

  it('reloads once the TTL has passed, and caches the new value from then on', async () => {
    const { catalog, cache } = setup('1000');
    await cache.routeByAlias('std');
    catalog.routes.set('std', routeOf('std', 2));
    now = T0 + 1000;
    await expect(cache.routeByAlias('std')).resolves.toMatchObject({ version: 2 });
    now = T0 + 1999;
    await expect(cache.routeByAlias('std')).resolves.toMatchObject({ version: 2 });
    expect(catalog.loads).toEqual(['route:std', 'route:std']);
  });

  it('defaults to 1000 ms when the variable is unset', async () => {
    const { catalog, cache } = setup(undefined);
    await cache.workloadByKeyHash('h1');
    now = T0 + 999;
    await cache.workloadByKeyHash('h1');
    now = T0 + 1000;
    await cache.workloadByKeyHash('h1');
    expect(catalog.loads).toHaveLength(2);
  });

  it.each(['-5', 'soon', 'NaN'])('falls back to 1000 ms for an invalid TTL (%s)', async (ttl) => {
    const { catalog, cache } = setup(ttl);
    await cache.workloadByKeyHash('h1');
    now = T0 + 999;
    await cache.workloadByKeyHash('h1');
    now = T0 + 1000;
    await cache.workloadByKeyHash('h1');
    expect(catalog.loads).toHaveLength(2);
  });

  it('does not cache a miss: a key created a moment ago works at once', async () => {
    const { catalog, cache } = setup('1000');
    await expect(cache.workloadByKeyHash('h2')).resolves.toBeNull();
    catalog.workloads.set('h2', workload('wl-2'));
    await expect(cache.workloadByKeyHash('h2')).resolves.toMatchObject({ id: 'wl-2' });
    await expect(cache.workloadByKeyHash('h2')).resolves.toMatchObject({ id: 'wl-2' });
    expect(catalog.loads).toEqual(['key:h2', 'key:h2']);
  });

  it('drops a cached value when its reload finds nothing (revoked key after expiry)', async () => {
    const { catalog, cache } = setup('1000');
    await cache.workloadByKeyHash('h1');
    catalog.workloads.delete('h1');
    now = T0 + 1000;
    await expect(cache.workloadByKeyHash('h1')).resolves.toBeNull();
    await expect(cache.workloadByKeyHash('h1')).resolves.toBeNull();
    expect(catalog.loads).toEqual(['key:h1', 'key:h1', 'key:h1']);
  });

  it('does not cache a failed load', async () => {
    const { catalog, cache } = setup('1000');
    catalog.failNext = new Error('db down');
    await expect(cache.priceAt('rt-std', new Date(T0))).rejects.toThrow('db down');
    await expect(cache.priceAt('rt-std', new Date(T0))).resolves.toMatchObject({ id: 'p-1' });
    await expect(cache.priceAt('rt-std', new Date(T0))).resolves.toMatchObject({ id: 'p-1' });
    expect(catalog.loads).toHaveLength(2);
  });

  it('requests that miss together share one load, and a failed shared load fails them all once', async () => {
    const { catalog, cache } = setup('1000');
    const [a, b, c] = await Promise.all([cache.workloadByKeyHash('h1'), cache.workloadByKeyHash('h1'), cache.routeByAlias('std')]);
    expect(a).toMatchObject({ id: 'wl-1' });
    expect(b).toBe(a);
    expect(c).toMatchObject({ alias: 'std' });
    expect(catalog.loads).toEqual(['key:h1', 'route:std']);

    now = T0 + 1000;
    catalog.failNext = new Error('db down');
    const failed = await Promise.allSettled([cache.routeByAlias('std'), cache.routeByAlias('std')]);
    expect(failed.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    await expect(cache.routeByAlias('std')).resolves.toMatchObject({ alias: 'std' });
    expect(catalog.loads).toEqual(['key:h1', 'route:std', 'route:std', 'route:std']);
  });

  it('TTL 0 disables caching: every read loads', async () => {
    const { catalog, cache } = setup('0');
    await cache.workloadByKeyHash('h1');
    await cache.workloadByKeyHash('h1');
    await cache.routeByAlias('std');
    await cache.routeByAlias('std');
    await cache.priceAt('rt-std', new Date(T0));
    await cache.priceAt('rt-std', new Date(T0));
    expect(catalog.loads).toEqual([
      'key:h1',
      'key:h1',
      'route:std',
      'route:std',
      `price:rt-std@${new Date(T0).toISOString()}`,
      `price:rt-std@${new Date(T0).toISOString()}`,
    ]);
  });

  it('keeps the three kinds of entry apart, one entry per key hash, alias and route', async () => {
    const { catalog, cache } = setup('1000');
    catalog.workloads.set('std', workload('wl-named-like-an-alias'));
    catalog.routes.set('other', routeOf('other', 1));
    await expect(cache.workloadByKeyHash('std')).resolves.toMatchObject({ id: 'wl-named-like-an-alias' });
    await expect(cache.routeByAlias('std')).resolves.toMatchObject({ alias: 'std' });
    await expect(cache.routeByAlias('other')).resolves.toMatchObject({ alias: 'other' });
    await cache.workloadByKeyHash('std');
    await cache.routeByAlias('std');
    await cache.routeByAlias('other');
    expect(catalog.loads).toEqual(['key:std', 'route:std', 'route:other']);
  });

  it('a price is cached per route for the TTL, whatever instant it was asked for', async () => {
    const { catalog, cache } = setup('1000');
    await cache.priceAt('rt-std', new Date(T0));
    catalog.prices.set('rt-std', price('p-2'));
    await expect(cache.priceAt('rt-std', new Date(T0 + 500))).resolves.toMatchObject({ id: 'p-1' });
    now = T0 + 1000;
    await expect(cache.priceAt('rt-std', new Date(T0 + 1000))).resolves.toMatchObject({ id: 'p-2' });
    expect(catalog.loads).toHaveLength(2);
  });

  // Regression test for a fixed bug: catalog-cache.ts line 17 reads Number(process.env.ADMISSION_CATALOG_TTL_MS ?? 1000);
  // an empty value (`ADMISSION_CATALOG_TTL_MS=` in an env file) is Number('') = 0, which silently
  // disables the cache instead of using the documented default.
  it('an empty ADMISSION_CATALOG_TTL_MS means the default, not "disabled"', async () => {
    const { catalog, cache } = setup('');
    await cache.workloadByKeyHash('h1');
    await cache.workloadByKeyHash('h1');
    expect(catalog.loads).toHaveLength(1);
  });

  describe('runningExperiment (issue 11)', () => {
    const running = { id: 'exp-1', holdoutShareBps: 1_000, hedgePolicyRevisionId: 'hp-1', readOnlyTools: [] };

    it('caches "none running" too (the common answer costs no query within the TTL), then sees a start', async () => {
      process.env.ADMISSION_CATALOG_TTL_MS = '1000';
      let current: typeof running | null = null;
      const reads: string[] = [];
      const cache = new CatalogCache(
        new FakeCatalog(),
        { now: () => new Date(now) },
        {
          runningFor: async (workloadId: string) => {
            reads.push(workloadId);
            return current;
          },
        },
      );
      expect(await cache.runningExperiment('wl-1')).toBeNull();
      current = running;
      now = T0 + 999;
      expect(await cache.runningExperiment('wl-1')).toBeNull();
      expect(reads).toEqual(['wl-1']);
      now = T0 + 1_000;
      expect(await cache.runningExperiment('wl-1')).toEqual(running);
      expect(reads).toEqual(['wl-1', 'wl-1']);
    });

    it('without an experiment source (older wiring), nothing runs', async () => {
      const { cache } = setup('1000');
      expect(await cache.runningExperiment('wl-1')).toBeNull();
    });
  });
});
