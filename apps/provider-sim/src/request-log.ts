// In-memory log of provider requests. Never stores prompt text: only a sha256 fingerprint of the body
// and the spend fields received (counts, caps, names of price-changing fields, `store`).
import type { SpendFields } from './spend-fields';
import type { WouldBill } from './would-bill';

export interface SimRequestLogEntry extends SpendFields {
  seq: number;
  time: string;
  method: string;
  path: string;
  provider: 'openai' | 'gemini';
  /** Base model name (directives stripped); null when the body could not be parsed. */
  model: string | null;
  /** `n` / `candidateCount` as sent, null when omitted. */
  candidateCount: number | null;
  /** `max_completion_tokens` ?? `max_tokens` / `maxOutputTokens`, null when omitted. */
  maxTokens: number | null;
  stream: boolean;
  directives: string[];
  /** sha256 (hex) of the raw request body. */
  fingerprint: string;
  /** Where the request carried an API key (never the key itself). */
  keyHeader: 'none' | 'authorization' | 'x-goog-api-key';
  /** Against a `key-sha256` directive: whether the key matched; `not_required` without one. */
  keyVerdict: 'not_required' | 'matched' | 'mismatched' | 'missing';
  /** HTTP status sent (0 until the response starts). */
  status: number;
  /** The client closed the connection before the response was complete (not a scripted `cut-stream`). */
  aborted: boolean;
  /** Aborted: before any response body byte was written (headers may be, under `ttft`), or part-way. */
  abortedAt: 'before_first_byte' | 'mid_response' | null;
  /** Aborted: ms from arrival to the abort. */
  abortedAfterMs: number | null;
  /** Aborted: the usage the provider would bill for what it had generated (rule in would-bill.ts). */
  wouldBill: WouldBill | null;
  durationMs: number | null;
  /** The id the response carried (null: no response was started). */
  providerRequestId: string | null;
  /** The client's `x-client-request-id` header, if sent (the gateway's attempt id). */
  clientRequestId: string | null;
  /** The `Idempotency-Key` header, if sent (a gateway route naming it sends the action id). */
  idempotencyKey: string | null;
}

/** Keeps the newest `limit` entries so long benchmark runs don't grow memory without bound. */
export class RequestLog {
  private entries: SimRequestLogEntry[] = [];
  private seq = 0;

  constructor(private readonly limit = 10_000) {}

  add(entry: Omit<SimRequestLogEntry, 'seq'>): SimRequestLogEntry {
    const full = { seq: ++this.seq, ...entry };
    this.entries.push(full);
    if (this.entries.length > this.limit) this.entries.shift();
    return full;
  }

  /** Copies of the entries with seq > since. */
  list(since = 0): SimRequestLogEntry[] {
    return this.entries
      .filter((e) => e.seq > since)
      .map((e) => ({
        ...e,
        directives: [...e.directives],
        candidateFields: { ...e.candidateFields },
        capFields: { ...e.capFields },
        pricedFields: [...e.pricedFields],
        wouldBill: e.wouldBill && { ...e.wouldBill },
      }));
  }

  /** Drops entries; seq keeps increasing so `since` cursors stay valid. */
  clear(): void {
    this.entries = [];
  }

  /** Drops entries and restarts seq at 1. */
  reset(): void {
    this.entries = [];
    this.seq = 0;
  }
}
