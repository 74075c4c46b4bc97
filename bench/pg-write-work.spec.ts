import { hotShares, Query, walByRelation, walLines, walSince } from '../scripts/pg-write-work.mjs';

describe('hotShares', () => {
  it('is the share of the updates between two readings that were HOT, per table', () => {
    const before = { action: { updates: 100, hot: 0 }, attempt: { updates: 1_000, hot: 200 } };
    const after = { action: { updates: 300, hot: 0 }, attempt: { updates: 1_400, hot: 500 }, reservation: { updates: 3, hot: 1 } };
    expect(hotShares(before, after)).toEqual([
      { table: 'action', updates: 200, hotPct: 0 },
      { table: 'attempt', updates: 400, hotPct: 75 },
      // a table missing from the first reading counts from zero
      { table: 'reservation', updates: 3, hotPct: 33.3 },
    ]);
  });

  it('reads 0 % for a table with no updates in between, not a division by zero', () => {
    expect(hotShares({ action: { updates: 5, hot: 5 } }, { action: { updates: 5, hot: 5 } })).toEqual([
      { table: 'action', updates: 0, hotPct: 0 },
    ]);
  });
});

describe('walSince', () => {
  it('gives bytes from the WAL positions and records only when the server counts them', async () => {
    const answers: Record<string, Array<Record<string, unknown>>> = {
      'SELECT pg_current_wal_lsn()::text AS lsn': [{ lsn: '0/2000' }],
      'SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8 AS bytes': [{ bytes: 4096 }],
    };
    const asked: unknown[][] = [];
    // pg_stat_wal missing (Postgres 13): its statement fails
    const query: Query = async (sql, params = []) => {
      asked.push([sql, params]);
      const rows = answers[sql];
      if (!rows) throw new Error(`relation "pg_stat_wal" does not exist`);
      return rows;
    };
    const wal = await walSince(query, { lsn: '0/1000', records: null, fpi: null });
    expect(wal).toEqual({ bytes: 4096, records: null, fpi: null, syncs: null, range: ['0/1000', '0/2000'] });
    expect(asked).toContainEqual(['SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8 AS bytes', ['0/2000', '0/1000']]);
  });

  it('gives no record count when the first reading had none, rather than counting from zero', async () => {
    const query: Query = async (sql) => {
      if (sql.includes('pg_current_wal_lsn')) return [{ lsn: '0/3000' }];
      if (sql.includes('pg_stat_wal')) return [{ records: 150, fpi: 2, syncs: 40 }];
      return [{ bytes: 8192 }];
    };
    const wal = await walSince(query, { lsn: '0/1000', records: null, fpi: null });
    expect(wal.records).toBeNull();
    expect(wal.fpi).toBeNull();
    expect(wal.syncs).toBeNull();
  });

  it('subtracts the records, full-page images and syncs of the two readings', async () => {
    const query: Query = async (sql) => {
      if (sql.includes('pg_current_wal_lsn')) return [{ lsn: '0/3000' }];
      if (sql.includes('pg_stat_wal')) return [{ records: 150, fpi: 2, syncs: 40 }];
      return [{ bytes: 8192 }];
    };
    expect(await walSince(query, { lsn: '0/1000', records: 100, fpi: 2, syncs: 15 })).toEqual({
      bytes: 8192,
      records: 50,
      fpi: 0,
      syncs: 25,
      range: ['0/1000', '0/3000'],
    });
  });
});

describe('walLines', () => {
  const rows = [
    { relation: 'ledger_entry', rm: 'Heap', type: 'INSERT', records: 100, bytes: 26_000 },
    { relation: 'attempt', rm: 'Heap', type: 'UPDATE', records: 100, bytes: 9_000 },
    { relation: 'attempt', rm: 'Heap', type: 'LOCK', records: 100, bytes: 5_400 },
    { relation: 'attempt', rm: 'Heap', type: 'HOT_UPDATE', records: 20, bytes: 1_400 },
    { relation: 'ledger_entry_attempt_id_key', rm: 'Btree', type: 'INSERT_LEAF', records: 100, bytes: 7_000 },
    { relation: null, rm: 'Transaction', type: 'COMMIT', records: 40, bytes: 1_360 },
    { relation: null, rm: 'Standby', type: 'RUNNING_XACTS', records: 2, bytes: 100 },
  ];

  it('sums each relation per unit, most records first, and names the record types that made them', () => {
    const { lines, rest } = walLines(rows, 100);
    expect(lines).toEqual([
      { name: 'attempt', records: 2.2, bytes: 158, types: 'LOCK 1, UPDATE 1, HOT_UPDATE 0.2' },
      { name: 'ledger_entry', records: 1, bytes: 260, types: 'INSERT 1' },
      { name: 'ledger_entry_attempt_id_key', records: 1, bytes: 70, types: 'INSERT_LEAF 1' },
      // records that touch no relation of the database: by resource manager
      { name: '(Transaction)', records: 0.4, bytes: 14, types: 'COMMIT 0.4' },
    ]);
    // the standby's 0.02 per unit is under the line, counted apart
    expect(rest).toBe(0.02);
  });

  it('reads nothing from no records', () => {
    expect(walLines([], 10)).toEqual({ lines: [], rest: 0 });
  });
});

describe('walByRelation', () => {
  it('is null where pg_walinspect cannot be created, without reading the WAL', async () => {
    const asked: string[] = [];
    const query: Query = async (sql) => {
      asked.push(sql);
      throw new Error('permission denied to create extension "pg_walinspect"');
    };
    expect(await walByRelation(query, ['0/1000', '0/2000'])).toBeNull();
    expect(asked).toHaveLength(1);
  });

  it('reads the range it is given and keeps records of no relation apart, unquoting quoted names', async () => {
    const params: unknown[][] = [];
    const query: Query = async (sql, p = []) => {
      if (sql.startsWith('CREATE EXTENSION')) return [];
      params.push(p);
      return [
        { relation: '"Attempt"', rm: 'Heap', type: 'INSERT', records: 3, bytes: 195 },
        { relation: null, rm: 'Transaction', type: 'COMMIT', records: '1', bytes: '34' },
      ];
    };
    expect(await walByRelation(query, ['0/1000', '0/2000'])).toEqual([
      { relation: 'Attempt', rm: 'Heap', type: 'INSERT', records: 3, bytes: 195 },
      { relation: null, rm: 'Transaction', type: 'COMMIT', records: 1, bytes: 34 },
    ]);
    expect(params).toEqual([['0/1000', '0/2000']]);
  });
});
