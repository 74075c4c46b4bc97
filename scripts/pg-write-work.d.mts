// Types of what TypeScript benches use from scripts/pg-write-work.mjs.
export type Query = (sql: string, params?: unknown[]) => Promise<Array<Record<string, unknown>>>;
export type WalPosition = { lsn: string; records: number | null; fpi: number | null; syncs?: number | null };
export type UpdateCounts = Record<string, { updates: number; hot: number }>;
export function walPosition(query: Query): Promise<WalPosition>;
export function walSince(
  query: Query,
  from: WalPosition,
): Promise<{ bytes: number; records: number | null; fpi: number | null; syncs: number | null; range: [string, string] }>;
export function updateCounts(query: Query, tables: string[]): Promise<UpdateCounts>;
export function hotShares(before: UpdateCounts, after: UpdateCounts): Array<{ table: string; updates: number; hotPct: number }>;
export type WalRelationRow = { relation: string | null; rm: string; type: string; records: number; bytes: number };
export function walByRelation(query: Query, range: [string, string]): Promise<WalRelationRow[] | null>;
export function walLines(
  rows: WalRelationRow[],
  unit: number,
  digits?: number,
): { lines: Array<{ name: string; records: number; bytes: number; types: string }>; rest: number };
