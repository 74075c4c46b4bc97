import { createHash } from 'node:crypto';
import { EVIDENCE_BOUNDS } from '@gateway/contracts';
import type { ParsedResponse, ParsedUsage, ProviderAdapter, StreamAccumulator } from './adapter';

const PROVIDER_ID = new RegExp(`^[\\x21-\\x7e]{1,${EVIDENCE_BOUNDS.providerRequestIdMaxChars}}$`);
const REASON = new RegExp(`^[A-Za-z0-9_.:-]{1,${EVIDENCE_BOUNDS.reasonMaxChars}}$`);
/** what a reason that is not a short name becomes: still a reason (a finish stays a finish), never the value */
export const UNRECOGNISED_REASON = 'unrecognised';

/**
 * A parsed answer with every value the provider chose bounded to what the attempt's evidence
 * takes (`EVIDENCE_BOUNDS`): an id that is not 1–256 visible ASCII characters is dropped (the
 * attempt is then matched by its own id, as when a provider sends none), a finish or block reason
 * that is not a short name becomes `unrecognised`, candidates past the 128th are dropped (the
 * excess over the effective count still shows), and unknown usage field names are cut to 32
 * printable names of at most 128 characters, the last one saying how many more there were. The
 * counts are the adapter's own (non-negative integers) and pass as they are.
 */
export function boundedResponse(r: ParsedResponse): ParsedResponse {
  return {
    ...r,
    providerRequestId: typeof r.providerRequestId === 'string' && PROVIDER_ID.test(r.providerRequestId) ? r.providerRequestId : null,
    promptBlockReason: boundedReason(r.promptBlockReason),
    candidates: r.candidates.slice(0, EVIDENCE_BOUNDS.candidatesMax).map((c) => ({ ...c, finishReason: boundedReason(c.finishReason) })),
    usage: r.usage ? { ...r.usage, unknownFields: boundedFieldNames(r.usage.unknownFields) } : null,
  };
}

function boundedReason(v: string | null): string | null {
  if (v === null) return null;
  return REASON.test(v) ? v : UNRECOGNISED_REASON;
}

function boundedFieldNames(names: ParsedUsage['unknownFields']): string[] {
  const printable = names.map((n) => n.replace(/[^\x20-\x7e]/g, '?').slice(0, EVIDENCE_BOUNDS.unknownUsageFieldMaxChars));
  if (printable.length <= EVIDENCE_BOUNDS.unknownUsageFieldsMax) return printable;
  const kept = printable.slice(0, EVIDENCE_BOUNDS.unknownUsageFieldsMax - 1);
  return [...kept, `(${printable.length - kept.length} more)`];
}

/**
 * What a stream accumulator keeps per key the provider chooses (a candidate index, a hosted tool
 * call's id, a grounding query), at most: a stream has no total bound (its events are relayed as
 * they come, for as long as UPSTREAM_READ_AFTER_DEADLINE_MS allows), so what it leaves behind must
 * not grow with it.
 */
export const STREAM_KEYS_MAX = 1024;

/**
 * Distinct strings counted in bounded memory, for a count that goes on a bill (hosted tool calls,
 * grounding queries): the first STREAM_KEYS_MAX are remembered as SHA-256 digests (a string of
 * 8 MiB costs 44 bytes), and past them every string not remembered counts as new. The count is
 * never below the truth, so the bill is dearer, never cheaper.
 */
export class DistinctCount {
  private readonly seen = new Set<string>();
  private unremembered = 0;

  add(value: string): void {
    const digest = createHash('sha256').update(value).digest('base64');
    if (this.seen.has(digest)) return;
    if (this.seen.size < STREAM_KEYS_MAX) this.seen.add(digest);
    else this.unremembered += 1;
  }

  get size(): number {
    return this.seen.size + this.unremembered;
  }
}

/**
 * Whether a stream accumulator takes one more candidate index into its map: the ones it holds
 * always, a new one while it holds fewer than the evidence keeps (`candidatesMax`; the rest would
 * be dropped by `boundedResponse` anyway).
 */
export function takesCandidate(byIndex: ReadonlyMap<number, unknown>, index: number): boolean {
  return byIndex.has(index) || byIndex.size < EVIDENCE_BOUNDS.candidatesMax;
}

/** The adapter with every answer it parses, whole or streamed, passed through `boundedResponse`. */
export function boundedAdapter(adapter: ProviderAdapter): ProviderAdapter {
  return {
    buildRequest: (cmd, credential) => adapter.buildRequest(cmd, credential),
    parseResponse: (body, headers) => boundedResponse(adapter.parseResponse(body, headers)),
    streamAccumulator: (headers) => boundedAccumulator(adapter.streamAccumulator(headers)),
    errorCode: (body) => adapter.errorCode(body),
  };
}

function boundedAccumulator(acc: StreamAccumulator): StreamAccumulator {
  return {
    push: (data) => acc.push(data),
    result: () => boundedResponse(acc.result()),
    get sawUsage() {
      return acc.sawUsage;
    },
    get finished() {
      return acc.finished;
    },
  };
}

/** A provider's answer (a whole body, or one event of a stream) was larger than the gateway reads. */
export class AnswerTooLarge extends Error {
  constructor(readonly limitBytes: number) {
    super(`the provider's answer is larger than ${limitBytes} bytes`);
    this.name = 'AnswerTooLarge';
  }
}

/**
 * A whole answer's text, read up to `maxBytes`: past that the reading stops (leaving the loop
 * destroys the body, which closes the connection) and `AnswerTooLarge` is thrown. A provider, or
 * whatever answers at a route's address, must not be able to fill dispatch's memory: an answer
 * past the reply topic's limit (~748 KiB encrypted) cannot reach the client anyway, and one past
 * this bound has its usage read from nothing (the attempt's exposure then waits for evidence).
 */
export async function readBounded(body: AsyncIterable<Uint8Array>, maxBytes: number): Promise<string> {
  const decoder = new TextDecoder('utf-8');
  let bytes = 0;
  let text = '';
  for await (const piece of body) {
    bytes += piece.byteLength;
    if (bytes > maxBytes) throw new AnswerTooLarge(maxBytes);
    text += decoder.decode(piece, { stream: true });
  }
  return text + decoder.decode();
}
