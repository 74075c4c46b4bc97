import { parse as parseCsv } from 'csv-parse/sync';
import { z } from 'zod';
import { DomainError } from '@gateway/domain';
import { parseJsonBody, textProblem } from '@gateway/service-kit';
import { usageEvidenceFields, usageEvidenceRules } from '../import-usage/import-usage.command';

/**
 * A provider usage export as the gateway takes it (issue 15): one line per provider request, as
 * JSON lines or CSV with a header, in the shape docs/usage-exports.md documents. The fields are
 * the one evidence shape the single-case import takes (`usageEvidenceFields`), plus what exports
 * carry beside it: `client_request_id` (the gateway's attempt id, where the provider echoes the
 * id the gateway sent), `model` and `timestamp` (kept for the report, never matched on).
 * Unknown fields and columns are refused: a misspelt column must not read as a missing count.
 */
export const exportLine = z
  .object({
    ...usageEvidenceFields,
    client_request_id: z.string().trim().min(1).max(256).optional(),
    model: z.string().trim().min(1).max(128).optional(),
    timestamp: z.iso.datetime({ offset: true }).optional(),
  })
  .strict()
  .superRefine(usageEvidenceRules);
export type ExportLine = z.output<typeof exportLine>;

export const EXPORT_FORMATS = ['jsonl', 'csv'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** A line that cannot be used, by its 1-based line number in the file (CSV: the header is line 1). */
export interface InvalidLine {
  line: number;
  param: string;
  message: string;
}

export interface ParsedExport {
  lines: Array<{ line: number; value: ExportLine }>;
  invalid: InvalidLine[];
}

/** CSV columns holding counts (digits only; an empty cell is an absent optional count). */
const COUNT_COLUMNS = new Set([
  'input_tokens',
  'cached_input_tokens',
  'output_tokens_total',
  'reasoning_tokens',
  'cache_write_input_tokens',
  'audio_input_tokens',
  'audio_output_tokens',
  'image_output_tokens',
]);

export const MAX_EXPORT_LINES = 5_000;

/**
 * Parses and validates an export. Every bad line is reported with what is wrong; the good ones go
 * on. A provider request id seen twice in one file is refused on its second line (one request,
 * one line). More than MAX_EXPORT_LINES lines: split the file (the CLI does).
 */
export function parseUsageExport(format: ExportFormat, content: string): ParsedExport {
  const raw = format === 'jsonl' ? jsonLines(content) : csvLines(content);
  const out: ParsedExport = { lines: [], invalid: [] };
  if (raw.length > MAX_EXPORT_LINES) {
    out.invalid.push({ line: 0, param: 'content', message: `at most ${MAX_EXPORT_LINES} lines per import; split the file` });
    return out;
  }
  const seen = new Set<string>();
  for (const r of raw) {
    if ('error' in r) {
      out.invalid.push({ line: r.line, param: '', message: r.error });
      continue;
    }
    const parsed = exportLine.safeParse(r.value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      out.invalid.push({ line: r.line, param: issue.path.join('.'), message: issue.message });
      continue;
    }
    if (seen.has(parsed.data.provider_request_id)) {
      out.invalid.push({ line: r.line, param: 'provider_request_id', message: 'this provider request is already on an earlier line' });
      continue;
    }
    seen.add(parsed.data.provider_request_id);
    out.lines.push({ line: r.line, value: parsed.data });
  }
  return out;
}

type RawLine = { line: number; value: unknown } | { line: number; error: string };

/**
 * Each line through the gateway's one strict JSON reader (`parseJsonBody`: no NUL or lone
 * surrogate, no number beyond ±(2^53 − 1) such as 1e999, bounded nesting), so a hostile line is
 * refused on its own line instead of reaching Postgres.
 */
function jsonLines(content: string): RawLine[] {
  const out: RawLine[] = [];
  content.split(/\r?\n/).forEach((text, i) => {
    if (text.trim() === '') return;
    try {
      out.push({ line: i + 1, value: parseJsonBody(Buffer.from(text, 'utf8')) });
    } catch (err) {
      out.push({ line: i + 1, error: err instanceof DomainError ? err.message : 'not a JSON object' });
    }
  });
  return out;
}

function csvLines(content: string): RawLine[] {
  let records: Record<string, string>[];
  try {
    records = parseCsv(content, { columns: true, skip_empty_lines: true, trim: true, bom: true }) as Record<string, string>[];
  } catch (err) {
    return [{ line: 0, error: `not CSV with a header row: ${(err as Error).message}` }];
  }
  return records.map((record, i) => {
    const value: Record<string, unknown> = {};
    for (const [column, cell] of Object.entries(record)) {
      const problem = textProblem(column) ?? textProblem(cell);
      if (problem) return { line: i + 2, error: `column ${column.replace(/\u0000/g, '\\u0000')}: ${problem}` };
      if (cell === '') continue;
      if (COUNT_COLUMNS.has(column)) value[column] = /^\d{1,10}$/.test(cell) ? Number(cell) : cell;
      else if (column === 'feature_calls') value[column] = jsonOrText(cell);
      else value[column] = cell;
    }
    return { line: i + 2, value };
  });
}

function jsonOrText(cell: string): unknown {
  try {
    return JSON.parse(cell) as unknown;
  } catch {
    return cell;
  }
}

/** POST /usage-exports: an export (or one part of a larger one) as text, in one of the documented shapes. */
export const importExportBody = z
  .object({
    format: z.enum(EXPORT_FORMATS),
    content: z.string().min(1),
    /**
     * The operator's statement that the export (this call's lines and every earlier import's) is
     * complete for these routes and UTC day: attempts of that day left unresolved with no line are
     * settled at zero (docs/usage-exports.md "Stating an export complete").
     */
    complete: z
      .object({
        day: z.iso.date(),
        routes: z.array(z.string().trim().min(1).max(128)).min(1).max(200),
        /** `sha256:<hex>` of the whole file (the CLI's, over all parts); absent: this call's content */
        export_digest: z
          .string()
          .regex(/^sha256:[0-9a-f]{64}$/, 'export_digest is sha256:<64 lowercase hex digits>')
          .optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
export type ImportExportBody = z.output<typeof importExportBody>;
