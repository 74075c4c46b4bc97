/**
 * Issue 7 item 8: `GET /ledger/export` streams a range larger than one database batch, and what it
 * streams (NDJSON and CSV) is exactly what paging `GET /ledger` returns. Settlement in-process
 * against the real Postgres and Kafka, over HTTP.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Database, LedgerRepository, OutboxRepository, PolicyRepository } from '@gateway/db';
import { hashCredential } from '@gateway/domain';
import type { RunningService } from '@gateway/service-kit';
import { ledgerRow } from '@gateway/testing';
import { startSettlement } from '../src/app';
import { EXPORT_BATCH_ROWS } from '../src/usecases/export-ledger/export-ledger.usecase';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const KAFKA_BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const ROWS = 2 * EXPORT_BATCH_ROWS + 137;

describe('GET /ledger/export', () => {
  let settlement: RunningService;
  // its seeding transaction may take up to 60 s (1,137 rows on a busy box): the server's idle bound above that
  const db = new Database(DATABASE_URL, { poolMax: 4, idleInTransactionMs: 65_000 });
  const workloadId = `wl-export-${randomUUID()}`;
  const base = Date.parse('2026-11-21T00:00:00Z');
  let finance = '';

  beforeAll(async () => {
    settlement = await startSettlement({ DATABASE_URL, KAFKA_BROKERS, SETTLEMENT_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' });
    finance = `op_${randomBytes(18).toString('base64url')}`;
    await new PolicyRepository(db, new OutboxRepository(db)).addOperatorToken(
      { id: randomUUID(), subject: `fin-${workloadId}`, roles: ['finance'], tokenHash: hashCredential(finance) },
      new Date(),
    );
    const ledger = new LedgerRepository(new OutboxRepository(db));
    await db.transaction(
      async (tx) => {
        for (let i = 0; i < ROWS; i++) {
          // every third pair shares a settled_at, so the id breaks ties across batch boundaries too
          const settledAt = new Date(base + Math.floor(i / 2) * 1000);
          const evidence =
            i % 100 === 0
              ? ({
                  kind: 'attested',
                  amountMicrousd: 9_007_199_254_740_993n,
                  caseId: `c-${i}`,
                  attestedBy: 'ops, "night"',
                  reason: 'invoice\nline 2',
                } as const)
              : undefined;
          await ledger.record(tx, ledgerRow({ workloadId, routeId: 'r', priceRevisionId: 'p', settledAt, evidence }), randomUUID());
        }
      },
      { timeoutMs: 60_000 },
    );
  });

  afterAll(async () => {
    await settlement?.close();
    await db.close();
  });

  const get = (path: string, token = finance) => fetch(`${settlement.url}${path}`, { headers: { authorization: `Bearer ${token}` } });

  /** Every entry of the range through the paged API, newest first. */
  async function paged(query: string): Promise<Array<Record<string, unknown>>> {
    const out: Array<Record<string, unknown>> = [];
    let cursor: string | null = null;
    do {
      const res = await get(`/ledger?${query}&limit=400${cursor ? `&cursor=${cursor}` : ''}`);
      const page = (await res.json()) as { entries: Array<Record<string, unknown>>; next_cursor: string | null };
      out.push(...page.entries);
      cursor = page.next_cursor;
    } while (cursor !== null);
    return out;
  }

  it(`streams NDJSON identical to the paged API across ${ROWS} rows (more than two batches)`, async () => {
    const res = await get(`/ledger/export?workload_id=${workloadId}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson');
    expect(res.headers.get('transfer-encoding')).toBe('chunked');
    const lines = (await res.text()).split('\n');
    expect(lines.pop()).toBe('');
    const exported = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(exported).toHaveLength(ROWS);
    expect(exported).toEqual(await paged(`workload_id=${workloadId}`));
    expect(exported.find((e) => e.case_id === 'c-0')).toMatchObject({ cost_microusd: '9007199254740993' });
  });

  it('streams CSV with a header row and RFC 4180 quoting, within a time range, matching the paged API', async () => {
    const from = new Date(base + 100_000).toISOString();
    const to = new Date(base + 600_000).toISOString();
    const res = await get(`/ledger/export?workload_id=${workloadId}&from=${from}&to=${to}&format=csv`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const text = await res.text();
    const expected = await paged(`workload_id=${workloadId}&from=${from}&to=${to}`);
    expect(expected.length).toBeGreaterThan(EXPORT_BATCH_ROWS);
    const [header, ...rest] = text.split('\r\n');
    expect(rest.pop()).toBe('');
    const columns = header.split(',');
    expect(columns.slice(0, 3)).toEqual(['ledger_entry_id', 'attempt_id', 'action_id']);
    // a quoted field may hold a line break: records are the CRLF-ended pieces outside quotes
    expect(rest).toHaveLength(expected.length);
    expect(rest.map((r) => r.split(',')[0])).toEqual(expected.map((e) => e.ledger_entry_id));
    const attested = rest.find((r) => r.includes(',c-200,'));
    expect(attested).toContain(',9007199254740993,,,,,"ops, ""night""","invoice\nline 2",c-200,');
  });

  it('answers a bad request with a status before streaming, and only to finance or operators', async () => {
    const bad = await get(`/ledger/export?format=xml`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('format');
    expect((await get('/ledger/export', 'op_unknown')).status).toBe(401);
  });
});
