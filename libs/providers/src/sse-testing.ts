import { SseDecoder } from './sse';

/** Test helper: cuts UTF-8 bytes into reads of `size` bytes, so small sizes split characters and CRLF pairs. */
export function byteSlices(body: string | Uint8Array, size: number): Uint8Array[] {
  const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
  const out: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size));
  return out;
}

/** Test helper: the `data` payloads of an SSE body delivered in reads of `size` bytes. */
export function sseData(body: string | Uint8Array, size: number): string[] {
  const d = new SseDecoder();
  return [...byteSlices(body, size).flatMap((p) => d.push(p)), ...d.end()];
}

/** What every adapter's `parseResponse` gives for a body that is not a response at all. */
export const NOTHING_PARSED = {
  providerRequestId: null,
  candidates: [],
  promptBlockReason: null,
  usage: null,
  serviceTier: null,
  featureCalls: {},
} as const;
