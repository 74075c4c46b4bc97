// What the simulated provider bills, per UTC day, as the per-request export the gateway imports
// (docs/usage-exports.md): the ground truth for issue 15. Every request that generated anything is
// billed by the would-bill rule (would-bill.ts) — whole answers in full, including usage the sim
// withheld from the response, under-reported, or candidates beyond what was asked; aborted and
// cut requests for what had been generated; scripted errors not at all. Counts only, never text.
import type { WouldBill } from './would-bill';

export interface BilledRequest {
  /** UTC day of the request's arrival, YYYY-MM-DD */
  day: string;
  time: string;
  /** the id the response carried; aborted before any response: `sim-unanswered-<seq>` */
  providerRequestId: string;
  /** the id the client sent in `x-client-request-id` (the gateway's attempt id), if any */
  clientRequestId: string | null;
  model: string | null;
  billed: WouldBill;
}

export const EXPORT_COLUMNS = [
  'provider_request_id',
  'client_request_id',
  'input_tokens',
  'cached_input_tokens',
  'output_tokens_total',
  'reasoning_tokens',
  'model',
  'timestamp',
] as const;

/** Billed requests, newest kept up to `limit` (a simulated day is ~10–20k requests). */
export class BillingLog {
  private rows: BilledRequest[] = [];

  constructor(private readonly limit = 500_000) {}

  add(row: BilledRequest): void {
    if (row.billed.promptTokens === 0 && row.billed.outputTokens === 0 && row.billed.reasoningTokens === 0) return;
    this.rows.push(row);
    if (this.rows.length > this.limit) this.rows.shift();
  }

  day(day: string): BilledRequest[] {
    return this.rows.filter((r) => r.day === day);
  }

  reset(): void {
    this.rows = [];
  }
}

/** One export line in the documented shape: output includes reasoning. */
export function exportLine(r: BilledRequest): Record<(typeof EXPORT_COLUMNS)[number], string | number | undefined> {
  return {
    provider_request_id: r.providerRequestId,
    client_request_id: r.clientRequestId ?? undefined,
    input_tokens: r.billed.promptTokens,
    cached_input_tokens: r.billed.cachedTokens,
    output_tokens_total: r.billed.outputTokens + r.billed.reasoningTokens,
    reasoning_tokens: r.billed.reasoningTokens,
    model: r.model ?? undefined,
    timestamp: r.time,
  };
}

/** The day's export as JSON lines or CSV (header first; ids and model names quoted when needed). */
export function exportText(rows: readonly BilledRequest[], format: 'jsonl' | 'csv'): string {
  if (format === 'jsonl') return rows.map((r) => JSON.stringify(exportLine(r))).join('\n') + (rows.length ? '\n' : '');
  const cell = (v: string | number | undefined) =>
    v === undefined ? '' : /[",\r\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v);
  const body = rows.map((r) => {
    const line = exportLine(r);
    return EXPORT_COLUMNS.map((c) => cell(line[c])).join(',');
  });
  return [EXPORT_COLUMNS.join(','), ...body].join('\n') + '\n';
}
