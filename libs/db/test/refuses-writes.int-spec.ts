import { randomUUID } from 'node:crypto';
import { Database, isDatabaseOutOfService, isDatabaseRefusingWrites, isDatabaseUnavailable, txQuery } from '../src/database';

/**
 * A database server that answers but takes no writes (every transaction read-only: what a managed
 * database does when its storage fills, or a standby promoted the wrong way) is out of service for
 * the gateway as a whole, like one that is down: the API answers 503 `service_unavailable`
 * (`isDatabaseUnavailable`, libs/service-kit's `toDomainError`), never a 500, and a consumer waits
 * for it in place (`isDatabaseOutOfService`, `classifyConsumerError`) instead of parking every
 * message it holds on the dead-letter topic after its transient retries (~11 s). The errors here
 * are the server's own, through each way the services write: a prepared statement in autocommit,
 * `txQuery` inside a transaction, a Prisma raw query and a Prisma model call. (A full disk, 53100,
 * gave the same four shapes on a tablespace on a 40 MB tmpfs; that needs root, so it is not a test.)
 */
const base = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const readOnly = `${base}${base.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c default_transaction_read_only=on')}`;

describe('a database that refuses writes', () => {
  const db = new Database(readOnly, { poolMax: 2 });
  afterAll(() => db.close());

  const insert = "INSERT INTO processed_event (consumer, event_id) VALUES ('refuses-writes-spec', $1)";
  const writes: Array<[string, () => Promise<unknown>]> = [
    ['a prepared statement in autocommit', () => db.query({ name: 'refuses_writes_spec', text: insert }, [randomUUID()])],
    ['txQuery inside a transaction', () => db.transaction((tx) => txQuery(tx, insert, [randomUUID()]))],
    ['a Prisma raw query', () => db.prisma.$executeRawUnsafe(insert, randomUUID())],
    ['a Prisma model call', () => db.prisma.processedEvent.create({ data: { consumer: 'refuses-writes-spec', eventId: randomUUID() } })],
  ];

  it('still answers reads (the server is up)', async () => {
    const rows = await db.prisma.$queryRaw<Array<{ ro: string }>>`SELECT current_setting('transaction_read_only') AS ro`;
    expect(rows[0].ro).toBe('on');
  });

  it.each(writes)('%s: refused, and classified as the server out of service', async (_, write) => {
    const err = await write().then(
      () => new Error('the write was taken'),
      (e: unknown) => e,
    );
    expect(String((err as Error).message)).toMatch(/read-only transaction/);
    expect(isDatabaseRefusingWrites(err)).toBe(true);
    expect(isDatabaseOutOfService(err)).toBe(true);
    expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it('a refused prepared statement keeps its connection: no new backend per refusal', async () => {
    // `pg`'s pool.query drops a connection after any error, though a server's answer leaves it
    // usable: through a read-only window each refusal cost a new backend (a fork on the server).
    let opened = 0;
    const count = () => void opened++;
    db.pool.on('connect', count);
    try {
      for (let i = 0; i < 10; i++)
        await expect(db.query({ name: 'refuses_writes_spec', text: insert }, [randomUUID()])).rejects.toThrow(/read-only transaction/);
    } finally {
      db.pool.off('connect', count);
    }
    expect(opened).toBeLessThanOrEqual(1);
  });
});
