// The demo seed against the real Postgres: it refuses a database not marked as a demo database,
// and its exception is requested and approved (by someone else) through the exception records.
import { Database, DEMO_DATABASE_KEY, ExceptionRepository, GatewayMetaRepository, OutboxRepository } from '@gateway/db';
import { seedDemo } from '../src/demo-seed';

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
  });
});
