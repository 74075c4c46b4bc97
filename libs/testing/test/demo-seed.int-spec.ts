// The demo seed against the real Postgres: it refuses a database not marked as a demo database,
// and its exception is requested and approved (by someone else) through the exception records.
import {
  CatalogRepository,
  Database,
  DEMO_DATABASE_KEY,
  ExceptionRepository,
  GatewayMetaRepository,
  OutboxRepository,
  PolicyRepository,
} from '@gateway/db';
import { DEMO_GEMINI_PRICE, DEMO_OPENAI_PRICE, seedDemo } from '../src/demo-seed';
import { REAL_ROUTES } from '../src/real-routes';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

let db: Database;
beforeAll(() => {
  db = new Database(DATABASE_URL, { poolMax: 2 });
});
afterAll(async () => {
  await db?.close();
});

describe('demo seed', () => {
  it('refuses an unmarked database and writes nothing; seeds a marked one with a four-eyes exception', async () => {
    const meta = new GatewayMetaRepository(db);
    expect(await meta.get(DEMO_DATABASE_KEY)).toBeNull();
    await expect(seedDemo(DATABASE_URL, 'http://127.0.0.1:3010')).rejects.toThrow(/not marked as a demo database/);
    expect(await db.prisma.workload.findUnique({ where: { id: 'eval-rerank' } })).toBeNull();

    const out = await seedDemo(DATABASE_URL, 'http://127.0.0.1:3010', undefined, { markDemoDatabase: true });
    expect(out.operatorToken).toMatch(/^op_/);
    expect(await meta.get(DEMO_DATABASE_KEY)).toBe('true');

    const exceptions = new ExceptionRepository(db, new OutboxRepository(db));
    const [ex] = (await exceptions.list({ workloadId: 'eval-rerank', limit: 10 })).filter((e) => e.status === 'active');
    const events = await exceptions.eventsOf(ex.id);
    // both rows carry the same instant, so compare them as a set
    expect(events.map((e) => [e.event, e.actor]).sort()).toEqual([
      ['approve', 'demo-approver'],
      ['request', 'demo-operator'],
    ]);
    // The demo routes carry structured prices: a long-context tier (Gemini), service tiers and a fee (OpenAI).
    const catalog = new CatalogRepository(db);
    expect(await catalog.priceById('price-gemini-flash-v1')).toMatchObject({ id: 'price-gemini-flash-v1', ...DEMO_GEMINI_PRICE });
    expect(await catalog.priceById('price-approved-standard-v1')).toMatchObject({ id: 'price-approved-standard-v1', ...DEMO_OPENAI_PRICE });
  });

  it('with provider keys set: real routes, unverified, priced, credential by name, callable by support-draft; a later start keeps their verification', async () => {
    const url = 'http://127.0.0.1:3010';
    await seedDemo(DATABASE_URL, url, undefined, { realRoutes: REAL_ROUTES });
    const policy = new PolicyRepository(db, new OutboxRepository(db));
    for (const r of REAL_ROUTES) {
      const route = await policy.routeById(r.contract.routeId);
      expect(route?.versions).toHaveLength(1);
      expect(route?.versions[0]).toMatchObject({
        upstreamBaseUrl: r.contract.upstreamBaseUrl,
        upstreamModel: r.contract.upstreamModel,
        credentialRef: r.contract.credentialRef,
        verifiedAt: null,
      });
      expect(route?.prices[0]).toMatchObject(r.price);
      // Admission sees the route and refuses it as unverified until an operator verifies it.
      expect(await new CatalogRepository(db).routeByAlias(r.contract.alias)).toMatchObject({
        verifiedAt: null,
        credentialRef: r.contract.credentialRef,
      });
    }
    const support = await db.prisma.workload.findUnique({ where: { id: 'support-draft' } });
    expect(support?.allowedAliases).toEqual(expect.arrayContaining(REAL_ROUTES.map((r) => r.contract.alias)));

    const [first] = REAL_ROUTES;
    await policy.verifyRoute(first.contract.routeId, 1, 'olga', { method: 'probe' }, new Date());
    await seedDemo(DATABASE_URL, url, undefined, { realRoutes: REAL_ROUTES });
    const again = await policy.routeById(first.contract.routeId);
    expect(again?.currentVersion).toBe(1);
    expect(again?.versions[0].verifiedBy).toBe('olga');
  });
});
