import { parse } from 'csv-parse/sync';
import { AttemptComparison, attemptDifferences, AuditInput, auditReport, auditReportCsv } from './audit';

const W = 'wl-a';
const R = 'route-1';
const empty: AuditInput = {
  from: '2026-11-23',
  to: '2026-11-29',
  reservations: [],
  ledger: [],
  topic: [],
  exports: [],
  counts: [],
  output: [],
  attempts: [],
  unmatchedExportLines: [],
  unresolvedReservations: [],
  truncated: false,
};

const attempt = (over: Partial<AttemptComparison>): AttemptComparison => ({
  workloadId: W,
  routeId: R,
  attemptId: 'at-1',
  actionId: 'ac-1',
  ledger: { entryId: 'le-1', costMicrousd: 100n },
  events: [{ eventId: 'ev-1', costMicrousd: 100n }],
  exportLines: [],
  ...over,
});

describe('attemptDifferences', () => {
  it('finds nothing when the ledger row has one event and one export line of its cost', () => {
    expect(attemptDifferences(attempt({ exportLines: [{ providerRequestId: 'req-1', costMicrousd: 100n }] }))).toEqual([]);
  });

  it.each([
    ['event_without_ledger_row', { ledger: null }, { event_id: 'ev-1', topic_microusd: '100', ledger_microusd: null }],
    ['ledger_row_without_event', { events: [] }, { event_id: null, ledger_microusd: '100', topic_microusd: null }],
    ['event_cost_differs', { events: [{ eventId: 'ev-1', costMicrousd: 90n }] }, { ledger_microusd: '100', topic_microusd: '90' }],
    [
      'export_cost_differs',
      { exportLines: [{ providerRequestId: 'req-1', costMicrousd: 130n }] },
      { provider_request_id: 'req-1', ledger_microusd: '100', export_microusd: '130' },
    ],
    [
      'export_line_unpriced',
      { exportLines: [{ providerRequestId: 'req-1', costMicrousd: null }] },
      { provider_request_id: 'req-1', export_microusd: null },
    ],
    [
      'export_line_without_ledger_row',
      { ledger: null, events: [], exportLines: [{ providerRequestId: 'req-1', costMicrousd: 40n }] },
      { provider_request_id: 'req-1', ledger_microusd: null, export_microusd: '40', ledger_entry_id: null },
    ],
  ] as const)('%s', (kind, over, sides) => {
    expect(attemptDifferences(attempt(over as Partial<AttemptComparison>))).toEqual([
      expect.objectContaining({ kind, workload_id: W, route_id: R, attempt_id: 'at-1', action_id: 'ac-1', ...sides }),
    ]);
  });

  it('lists each of a repeated event, even when one of them equals the ledger', () => {
    const d = attemptDifferences(
      attempt({
        events: [
          { eventId: 'ev-1', costMicrousd: 100n },
          { eventId: 'ev-2', costMicrousd: 100n },
        ],
      }),
    );
    expect(d.map((x) => [x.kind, x.event_id, x.ledger_microusd, x.topic_microusd])).toEqual([
      ['event_repeated', 'ev-1', '100', '100'],
      ['event_repeated', 'ev-2', '100', '100'],
    ]);
  });

  it('an event without ledger row and an export line for the same attempt are two entries', () => {
    const d = attemptDifferences(attempt({ ledger: null, exportLines: [{ providerRequestId: 'req-9', costMicrousd: 100n }] }));
    expect(d.map((x) => x.kind)).toEqual(['event_without_ledger_row', 'export_line_without_ledger_row']);
  });
});

describe('auditReport', () => {
  it('puts every source side by side per workload × route with known totals', () => {
    const r = auditReport({
      ...empty,
      reservations: [
        {
          workloadId: W,
          routeId: R,
          made: 4,
          pending: 0,
          settled: 2,
          released: 1,
          unresolved: 1,
          voided: 0,
          reservedMicrousd: 4000n,
          settledMicrousd: 250n,
          releasedMicrousd: 3000n,
          unresolvedMicrousd: 700n,
        },
      ],
      ledger: [{ workloadId: W, routeId: R, items: 3, costMicrousd: 250n }],
      topic: [{ workloadId: W, routeId: R, items: 3, costMicrousd: 250n }],
      exports: [{ workloadId: W, routeId: R, items: 2, costMicrousd: 200n }],
      counts: [{ workloadId: W, routeId: R, requested: { omitted: 2, '3': 1 }, admitted: 3, refused: 1, effectiveTotal: 5 }],
      output: [{ workloadId: W, routeId: R, stats: { requests: 3, mean: 123.456, p50: 100, p95: 170 }, returnedTotal: 5 }],
      unresolvedReservations: [{ workloadId: W, routeId: R, reservationId: 'rs-4', actionId: 'ac-4', unresolvedMicrousd: 700n }],
    });
    expect(r.rows).toEqual([
      {
        workload_id: W,
        route_id: R,
        reservations: {
          made: 4,
          pending: 0,
          settled: 2,
          released: 1,
          unresolved: 1,
          voided: 0,
          reserved_microusd: '4000',
          settled_microusd: '250',
          released_microusd: '3000',
          unresolved_microusd: '700',
        },
        ledger: { entries: 3, cost_microusd: '250' },
        topic: { events: 3, cost_microusd: '250' },
        export: { lines: 2, cost_microusd: '200' },
        counts: { requested: { omitted: 2, '3': 1 }, admitted: 3, refused: 1, effective_total: 5, returned_total: 5 },
        output_per_request: { requests: 3, mean: 123.46, p50: 100, p95: 170 },
        differences: 1,
      },
    ]);
    expect(r.differences).toEqual([
      expect.objectContaining({ kind: 'reservation_unresolved', reservation_id: 'rs-4', action_id: 'ac-4', unresolved_microusd: '700' }),
    ]);
  });

  it('lists two opposite differences whose totals net to zero, both of them', () => {
    // attempt 1: the event says 5 more than the ledger; attempt 2: 5 less. Ledger and topic totals agree.
    const r = auditReport({
      ...empty,
      ledger: [{ workloadId: W, routeId: R, items: 2, costMicrousd: 300n }],
      topic: [{ workloadId: W, routeId: R, items: 2, costMicrousd: 300n }],
      attempts: [
        attempt({ attemptId: 'at-1', ledger: { entryId: 'le-1', costMicrousd: 100n }, events: [{ eventId: 'ev-1', costMicrousd: 105n }] }),
        attempt({ attemptId: 'at-2', ledger: { entryId: 'le-2', costMicrousd: 200n }, events: [{ eventId: 'ev-2', costMicrousd: 195n }] }),
      ],
    });
    expect(r.rows[0].ledger.cost_microusd).toBe(r.rows[0].topic.cost_microusd);
    expect(r.rows[0].differences).toBe(2);
    expect(r.differences.map((d) => [d.kind, d.attempt_id, d.ledger_microusd, d.topic_microusd])).toEqual([
      ['event_cost_differs', 'at-1', '100', '105'],
      ['event_cost_differs', 'at-2', '200', '195'],
    ]);
  });

  it('gives an unmatched export line a row of its own and sorts rows and differences', () => {
    const r = auditReport({
      ...empty,
      exports: [
        { workloadId: 'wl-b', routeId: R, items: 1, costMicrousd: 10n },
        { workloadId: '', routeId: '', items: 1, costMicrousd: 0n },
      ],
      ledger: [{ workloadId: W, routeId: R, items: 1, costMicrousd: 100n }],
      unmatchedExportLines: [{ providerRequestId: 'req-x', clientRequestId: null }],
      attempts: [attempt({ events: [] })],
    });
    expect(r.rows.map((x) => [x.workload_id, x.route_id, x.export, x.differences])).toEqual([
      ['', '', { lines: 1, cost_microusd: '0' }, 1],
      [W, R, null, 1],
      ['wl-b', R, { lines: 1, cost_microusd: '10' }, 0],
    ]);
    expect(r.differences.map((d) => d.kind)).toEqual(['export_line_unmatched', 'ledger_row_without_event']);
  });
});

describe('auditReportCsv', () => {
  it('writes the rows and, after a blank line, one line per difference, in the JSON figures', () => {
    const wire = auditReport({
      ...empty,
      ledger: [{ workloadId: W, routeId: 'r,"1"', items: 1, costMicrousd: 100n }],
      attempts: [attempt({ routeId: 'r,"1"', events: [] })],
      truncated: true,
    });
    const csv = auditReportCsv(wire);
    const [rowsPart, diffPart] = csv.split('\r\n\r\n');
    const rows = parse(rowsPart, { columns: true }) as Array<Record<string, string>>;
    expect(rows).toEqual([
      expect.objectContaining({
        workload_id: W,
        route_id: 'r,"1"',
        ledger_entries: '1',
        ledger_microusd: '100',
        topic_microusd: '0',
        export_lines: '',
        differences: '1',
      }),
    ]);
    const diffs = parse(diffPart, { columns: true, relax_column_count: true }) as Array<Record<string, string>>;
    expect(diffs[0]).toEqual(
      expect.objectContaining({
        kind: 'ledger_row_without_event',
        attempt_id: 'at-1',
        ledger_entry_id: 'le-1',
        ledger_microusd: '100',
        topic_microusd: '',
      }),
    );
    expect(diffs).toHaveLength(2);
    expect(diffs[1].kind).toBe('differences_truncated');
  });
});
