// Spend for the charts, from the public APIs: settled cost per workload and UTC day from the
// ledger (GET /api/settlement/ledger, one row per upstream attempt), and what is unresolved and
// reserved now per budget account from GET /api/reconciliation/exposure. The three are kept
// apart: never added together, never stacked in one bar.
import { api } from './api';

/** Every ledger row in [from, to) (ISO), following next_cursor (at most `maxPages` pages of 1000). */
export async function ledgerRows(from, to, maxPages = 50) {
  const rows = [];
  let cursor = null;
  for (let page = 0; page < maxPages; page++) {
    const q = new URLSearchParams({ from, to, limit: '1000', ...(cursor ? { cursor } : {}) });
    const body = await api('settlement', `/ledger?${q}`);
    rows.push(...body.entries);
    cursor = body.next_cursor;
    if (!cursor) return { rows, complete: true };
  }
  return { rows, complete: false };
}

/** Settled micro-USD per (workload, UTC day), summed as bigint; sorted by day then workload. */
export function settledByWorkloadDay(rows) {
  const sums = new Map();
  for (const r of rows) {
    const key = `${r.workload_id}\u0000${r.settled_at.slice(0, 10)}`;
    sums.set(key, (sums.get(key) ?? 0n) + BigInt(r.cost_microusd));
  }
  return [...sums.entries()]
    .map(([k, micro]) => {
      const [workload_id, day] = k.split('\u0000');
      return { workload_id, day, settled_microusd: micro.toString(), attempts: rows.filter((r) => r.workload_id === workload_id && r.settled_at.startsWith(day)).length };
    })
    .sort((a, b) => (a.day === b.day ? a.workload_id.localeCompare(b.workload_id) : a.day.localeCompare(b.day)));
}

export async function exposure() {
  return (await api('reconciliation', '/exposure')).accounts;
}

/** One bar per workload and day, grouped by day, coloured by workload (vega-lite). */
export function settledChart(points) {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Settled spend by workload and UTC day (micro-USD)',
    width: 'container',
    height: 220,
    data: { values: points.map((p) => ({ ...p, settled: Number(p.settled_microusd) })) },
    mark: { type: 'bar', tooltip: true },
    encoding: {
      x: { field: 'day', type: 'ordinal', title: 'UTC day' },
      xOffset: { field: 'workload_id' },
      y: { field: 'settled', type: 'quantitative', title: 'settled micro-USD' },
      color: { field: 'workload_id', type: 'nominal', title: 'workload' },
    },
  };
}

/** Settled, unresolved and reserved side by side per account: three bars, never one stacked sum. */
export function exposureChart(accounts) {
  const values = accounts.flatMap((a) => [
    { account: `${a.scope} ${a.scope_id}`, kind: 'settled', micro: Number(a.settled_microusd) },
    { account: `${a.scope} ${a.scope_id}`, kind: 'unresolved', micro: Number(a.unresolved_microusd) },
    { account: `${a.scope} ${a.scope_id}`, kind: 'reserved', micro: Number(a.pending_microusd) },
  ]);
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Budget accounts now: settled, unresolved and reserved kept apart (micro-USD)',
    width: 'container',
    height: 220,
    data: { values },
    mark: { type: 'bar', tooltip: true },
    encoding: {
      x: { field: 'account', type: 'nominal', title: 'budget account' },
      xOffset: { field: 'kind', sort: ['settled', 'unresolved', 'reserved'] },
      y: { field: 'micro', type: 'quantitative', title: 'micro-USD' },
      color: { field: 'kind', type: 'nominal', sort: ['settled', 'unresolved', 'reserved'], scale: { range: ['#2f6fde', '#e4572e', '#f3a712'] } },
    },
  };
}
