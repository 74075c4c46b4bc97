// The console's arithmetic and chart specs, pure (no browser globals) so they are unit-tested
// beside the server (figures.spec.ts); esbuild bundles this TypeScript with the rest of the web app.

export interface LedgerEntry {
  workload_id: string;
  settled_at: string;
  cost_microusd: string;
}

export interface SettledPoint {
  workload_id: string;
  day: string;
  attempts: number;
  settled_microusd: string;
}

export interface ExposureAccount {
  scope: string;
  scope_id: string;
  settled_microusd: string;
  unresolved_microusd: string;
  pending_microusd: string;
}

/** Micro-USD (a decimal string or bigint) as dollars, exactly: 1234567 → "$1.234567". */
export function usd(micro: string | bigint): string {
  const v = BigInt(micro);
  const neg = v < 0n;
  const a = neg ? -v : v;
  return `${neg ? '−' : ''}$${a / 1_000_000n}.${String(a % 1_000_000n).padStart(6, '0')}`;
}

/** Settled micro-USD and attempts per (workload, UTC day of settled_at), summed as bigint; by day, then workload. */
export function settledByWorkloadDay(rows: readonly LedgerEntry[]): SettledPoint[] {
  const groups = new Map<string, { workload_id: string; day: string; attempts: number; micro: bigint }>();
  for (const r of rows) {
    const day = new Date(r.settled_at).toISOString().slice(0, 10);
    const key = JSON.stringify([r.workload_id, day]);
    const g = groups.get(key) ?? { workload_id: r.workload_id, day, attempts: 0, micro: 0n };
    g.attempts += 1;
    g.micro += BigInt(r.cost_microusd);
    groups.set(key, g);
  }
  return [...groups.values()]
    .sort((a, b) =>
      a.day === b.day ? (a.workload_id < b.workload_id ? -1 : a.workload_id > b.workload_id ? 1 : 0) : a.day < b.day ? -1 : 1,
    )
    .map((g) => ({ workload_id: g.workload_id, day: g.day, attempts: g.attempts, settled_microusd: g.micro.toString() }));
}

/** One bar per workload and day, grouped by day, coloured by workload (vega-lite). */
export function settledChart(points: readonly SettledPoint[]) {
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

export const EXPOSURE_KINDS = ['settled', 'unresolved', 'reserved'] as const;

/** Settled, unresolved and reserved side by side per account: three bars, never one stacked sum. */
export function exposureChart(accounts: readonly ExposureAccount[]) {
  const values = accounts.flatMap((a) => {
    const account = `${a.scope} ${a.scope_id}`;
    return [
      { account, kind: 'settled', micro: Number(a.settled_microusd) },
      { account, kind: 'unresolved', micro: Number(a.unresolved_microusd) },
      { account, kind: 'reserved', micro: Number(a.pending_microusd) },
    ];
  });
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Budget accounts now: settled, unresolved and reserved kept apart (micro-USD)',
    width: 'container',
    height: 220,
    data: { values },
    mark: { type: 'bar', tooltip: true },
    encoding: {
      x: { field: 'account', type: 'nominal', title: 'budget account' },
      xOffset: { field: 'kind', sort: [...EXPOSURE_KINDS] },
      y: { field: 'micro', type: 'quantitative', title: 'micro-USD' },
      color: { field: 'kind', type: 'nominal', sort: [...EXPOSURE_KINDS], scale: { range: ['#2f6fde', '#e4572e', '#f3a712'] } },
    },
  };
}
