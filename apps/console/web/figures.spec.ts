import fc from 'fast-check';
import { exposureChart, LedgerEntry, settledByWorkloadDay, usd } from './figures';

const entry = (workload_id: string, settled_at: string, cost_microusd: string): LedgerEntry => ({ workload_id, settled_at, cost_microusd });

describe('settledByWorkloadDay', () => {
  it('sums per workload and UTC day (a late-evening entry in another zone stays on its UTC day), exactly', () => {
    const points = settledByWorkloadDay([
      entry('b', '2026-12-02T10:00:00.000Z', '9007199254740993'), // above 2^53: a float would round it
      entry('a', '2026-12-02T23:59:59.999Z', '5'),
      entry('b', '2026-12-02T01:00:00.000Z', '1'),
      entry('a', '2026-12-01T23:00:00-02:00', '7'), // 2026-12-02T01:00Z
      entry('a', '2026-12-01T12:00:00.000Z', '3'),
    ]);
    expect(points).toEqual([
      { workload_id: 'a', day: '2026-12-01', attempts: 1, settled_microusd: '3' },
      { workload_id: 'a', day: '2026-12-02', attempts: 2, settled_microusd: '12' },
      { workload_id: 'b', day: '2026-12-02', attempts: 2, settled_microusd: '9007199254740994' },
    ]);
  });

  it('loses and invents nothing: the points add up to the entries, attempt for attempt and micro-dollar for micro-dollar', () => {
    const arb = fc.array(
      fc.record({
        workload_id: fc.constantFrom('w1', 'w2', 'w\u0000x', 'w3'),
        settled_at: fc.integer({ min: Date.UTC(2026, 0, 1), max: Date.UTC(2027, 0, 1) }).map((t) => new Date(t).toISOString()),
        cost_microusd: fc.bigInt({ min: 0n, max: 10n ** 15n }).map(String),
      }),
      { maxLength: 60 },
    );
    fc.assert(
      fc.property(arb, (rows) => {
        const points = settledByWorkloadDay(rows);
        expect(points.reduce((s, p) => s + BigInt(p.settled_microusd), 0n)).toBe(rows.reduce((s, r) => s + BigInt(r.cost_microusd), 0n));
        expect(points.reduce((s, p) => s + p.attempts, 0)).toBe(rows.length);
        expect(new Set(points.map((p) => `${p.workload_id}|${p.day}`)).size).toBe(points.length);
      }),
    );
  });
});

describe('usd', () => {
  it('formats micro-USD exactly, beyond 2^53 and negative', () => {
    expect(usd('0')).toBe('$0.000000');
    expect(usd('1234567')).toBe('$1.234567');
    expect(usd(9007199254740993n)).toBe('$9007199254.740993');
    expect(usd('-5')).toBe('−$0.000005');
  });
});

describe('exposureChart', () => {
  it('keeps settled, unresolved and reserved as three separate, unstacked values per account', () => {
    const spec = exposureChart([
      { scope: 'workload', scope_id: 'w1', settled_microusd: '10', unresolved_microusd: '20', pending_microusd: '30' },
    ]);
    expect(spec.data.values).toEqual([
      { account: 'workload w1', kind: 'settled', micro: 10 },
      { account: 'workload w1', kind: 'unresolved', micro: 20 },
      { account: 'workload w1', kind: 'reserved', micro: 30 },
    ]);
    expect(spec.encoding.xOffset.field).toBe('kind'); // side by side, not a stacked bar
  });
});
