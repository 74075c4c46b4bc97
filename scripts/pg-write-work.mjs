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
 * before), the records and full-page images written so far. Backends report the latter at most a
 * second late, so over a short stretch read them as approximate; both are cluster-wide, so they count
 * whatever else the server does.
 */
export async function walPosition(query) {
  const [lsn] = await query('SELECT pg_current_wal_lsn()::text AS lsn');
  let stats = null;
  try {
    const [s] = await query('SELECT wal_records::float8 AS records, wal_fpi::float8 AS fpi FROM pg_stat_wal');
    stats = { records: Number(s.records), fpi: Number(s.fpi) };
  } catch {
    // Postgres 13 or older: bytes only
  }
  return { lsn: lsn.lsn, records: stats?.records ?? null, fpi: stats?.fpi ?? null };
}

/** WAL written since `from` (a walPosition): bytes, and records and full-page images when known. */
export async function walSince(query, from) {
  const to = await walPosition(query);
  const [d] = await query('SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::float8 AS bytes', [to.lsn, from.lsn]);
  const delta = (a, b) => (a === null || b === null ? null : a - b);
  return { bytes: Number(d.bytes), records: delta(to.records, from.records), fpi: delta(to.fpi, from.fpi), range: [from.lsn, to.lsn] };
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
