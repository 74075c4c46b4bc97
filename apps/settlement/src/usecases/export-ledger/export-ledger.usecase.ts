import { Inject, Injectable } from '@nestjs/common';
import { LedgerQuery, LedgerQueryRepository, LedgerRow } from '@gateway/db';
import { csvRow, DomainError } from '@gateway/domain';
import { timeRange, toEntry } from '../query-ledger/query-ledger.usecase';

export interface ExportLedgerCommand {
  workloadId: string | null;
  /** ISO timestamps: settled_at >= from, settled_at < to */
  from: string | null;
  to: string | null;
  /** `ndjson` (default) or `csv` */
  format: string | null;
}

export type LedgerExportFormat = 'ndjson' | 'csv';

export interface LedgerExport {
  format: LedgerExportFormat;
  contentType: string;
  filename: string;
  /** the body, one batch of rows per chunk; read lazily, so the range is never held in memory */
  chunks: AsyncIterable<string>;
}

/** Rows per database read. */
export const EXPORT_BATCH_ROWS = 500;

type Entry = ReturnType<typeof toEntry>;

/**
 * CSV columns: the entry's fields, the per-category cost flattened (a category line a usage row
 * does not carry is 0; every cost column is empty on an operator release). The billable detail of
 * issue 14 and then the attempt tree of issue 10 come last, so readers that address columns by position keep working; the fee lines
 * are their JSON text (money as decimal strings).
 */
const CSV_COLUMNS: Array<[string, (e: Entry) => string | number | null]> = [
  ['ledger_entry_id', (e) => e.ledger_entry_id],
  ['attempt_id', (e) => e.attempt_id],
  ['action_id', (e) => e.action_id],
  ['request_id', (e) => e.request_id],
  ['attempt_role', (e) => e.attempt_role],
  ['workload_id', (e) => e.workload_id],
  ['route_id', (e) => e.route_id],
  ['route_version', (e) => e.route_version],
  ['model_alias', (e) => e.model_alias],
  ['provider_request_id', (e) => e.provider_request_id],
  ['requested_candidate_count', (e) => e.requested_candidate_count],
  ['effective_candidate_count', (e) => e.effective_candidate_count],
  ['returned_candidate_count', (e) => e.returned_candidate_count],
  ['input_tokens', (e) => e.input_tokens],
  ['cached_input_tokens', (e) => e.cached_input_tokens],
  ['output_tokens_total', (e) => e.output_tokens_total],
  ['reasoning_tokens', (e) => e.reasoning_tokens],
  ['total_tokens', (e) => e.total_tokens],
  ['usage_source', (e) => e.usage_source],
  ['price_revision', (e) => e.price_revision],
  ['cost_microusd', (e) => e.cost_microusd],
  ['cost_input_microusd', (e) => e.cost_microusd_by_category?.input ?? null],
  ['cost_cached_input_microusd', (e) => e.cost_microusd_by_category?.cached_input ?? null],
  ['cost_output_microusd', (e) => e.cost_microusd_by_category?.output ?? null],
  ['cost_reasoning_microusd', (e) => e.cost_microusd_by_category?.reasoning ?? null],
  ['attested_by', (e) => e.attested_by],
  ['attestation_reason', (e) => e.attestation_reason],
  ['case_id', (e) => e.case_id],
  ['settled_at', (e) => e.settled_at],
  ['cache_write_input_tokens', (e) => e.cache_write_input_tokens],
  ['audio_input_tokens', (e) => e.audio_input_tokens],
  ['audio_output_tokens', (e) => e.audio_output_tokens],
  ['image_output_tokens', (e) => e.image_output_tokens],
  ['cost_cache_write_microusd', (e) => categoryLine(e, 'cache_write')],
  ['cost_audio_input_microusd', (e) => categoryLine(e, 'audio_input')],
  ['cost_audio_output_microusd', (e) => categoryLine(e, 'audio_output')],
  ['cost_image_output_microusd', (e) => categoryLine(e, 'image_output')],
  ['cost_fees_microusd', (e) => categoryLine(e, 'fees')],
  ['context_tier_above_input_tokens', (e) => e.context_tier_above_input_tokens],
  ['service_tier', (e) => e.service_tier],
  ['fee_lines', (e) => (e.fee_lines === null ? null : JSON.stringify(e.fee_lines))],
  // the attempt tree (issue 10), after the billable detail for the same reason
  ['attempt_no', (e) => e.attempt_no],
  ['winner', (e) => (e.winner === null ? null : String(e.winner))],
  ['attempts_total', (e) => e.attempts_total],
  ['policy_revision_id', (e) => e.policy_revision_id],
  ['deadline_outcome', (e) => e.deadline_outcome],
];

function categoryLine(e: Entry, category: 'cache_write' | 'audio_input' | 'audio_output' | 'image_output' | 'fees'): string | null {
  return e.cost_microusd_by_category === null ? null : (e.cost_microusd_by_category[category] ?? '0');
}

/**
 * The ledger over a time range as a stream (`GET /ledger/export`), newest first like `GET /ledger`:
 * keyset-paged reads of `EXPORT_BATCH_ROWS` rows, each written out before the next is read.
 * Arguments are checked and the first batch is read before anything is sent, so a bad request or
 * an unavailable database still gets its status; rows settled after the export started are newer
 * than its first row and are not included.
 */
@Injectable()
export class ExportLedger {
  constructor(@Inject(LedgerQueryRepository) private readonly ledger: Pick<LedgerQueryRepository, 'page'>) {}

  async execute(cmd: ExportLedgerCommand, batchRows = EXPORT_BATCH_ROWS): Promise<LedgerExport> {
    const format = cmd.format ?? 'ndjson';
    if (format !== 'ndjson' && format !== 'csv') throw new DomainError('invalid_request', 'format must be ndjson or csv', 'format');
    const { from, to } = timeRange(cmd.from, cmd.to);
    const query: LedgerQuery = { workloadId: cmd.workloadId, actionId: null, from, to, after: null, limit: batchRows };
    const first = await this.ledger.page(query);
    return {
      format,
      contentType: format === 'csv' ? 'text/csv; charset=utf-8' : 'application/x-ndjson',
      filename: `ledger.${format}`,
      chunks: this.chunks(format, query, first),
    };
  }

  private async *chunks(format: LedgerExportFormat, query: LedgerQuery, first: LedgerRow[]): AsyncGenerator<string> {
    if (format === 'csv') yield csvRow(CSV_COLUMNS.map(([name]) => name));
    let rows = first;
    while (rows.length > 0) {
      yield rows
        .map((r) => (format === 'csv' ? csvRow(CSV_COLUMNS.map(([, get]) => get(toEntry(r)))) : `${JSON.stringify(toEntry(r))}\n`))
        .join('');
      if (rows.length < query.limit) return;
      const last = rows[rows.length - 1];
      rows = await this.ledger.page({ ...query, after: { settledAt: last.settledAt, id: last.id } });
    }
  }
}
