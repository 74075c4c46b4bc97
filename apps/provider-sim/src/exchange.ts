// The provider-neutral part of handling one upstream call: body, fingerprint, log entry, directives,
// abort tracking, latency, scripted failures. Provider adapters do the rest.
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SimContext } from './context';
import { BodyTooLargeError, readBody, sendJson, sleep } from './http';
import type { SimRequestLogEntry } from './request-log';
import { resolveScript, scenarioLabel, ScriptError, type ResolvedScript } from './script';
import { emptySpendFields, spendFieldsOf } from './spend-fields';
import { drawLatency } from './latency';
import type { SimPlan } from './simulate';
import { abortPoint, newProgress, wouldBill, type BillProgress } from './would-bill';

export const SCRIPT_HEADER = 'x-sim-script';
/** Upper bound for n / candidateCount (OpenAI's own limit), to keep responses bounded. */
export const MAX_CANDIDATES = 128;

export interface ParsedRequest {
  /** Model name as sent, directives included. */
  modelSpec: string;
  asked: number | null;
  cap: number | null;
  stream: boolean;
  promptTokens: number;
  /** Text of the last prompt message (what `echo` answers with). */
  lastText: string;
}

export interface ErrorDetail {
  param?: string | null;
  code?: string | null;
}

export class InvalidRequest extends Error {
  constructor(
    message: string,
    readonly detail: ErrorDetail = {},
  ) {
    super(message);
  }
}

export interface Exchange {
  ctx: SimContext;
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  body: any; // validated by the adapter's parse()
  parsed: ParsedRequest;
  resolved: ResolvedScript;
  fingerprint: string;
  /** Per-request counter used in ids. */
  id: number;
  signal: AbortSignal;
  entry: SimRequestLogEntry;
  /** The answer (adapter.plan), drawn before the latency delay so an abort during it knows what was being generated. */
  plan: SimPlan;
  /** What has been generated and written so far (sendStream updates it): the would-bill of an abort. */
  progress: BillProgress;
  fail(status: number, message: string, detail?: ErrorDetail): void;
  /** Closes the connection mid-response on purpose (cut-stream); not logged as a client abort. */
  cut(): void;
}

/** What an adapter needs to plan the answer. */
export type PlanSource = Pick<Exchange, 'ctx' | 'body' | 'parsed' | 'resolved' | 'fingerprint'>;

export interface ProviderAdapter {
  provider: 'openai' | 'gemini';
  /** Metrics label. */
  endpoint: string;
  parse(body: unknown, url: URL): ParsedRequest;
  errorBody(status: number, message: string, detail?: ErrorDetail): unknown;
  /** The answer's candidates and token counts (pure; respond() answers with it). */
  plan(src: PlanSource): SimPlan;
  respond(ex: Exchange): Promise<void> | void;
}

export async function handleProviderRequest(
  ctx: SimContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  adapter: ProviderAdapter,
): Promise<void> {
  const started = Date.now();
  const entry = ctx.log.add({
    time: new Date(started).toISOString(),
    method: req.method ?? 'POST',
    path: url.pathname,
    provider: adapter.provider,
    model: null,
    candidateCount: null,
    maxTokens: null,
    stream: false,
    directives: [],
    fingerprint: '',
    keyHeader: presentedKey(adapter.provider, req).keyHeader,
    keyVerdict: 'not_required',
    status: 0,
    aborted: false,
    abortedAt: null,
    abortedAfterMs: null,
    wouldBill: null,
    durationMs: null,
    providerRequestId: null,
    clientRequestId: headerText(req.headers['x-client-request-id']),
    idempotencyKey: headerText(req.headers['idempotency-key']),
    ...emptySpendFields(),
  });
  const abort = new AbortController();
  const progress = newProgress();
  let cutOnPurpose = false;
  let scenario = 'none';
  res.on('close', () => {
    const elapsed = Date.now() - started;
    if (!res.writableFinished && !cutOnPurpose) {
      entry.aborted = true;
      entry.abortedAt = abortPoint(progress, res.headersSent);
      entry.abortedAfterMs = elapsed;
      entry.wouldBill = wouldBill(progress, elapsed);
      abort.abort();
    }
    entry.status = res.headersSent ? res.statusCode : 0;
    entry.durationMs = elapsed;
    ctx.billing.add({
      day: entry.time.slice(0, 10),
      time: entry.time,
      providerRequestId: entry.providerRequestId ?? `sim-unanswered-${entry.seq}`,
      clientRequestId: entry.clientRequestId,
      model: entry.model,
      billed: wouldBill(progress, elapsed),
    });
    ctx.requestsTotal.inc({ endpoint: adapter.endpoint, scenario, status: String(entry.status) });
  });
  const fail = (status: number, message: string, detail?: ErrorDetail) => sendJson(res, status, adapter.errorBody(status, message, detail));

  let raw: Buffer;
  try {
    raw = await readBody(req);
  } catch (err) {
    if (err instanceof BodyTooLargeError) fail(413, err.message);
    else res.destroy();
    return;
  }
  const fingerprint = createHash('sha256').update(raw).digest('hex');
  entry.fingerprint = fingerprint;

  let body: unknown;
  let parsed: ParsedRequest;
  let resolved: ResolvedScript;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch {
    return fail(400, 'We could not parse the JSON body of your request.', { code: 'invalid_json' });
  }
  Object.assign(entry, spendFieldsOf(body));
  try {
    parsed = adapter.parse(body, url);
    entry.model = parsed.modelSpec.split(';')[0].trim();
    entry.candidateCount = parsed.asked;
    entry.maxTokens = parsed.cap;
    entry.stream = parsed.stream;
    const header = req.headers[SCRIPT_HEADER];
    resolved = resolveScript(parsed.modelSpec, Array.isArray(header) ? header.join(';') : header);
  } catch (err) {
    if (err instanceof InvalidRequest) return fail(400, err.message, err.detail);
    if (err instanceof ScriptError) return fail(400, err.message, { param: 'model', code: 'invalid_sim_directive' });
    throw err;
  }
  entry.directives = resolved.directives;
  scenario = scenarioLabel(resolved.directives);

  const { script } = resolved;
  if (script.keySha256 !== undefined) {
    const key = presentedKey(adapter.provider, req).key;
    entry.keyVerdict =
      key === null ? 'missing' : createHash('sha256').update(key).digest('hex') === script.keySha256 ? 'matched' : 'mismatched';
    if (entry.keyVerdict !== 'matched') {
      return fail(401, entry.keyVerdict === 'missing' ? 'You did not provide an API key.' : 'Incorrect API key provided.', {
        code: 'invalid_api_key',
      });
    }
  }
  const plan = adapter.plan({ ctx, body, parsed, resolved, fingerprint });
  // The would-bill rule (would-bill.ts): a request scripted to end in an error generates nothing.
  const scriptedError =
    script.status !== undefined ||
    script.block ||
    (script.rejectN && (parsed.asked ?? 1) > 1) ||
    (ctx.failures.get(fingerprint) ?? 0) < script.failFirst;
  progress.plan = scriptedError ? null : plan;
  progress.delayStartMs = Date.now() - started;
  // Drawn whatever slow-first says, so the seeded sequence stays where it would be without it.
  const drawn = drawLatency(ctx.latencyRng, script);
  const slow = script.slowFirst ? (ctx.slowSeen.get(fingerprint) ?? 0) + 1 : 0;
  if (script.slowFirst) ctx.slowSeen.set(fingerprint, slow);
  progress.delayMs = script.slowFirst && slow <= script.slowFirst.count ? script.slowFirst.ms : drawn;
  if (!(await sleep(progress.delayMs, abort.signal))) return;
  progress.delayDone = true;
  if (script.status) return fail(script.status, `Simulated upstream error (status=${script.status}).`);
  if (script.failFirst) {
    const seen = (ctx.failures.get(fingerprint) ?? 0) + 1;
    ctx.failures.set(fingerprint, seen);
    if (seen <= script.failFirst) return fail(503, `Simulated transient failure ${seen} of ${script.failFirst}.`);
  }

  await adapter.respond({
    ctx,
    req,
    res,
    url,
    body,
    parsed,
    resolved,
    fingerprint,
    entry,
    plan,
    progress,
    fail,
    id: ctx.nextId(),
    signal: abort.signal,
    cut: () => {
      cutOnPurpose = true;
      res.destroy();
    },
  });
}

/** A header's value as one bounded string (ids only), or null. */
function headerText(v: string | string[] | undefined): string | null {
  const text = Array.isArray(v) ? v[0] : v;
  return text && text.length <= 256 ? text : null;
}

/** Sends a streamed body: headers, optional `ttft` pause, content, then the tail (or a cut). */
export async function sendStream(
  ex: Exchange,
  contentType: string,
  content: string,
  tail: string,
  headers: Record<string, string> = {},
): Promise<void> {
  const { res, resolved } = ex;
  if (res.destroyed) return;
  res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache', ...headers });
  ex.progress.streaming = true;
  if (resolved.script.ttft) {
    res.flushHeaders();
    if (!(await sleep(resolved.script.ttft, ex.signal))) return;
  }
  let rest = content;
  if (resolved.script.stall !== undefined) {
    const at = midEvent(content);
    ex.progress.streamed = content.length ? at / content.length : 1;
    await new Promise<void>((resolve) => res.write(content.slice(0, at), () => resolve()));
    if (!(await sleep(resolved.script.stall, ex.signal))) return;
    rest = content.slice(at);
  }
  if (resolved.script.fragment) return sendFragmented(ex, contentType, rest, tail, rest === content);
  ex.progress.streamed = 1;
  if (resolved.script.cutStream) res.write(rest, () => ex.cut());
  else res.end(rest + tail);
}

/** Where `stall` pauses: after the first event (SSE) or array element that ends past the middle of the content. */
export function midEvent(content: string): number {
  const half = Math.floor(content.length / 2);
  const candidates = ['\n\n', ',\r\n'].map((sep) => {
    const i = content.indexOf(sep, half);
    return i < 0 ? content.length : i + sep.length;
  });
  return Math.min(...candidates);
}

/**
 * `fragment`: what a network may do to a stream. SSE gets a byte-order mark and CRLF line endings;
 * every multi-byte character and every CRLF is cut in two, and each piece is written and given
 * time to leave on its own, so the reader receives them as separate reads.
 */
async function sendFragmented(ex: Exchange, contentType: string, content: string, tail: string, atStart: boolean): Promise<void> {
  const sse = contentType.startsWith('text/event-stream');
  const crlf = (text: string) => (sse ? text.replace(/\n/g, '\r\n') : text);
  const pieces = (text: string) => fragments(Buffer.from(text, 'utf8'));
  const bom = sse && atStart ? '\uFEFF' : '';
  const contentPieces = pieces(bom + crlf(content));
  const body = [...contentPieces, ...(ex.resolved.script.cutStream ? [] : pieces(crlf(tail)))];
  // Share of the whole content written: what a stall already sent, then these pieces.
  const before = ex.progress.streamed ?? 0;
  const contentBytes = contentPieces.reduce((n, p) => n + p.length, 0);
  let sent = 0;
  for (const [k, piece] of body.entries()) {
    if (ex.res.destroyed || ex.signal.aborted) return;
    if (k < contentPieces.length) sent += piece.length;
    ex.progress.streamed = contentBytes ? before + ((1 - before) * sent) / contentBytes : 1;
    await new Promise<void>((resolve) => ex.res.write(piece, () => resolve()));
    if (!(await sleep(1, ex.signal))) return;
  }
  if (ex.resolved.script.cutStream) ex.cut();
  else ex.res.end();
}

/** Cuts bytes after the first byte of every multi-byte UTF-8 character and between every CR and LF. */
export function fragments(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  for (let i = 1; i < bytes.length; i++) {
    const leadOfMultiByte = bytes[i - 1] >= 0xc0;
    const crThenLf = bytes[i - 1] === 0x0d && bytes[i] === 0x0a;
    if (leadOfMultiByte || crThenLf) {
      out.push(bytes.subarray(start, i));
      start = i;
    }
  }
  if (start < bytes.length) out.push(bytes.subarray(start));
  return out;
}

/** Optional integer field in [1, max]; throws InvalidRequest otherwise. */
export function optionalCount(
  value: unknown,
  param: string,
  message: string,
  code: string | null = null,
  max = Number.MAX_SAFE_INTEGER,
): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) throw new InvalidRequest(message, { param, code });
  return value;
}

/** The API key a request carries in its provider's header: OpenAI `Authorization: Bearer`, Gemini `x-goog-api-key`. */
function presentedKey(
  provider: 'openai' | 'gemini',
  req: IncomingMessage,
): { key: string | null; keyHeader: SimRequestLogEntry['keyHeader'] } {
  if (provider === 'openai') {
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    return { key: m ? m[1] : null, keyHeader: m ? 'authorization' : 'none' };
  }
  const h = req.headers['x-goog-api-key'];
  const key = (Array.isArray(h) ? h[0] : h) ?? null;
  return { key, keyHeader: key ? 'x-goog-api-key' : 'none' };
}
