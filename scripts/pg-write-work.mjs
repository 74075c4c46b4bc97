// What Postgres wrote for a stretch of a bench, in counts that do not move with the box: WAL bytes,
// records and full-page images, and how many row updates of each table were HOT (the new version on
// the old one's page, no index entries). CPU per answer moves ±10–30 % between runs on these 2-core
// boxes; these counts repeat run after run, so they show a change to the write path that a rate
// cannot (bench/README.md, "A thirteenth box"). Used by scripts/bench.mjs (per run, per answer) and
// bench/settlement.ts (per phase, per event).
//
// `query(sql, params)` runs one statement on the bench database and returns its rows (a pg Pool's
// `query(...).rows`, or Prisma's `$queryRawUnsafe`), each in a transaction of its own, so each reads
// the statistics afresh.

/**
 * Where the WAL stands: the insert position (exact) and, from pg_stat_wal (Postgres 14+, null
 * before), the records and full-page images written so far and how many times the WAL was synced
 * to disk (`wal_sync`: each a commit's flush, or the WAL writer's). Backends report the latter at
 * most a second late, so over a short stretch read them as approximate; all are cluster-wide, so
 * they count whatever else the server does.
 */
export async function walPosition(query) {
  const [lsn] = await query('SELECT pg_current_wal_lsn()::text AS lsn');
  let stats = null;
  try {
    const [s] = await query('SELECT wal_records::float8 AS records, wal_fpi::float8 AS fpi, wal_sync::float8 AS syncs FROM pg_stat_wal');
    stats = { records: Number(s.records), fpi: Number(s.fpi), syncs: Number(s.syncs) };
  } catch {
    // Postgres 13 or older: bytes only
  }
  return { lsn: lsn.lsn, records: stats?.records ?? null, fpi: stats?.fpi ?? null, syncs: stats?.syncs ?? null };
}

/** WAL written since `from` (a walPosition): bytes, and records, full-page images and syncs when known. */
export async function walSince(query, from) {
  const to = await walPosition(query);
  const [d] = await query('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8 AS bytes', [to.lsn, from.lsn]);
  const delta = (a, b) => (a == null || b == null ? null : a - b);
  return {
    bytes: Number(d.bytes),
    records: delta(to.records, from.records),
    fpi: delta(to.fpi, from.fpi),
    syncs: delta(to.syncs, from.syncs),
    range: [from.lsn, to.lsn],
  };
}

/** Row updates and HOT updates so far of each of `tables` (pg_stat_user_tables: as late as the WAL counts). */
export async function updateCounts(query, tables) {
  const rows = await query(
    'SELECT relname, n_tup_upd::float8 AS upd, n_tup_hot_upd::float8 AS hot FROM pg_stat_user_tables WHERE relname = ANY($1::text[]) ORDER BY relname',
    [tables],
  );
  return Object.fromEntries(rows.map((r) => [r.relname, { updates: Number(r.upd), hot: Number(r.hot) }]));
}

/** Per table between two updateCounts: the updates and the share of them that were HOT (%, one decimal). */
export function hotShares(before, after) {
  return Object.entries(after).map(([table, a]) => {
    const updates = a.updates - (before[table]?.updates ?? 0);
    const hot = a.hot - (before[table]?.hot ?? 0);
    return { table, updates, hotPct: updates > 0 ? Math.round((hot * 1000) / updates) / 10 : 0 };
  });
}

/**
 * The WAL records between two positions (`range`, as walSince returns it) by what they changed:
 * per relation of this database (a table or an index; the first block a record touches names it)
 * and record type (Heap INSERT, HOT_UPDATE, LOCK; Btree INSERT_LEAF…), and per resource manager
 * and type for records that touch no block of this database (commits, other databases). Read with
 * pg_walinspect (Postgres 15+, in contrib), which a superuser can create in the bench database; null
 * where it cannot be had. Counts, not timings: a lock taken with FOR UPDATE, an index entry that a
 * HOT update would have spared, a page split, each is one line here.
 */
export async function walByRelation(query, range) {
  try {
    await query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  } catch {
    return null;
  }
  const rows = await query(
    `WITH r AS (
       SELECT resource_manager AS rm, record_type AS type, record_length,
              substring(block_ref FROM 'rel \\d+/(\\d+)/\\d+')::oid AS db,
              substring(block_ref FROM 'rel \\d+/\\d+/(\\d+)')::oid AS filenode
         FROM pg_get_wal_records_info($1::pg_lsn, least($2::pg_lsn, pg_current_wal_flush_lsn())))
     SELECT CASE WHEN r.db = d.oid THEN coalesce(pg_filenode_relation(0, r.filenode)::text, 'relfilenode ' || r.filenode) END AS relation,
            r.rm, r.type, count(*)::float8 AS records, sum(r.record_length)::float8 AS bytes
       FROM r CROSS JOIN (SELECT oid FROM pg_database WHERE datname = current_database()) d
      GROUP BY 1, 2, 3`,
    range,
  );
  return rows.map((r) => ({
    relation: r.relation === null ? null : String(r.relation).replace(/^"|"$/g, ''),
    rm: String(r.rm),
    type: String(r.type),
    records: Number(r.records),
    bytes: Number(r.bytes),
  }));
}

/**
 * walByRelation's rows per `unit` (an answer, an event), one line per relation (or resource
 * manager, for records that touch no relation of this database), most records first: records and
 * bytes per unit and the record types that made them, e.g. `{ name: 'ledger_entry', records: 1,
 * bytes: 260, types: 'INSERT 1' }`. Figures to `digits` decimals; lines under 0.05 per unit are
 * left out but counted in `rest`.
 */
export function walLines(rows, unit, digits = 2) {
  const by = new Map();
  for (const r of rows) {
    const name = r.relation ?? `(${r.rm})`;
    const line = by.get(name) ?? { name, records: 0, bytes: 0, types: new Map() };
    line.records += r.records;
    line.bytes += r.bytes;
    line.types.set(r.type, (line.types.get(r.type) ?? 0) + r.records);
    by.set(name, line);
  }
  const round = (n) => Math.round((n / unit) * 10 ** digits) / 10 ** digits;
  const lines = [...by.values()].sort((a, b) => b.records - a.records || a.name.localeCompare(b.name));
  const shown = lines.filter((l) => l.records / unit >= 0.05);
  const rest = lines.filter((l) => l.records / unit < 0.05).reduce((n, l) => n + l.records, 0);
  return {
    lines: shown.map((l) => ({
      name: l.name,
      records: round(l.records),
      bytes: Math.round(l.bytes / unit),
      types: [...l.types.entries()]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .map(([t, n]) => `${t} ${round(n)}`)
        .join(', '),
    })),
    rest: round(rest),
  };
}
