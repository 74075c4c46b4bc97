import { csvRow } from './csv';
import { COUNT_CATEGORIES, OutputStats } from './controls';

/**
 * The weekly audit (issue 13): per workload × route, what the reservations, the ledger, the
 * settled topic (as reconciliation received it) and the imported provider exports say for a
 * period, side by side; and every item on which two of them disagree, one entry each, with its ids
 * and both sides. Nothing here subtracts one source from another: a figure that nets a +5 on one
 * attempt against a −5 on another would read as agreement, so the totals stay apart and the
 * differences are listed, never summed.
 */

export interface AuditKey {
  workloadId: string;
  /** '' when the item names no route (an export line that matched no attempt) */
  routeId: string;
}

export interface ReservationTotals extends AuditKey {
  made: number;
  pending: number;
  settled: number;
  released: number;
  unresolved: number;
  voided: number;
  reservedMicrousd: bigint;
  settledMicrousd: bigint;
  releasedMicrousd: bigint;
  unresolvedMicrousd: bigint;
}

export interface SourceTotals extends AuditKey {
  /** ledger rows, settled events or export lines */
  items: number;
  costMicrousd: bigint;
}

export interface CountTotals extends AuditKey {
  /** decisions (allow or deny) by the requested count as sent: `omitted`, `1` … `8`, `9+` */
  requested: Readonly<Record<string, number>>;
  admitted: number;
  refused: number;
  /** sum of the effective counts of admitted requests */
  effectiveTotal: number;
}

export interface OutputTotals extends AuditKey {
  stats: OutputStats;
  /** sum over the actions of the candidates returned */
  returnedTotal: number;
}

/**
 * One attempt as the three money sources see it, for attempts where they might disagree (the
 * repository leaves out the ones whose ledger row has exactly one settled event of the same cost
 * and no export line, or only agreeing ones).
 */
export interface AttemptComparison extends AuditKey {
  attemptId: string;
  actionId: string | null;
  ledger: { entryId: string; costMicrousd: bigint } | null;
  events: ReadonlyArray<{ eventId: string; costMicrousd: bigint }>;
  /** export lines matched to this attempt; cost null when the import could not price the line */
  exportLines: ReadonlyArray<{ providerRequestId: string; costMicrousd: bigint | null }>;
}

export interface UnmatchedExportLine {
  providerRequestId: string;
  clientRequestId: string | null;
}

export interface UnresolvedReservation extends AuditKey {
  reservationId: string;
  actionId: string;
  unresolvedMicrousd: bigint;
}

export interface AuditInput {
  from: string;
  to: string;
  reservations: readonly ReservationTotals[];
  ledger: readonly SourceTotals[];
  topic: readonly SourceTotals[];
  exports: readonly SourceTotals[];
  counts: readonly CountTotals[];
  output: readonly OutputTotals[];
  attempts: readonly AttemptComparison[];
  unmatchedExportLines: readonly UnmatchedExportLine[];
  unresolvedReservations: readonly UnresolvedReservation[];
  /** true when the repository stopped reading differences at its limit */
  truncated: boolean;
}

export const AUDIT_DIFFERENCE_KINDS = [
  /** a settled event whose attempt has no ledger row in the period */
  'event_without_ledger_row',
  /** a ledger row of the period no settled event was received for */
  'ledger_row_without_event',
  /** more than one settled event for one attempt (each listed) */
  'event_repeated',
  /** the attempt's one settled event costs other than its ledger row */
  'event_cost_differs',
  /** an export line whose attempt has no ledger row in the period */
  'export_line_without_ledger_row',
  /** an export line priced (at the attempt's revision) other than the ledger row */
  'export_cost_differs',
  /** an export line the import could not price (its attempt has no price revision) */
  'export_line_unpriced',
  /** more than one export line names the attempt (each listed) */
  'export_line_repeated',
  /** an export line that names no attempt of the gateway: spend the gateway never saw */
  'export_line_unmatched',
  /** a reservation of the period still holding unresolved exposure */
  'reservation_unresolved',
] as const;
export type AuditDifferenceKind = (typeof AUDIT_DIFFERENCE_KINDS)[number];

/** One disagreeing item: its ids and the figures of each side it involves (null: not this item's side). */
export interface AuditDifference {
  kind: AuditDifferenceKind;
  workload_id: string;
  route_id: string;
  action_id: string | null;
  attempt_id: string | null;
  ledger_entry_id: string | null;
  event_id: string | null;
  provider_request_id: string | null;
  reservation_id: string | null;
  ledger_microusd: string | null;
  topic_microusd: string | null;
  export_microusd: string | null;
  unresolved_microusd: string | null;
}

export interface AuditRow {
  workload_id: string;
  route_id: string;
  reservations: {
    made: number;
    pending: number;
    settled: number;
    released: number;
    unresolved: number;
    voided: number;
    reserved_microusd: string;
    settled_microusd: string;
    released_microusd: string;
    unresolved_microusd: string;
  };
  ledger: { entries: number; cost_microusd: string };
  topic: { events: number; cost_microusd: string };
  /** null when no export line of the period was imported for this workload × route */
  export: { lines: number; cost_microusd: string } | null;
  counts: { requested: Record<string, number>; admitted: number; refused: number; effective_total: number; returned_total: number };
  /** output tokens per request (all attempts, all candidates); null when no action with known output settled */
  output_per_request: { requests: number; mean: number; p50: number; p95: number } | null;
  /** how many entries of `differences` are about this workload × route */
  differences: number;
}

export interface AuditReportWire {
  from: string;
  to: string;
  rows: AuditRow[];
  differences: AuditDifference[];
  differences_truncated: boolean;
}

const keyOf = (k: AuditKey) => JSON.stringify([k.workloadId, k.routeId]);

function difference(
  kind: AuditDifferenceKind,
  key: AuditKey,
  fields: Partial<Omit<AuditDifference, 'kind' | 'workload_id' | 'route_id'>>,
): AuditDifference {
  return {
    kind,
    workload_id: key.workloadId,
    route_id: key.routeId,
    action_id: null,
    attempt_id: null,
    ledger_entry_id: null,
    event_id: null,
    provider_request_id: null,
    reservation_id: null,
    ledger_microusd: null,
    topic_microusd: null,
    export_microusd: null,
    unresolved_microusd: null,
    ...fields,
  };
}

/** Every disagreement of one attempt, one entry per event or export line involved. */
export function attemptDifferences(a: AttemptComparison): AuditDifference[] {
  const out: AuditDifference[] = [];
  const ids = { action_id: a.actionId, attempt_id: a.attemptId, ledger_entry_id: a.ledger?.entryId ?? null };
  const ledgerMicrousd = a.ledger ? a.ledger.costMicrousd.toString() : null;
  if (a.ledger === null) {
    for (const e of a.events) {
      out.push(difference('event_without_ledger_row', a, { ...ids, event_id: e.eventId, topic_microusd: e.costMicrousd.toString() }));
    }
  } else if (a.events.length === 0) {
    out.push(difference('ledger_row_without_event', a, { ...ids, ledger_microusd: ledgerMicrousd }));
  } else if (a.events.length > 1) {
    for (const e of a.events) {
      out.push(
        difference('event_repeated', a, {
          ...ids,
          event_id: e.eventId,
          ledger_microusd: ledgerMicrousd,
          topic_microusd: e.costMicrousd.toString(),
        }),
      );
    }
  } else if (a.events[0].costMicrousd !== a.ledger.costMicrousd) {
    const e = a.events[0];
    out.push(
      difference('event_cost_differs', a, {
        ...ids,
        event_id: e.eventId,
        ledger_microusd: ledgerMicrousd,
        topic_microusd: e.costMicrousd.toString(),
      }),
    );
  }
  for (const x of a.exportLines) {
    const side = {
      ...ids,
      provider_request_id: x.providerRequestId,
      ledger_microusd: ledgerMicrousd,
      export_microusd: x.costMicrousd?.toString() ?? null,
    };
    if (a.exportLines.length > 1) out.push(difference('export_line_repeated', a, side));
    else if (a.ledger === null) out.push(difference('export_line_without_ledger_row', a, side));
    else if (x.costMicrousd === null) out.push(difference('export_line_unpriced', a, side));
    else if (x.costMicrousd !== a.ledger.costMicrousd) out.push(difference('export_cost_differs', a, side));
  }
  return out;
}

const DIFFERENCE_ORDER = new Map(AUDIT_DIFFERENCE_KINDS.map((k, i) => [k, i]));

/**
 * The audit report from the repository's totals and comparison rows: one row per workload × route
 * any source mentions, sorted; the differences sorted by workload, route, kind and ids.
 */
export function auditReport(input: AuditInput): AuditReportWire {
  const differences: AuditDifference[] = [
    ...input.attempts.flatMap(attemptDifferences),
    ...input.unmatchedExportLines.map((x) =>
      difference('export_line_unmatched', { workloadId: '', routeId: '' }, { provider_request_id: x.providerRequestId, attempt_id: null }),
    ),
    ...input.unresolvedReservations.map((r) =>
      difference('reservation_unresolved', r, {
        action_id: r.actionId,
        reservation_id: r.reservationId,
        unresolved_microusd: r.unresolvedMicrousd.toString(),
      }),
    ),
  ].sort(
    (a, b) =>
      a.workload_id.localeCompare(b.workload_id) ||
      a.route_id.localeCompare(b.route_id) ||
      (DIFFERENCE_ORDER.get(a.kind) ?? 0) - (DIFFERENCE_ORDER.get(b.kind) ?? 0) ||
      (a.attempt_id ?? '').localeCompare(b.attempt_id ?? '') ||
      (a.event_id ?? a.provider_request_id ?? a.reservation_id ?? '').localeCompare(
        b.event_id ?? b.provider_request_id ?? b.reservation_id ?? '',
      ),
  );

  const rows = new Map<string, AuditRow>();
  const rowOf = (k: AuditKey): AuditRow => {
    const id = keyOf(k);
    let row = rows.get(id);
    if (!row) {
      row = {
        workload_id: k.workloadId,
        route_id: k.routeId,
        reservations: {
          made: 0,
          pending: 0,
          settled: 0,
          released: 0,
          unresolved: 0,
          voided: 0,
          reserved_microusd: '0',
          settled_microusd: '0',
          released_microusd: '0',
          unresolved_microusd: '0',
        },
        ledger: { entries: 0, cost_microusd: '0' },
        topic: { events: 0, cost_microusd: '0' },
        export: null,
        counts: { requested: {}, admitted: 0, refused: 0, effective_total: 0, returned_total: 0 },
        output_per_request: null,
        differences: 0,
      };
      rows.set(id, row);
    }
    return row;
  };
  const add = (a: string, b: bigint) => (BigInt(a) + b).toString();
  for (const r of input.reservations) {
    const x = rowOf(r).reservations;
    x.made += r.made;
    x.pending += r.pending;
    x.settled += r.settled;
    x.released += r.released;
    x.unresolved += r.unresolved;
    x.voided += r.voided;
    x.reserved_microusd = add(x.reserved_microusd, r.reservedMicrousd);
    x.settled_microusd = add(x.settled_microusd, r.settledMicrousd);
    x.released_microusd = add(x.released_microusd, r.releasedMicrousd);
    x.unresolved_microusd = add(x.unresolved_microusd, r.unresolvedMicrousd);
  }
  for (const l of input.ledger) {
    const x = rowOf(l).ledger;
    x.entries += l.items;
    x.cost_microusd = add(x.cost_microusd, l.costMicrousd);
  }
  for (const t of input.topic) {
    const x = rowOf(t).topic;
    x.events += t.items;
    x.cost_microusd = add(x.cost_microusd, t.costMicrousd);
  }
  for (const e of input.exports) {
    const row = rowOf(e);
    row.export = { lines: (row.export?.lines ?? 0) + e.items, cost_microusd: add(row.export?.cost_microusd ?? '0', e.costMicrousd) };
  }
  for (const c of input.counts) {
    const x = rowOf(c).counts;
    for (const [k, n] of Object.entries(c.requested)) x.requested[k] = (x.requested[k] ?? 0) + n;
    x.admitted += c.admitted;
    x.refused += c.refused;
    x.effective_total += c.effectiveTotal;
  }
  for (const o of input.output) {
    const row = rowOf(o);
    row.counts.returned_total += o.returnedTotal;
    row.output_per_request = { ...o.stats, mean: Math.round(o.stats.mean * 100) / 100 };
  }
  for (const d of differences) rowOf({ workloadId: d.workload_id, routeId: d.route_id }).differences += 1;
  return {
    from: input.from,
    to: input.to,
    rows: [...rows.values()].sort((a, b) => a.workload_id.localeCompare(b.workload_id) || a.route_id.localeCompare(b.route_id)),
    differences,
    differences_truncated: input.truncated,
  };
}

const ROW_COLUMNS: Array<[string, (r: AuditRow) => string | number | null]> = [
  ['workload_id', (r) => r.workload_id],
  ['route_id', (r) => r.route_id],
  ['reservations_made', (r) => r.reservations.made],
  ['reservations_pending', (r) => r.reservations.pending],
  ['reservations_settled', (r) => r.reservations.settled],
  ['reservations_released', (r) => r.reservations.released],
  ['reservations_unresolved', (r) => r.reservations.unresolved],
  ['reservations_voided', (r) => r.reservations.voided],
  ['reserved_microusd', (r) => r.reservations.reserved_microusd],
  ['reservation_settled_microusd', (r) => r.reservations.settled_microusd],
  ['reservation_released_microusd', (r) => r.reservations.released_microusd],
  ['reservation_unresolved_microusd', (r) => r.reservations.unresolved_microusd],
  ['ledger_entries', (r) => r.ledger.entries],
  ['ledger_microusd', (r) => r.ledger.cost_microusd],
  ['topic_events', (r) => r.topic.events],
  ['topic_microusd', (r) => r.topic.cost_microusd],
  ['export_lines', (r) => r.export?.lines ?? null],
  ['export_microusd', (r) => r.export?.cost_microusd ?? null],
  ...COUNT_CATEGORIES.map((c): [string, (r: AuditRow) => number] => [`requested_${c}`, (r) => r.counts.requested[c] ?? 0]),
  ['admitted', (r) => r.counts.admitted],
  ['refused', (r) => r.counts.refused],
  ['effective_total', (r) => r.counts.effective_total],
  ['returned_total', (r) => r.counts.returned_total],
  ['output_requests', (r) => r.output_per_request?.requests ?? null],
  ['output_tokens_mean', (r) => r.output_per_request?.mean ?? null],
  ['output_tokens_p50', (r) => r.output_per_request?.p50 ?? null],
  ['output_tokens_p95', (r) => r.output_per_request?.p95 ?? null],
  ['differences', (r) => r.differences],
];

const DIFFERENCE_COLUMNS = [
  'kind',
  'workload_id',
  'route_id',
  'action_id',
  'attempt_id',
  'ledger_entry_id',
  'event_id',
  'provider_request_id',
  'reservation_id',
  'ledger_microusd',
  'topic_microusd',
  'export_microusd',
  'unresolved_microusd',
] as const satisfies ReadonlyArray<keyof AuditDifference>;

/**
 * The report as CSV: the rows' table, a blank line, then the differences' table (one line per
 * difference, its own header), so a spreadsheet reads both and nothing is netted on the way.
 */
export function auditReportCsv(w: AuditReportWire): string {
  const out = [csvRow(ROW_COLUMNS.map(([name]) => name)), ...w.rows.map((r) => csvRow(ROW_COLUMNS.map(([, get]) => get(r))))];
  out.push('\r\n', csvRow([...DIFFERENCE_COLUMNS]), ...w.differences.map((d) => csvRow(DIFFERENCE_COLUMNS.map((c) => d[c]))));
  if (w.differences_truncated) out.push(csvRow(['differences_truncated']));
  return out.join('');
}
