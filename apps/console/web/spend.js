// Spend for the charts, from the public APIs: settled cost per workload and UTC day from the
// ledger (GET /api/settlement/ledger, one entry per upstream attempt), and what is unresolved and
// reserved now per budget account from GET /api/reconciliation/exposure. The three are kept
// apart: never added together, never stacked in one bar (figures.ts).
import { api } from './api';

/** Every ledger entry in [from, to) (ISO), following next_cursor (at most `maxPages` pages of 1000). */
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

export async function exposure() {
  return (await api('reconciliation', '/exposure')).accounts;
}
