import express from 'express';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { DomainError } from '@gateway/domain';

/**
 * The limits every service applies to what a client sends, before any handler (and so before
 * anything is read from or written to Postgres or Kafka) sees it. They live in one place so that
 * admission, policy, settlement and reconciliation refuse the same inputs with the same codes.
 */
export const INPUT_LIMITS = {
  /** deepest JSON nesting accepted (objects and arrays); a deeper body is 400 invalid_request */
  jsonMaxDepth: 64,
  /** longest `model` (route alias) admission accepts, checked before authentication */
  modelMaxChars: 128,
  /** longest `Idempotency-Key` header */
  idempotencyKeyMaxChars: 255,
} as const;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why a piece of client text cannot be stored or forwarded, or null when it can: Postgres refuses
 * NUL in text (22P05/22021) and lone surrogates in JSON (22P02), and neither is valid UTF-8 text
 * a provider would accept.
 */
export function textProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'contains a NUL character (\\u0000)';
  if (LONE_SURROGATE.test(s)) return 'contains a lone UTF-16 surrogate (not valid Unicode)';
  return null;
}

function invalid(message: string, param?: string): DomainError {
  return new DomainError('invalid_request', message, param);
}

/**
 * The nesting depth of a JSON text, counted without parsing it (so a 10,000-deep body costs one
 * linear scan, never a recursion), stopping as soon as it passes `max`.
 */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/**
 * Parses a JSON request body strictly: valid UTF-8, nesting at most `maxDepth`, every string and
 * key free of NUL and lone surrogates, every number finite (`1e999` is Infinity) and within
 * ±(2^53 − 1): beyond that a whole number is silently changed by JSON.parse (what the gateway
 * reserved would not be what it forwarded) and fails the integer schemas of the events. No LLM
 * API field needs a larger magnitude. Throws `invalid_request`.
 */
export function parseJsonBody(raw: Buffer, maxDepth: number = INPUT_LIMITS.jsonMaxDepth): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(raw);
  } catch {
    throw invalid('request body is not valid UTF-8');
  }
  if (jsonDepthExceeds(text, maxDepth)) throw invalid(`request body nests deeper than ${maxDepth} levels`);
  try {
    return JSON.parse(text, (key: string, value: unknown) => {
      const keyProblem = key === '' ? null : textProblem(key);
      if (keyProblem) throw invalid(`a field name in the request body ${keyProblem}`);
      if (typeof value === 'string') {
        const problem = textProblem(value);
        if (problem) throw invalid(`field '${key}' ${problem}`, key || undefined);
      } else if (typeof value === 'number') {
        if (!Number.isFinite(value)) throw invalid(`field '${key}' is a number too large to represent`, key || undefined);
        if (Math.abs(value) > Number.MAX_SAFE_INTEGER) {
          throw invalid(`field '${key}' is a number beyond ±(2^53 − 1), which cannot be carried exactly`, key || undefined);
        }
      }
      return value;
    });
  } catch (err) {
    if (err instanceof DomainError) throw err;
    throw invalid('request body is not valid JSON');
  }
}

/**
 * The parsed body re-serialised, which is what is encrypted and carried to dispatch, may be
 * larger than the text the client sent (`1e15` becomes sixteen digits: at most four times as
 * long). Checked only when the raw body could grow past the limit.
 */
function assertSerialisedFits(raw: Buffer, body: unknown, limitBytes: number): void {
  if (raw.length * 4 <= limitBytes) return;
  const size = Buffer.byteLength(JSON.stringify(body));
  if (size > limitBytes) {
    throw new DomainError('payload_too_large', `request body is ${size} bytes once normalised; the limit is ${limitBytes} bytes`);
  }
}

/**
 * Refuses URLs the services must not pass on: a path or query parameter that is not decodable
 * UTF-8 or carries NUL, and a query parameter given twice (`?limit=1&limit=2`: which one counts
 * would be the framework's guess).
 */
export function assertUrlAcceptable(url: string): void {
  const q = url.indexOf('?');
  const pathPart = q < 0 ? url : url.slice(0, q);
  for (const segment of pathPart.split('/')) {
    const decoded = decode(segment, 'the path');
    const problem = textProblem(decoded);
    if (problem) throw invalid(`the path ${problem}`);
  }
  if (q < 0) return;
  const seen = new Set<string>();
  for (const pair of url.slice(q + 1).split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = decode((eq < 0 ? pair : pair.slice(0, eq)).replace(/\+/g, ' '), 'a query parameter name');
    const value = eq < 0 ? '' : decode(pair.slice(eq + 1).replace(/\+/g, ' '), `query parameter '${name}'`);
    const problem = textProblem(name) ?? textProblem(value);
    if (problem) throw invalid(`query parameter '${name.replace(/\u0000/g, '\\u0000')}' ${problem}`, name);
    if (seen.has(name)) throw invalid(`query parameter '${name}' is given more than once`, name);
    seen.add(name);
  }
}

function decode(s: string, what: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw invalid(`${what} is not valid percent-encoded UTF-8`);
  }
}

/** `Idempotency-Key`: 1–255 printable ASCII characters, when present. */
export function assertIdempotencyKeyAcceptable(value: string | string[] | undefined): void {
  if (value === undefined) return;
  const v = Array.isArray(value) ? value.join(',') : value;
  const max = INPUT_LIMITS.idempotencyKeyMaxChars;
  if (v.length === 0 || v.length > max || !/^[\x20-\x7e]+$/.test(v)) {
    throw invalid(`Idempotency-Key must be 1 to ${max} printable ASCII characters`, 'Idempotency-Key');
  }
}

export interface InputGuardOptions {
  /** the largest body accepted, in bytes, before and after normalisation (413 payload_too_large) */
  bodyLimitBytes: number;
  jsonMaxDepth?: number;
}

/**
 * The request-input middleware chain of every service (installed by `startHttpService`):
 * URL and header checks, then the body read up to the limit and parsed by `parseJsonBody`
 * whatever its content type (SDKs and curl disagree on it). Every refusal goes to `next(err)`,
 * and so through the one exception filter, as a `DomainError` of the registry.
 */
export function inputGuard(opts: InputGuardOptions): RequestHandler[] {
  const readRaw = express.raw({ limit: opts.bodyLimitBytes, type: () => true });
  const checkRequestLine: RequestHandler = (req: Request, _res: Response, next: NextFunction) => {
    try {
      assertUrlAcceptable(req.originalUrl ?? req.url);
      assertIdempotencyKeyAcceptable(req.headers['idempotency-key']);
      next();
    } catch (err) {
      next(err);
    }
  };
  const parse: RequestHandler = (req: Request, _res: Response, next: NextFunction) => {
    const raw: unknown = req.body;
    if (!Buffer.isBuffer(raw) || raw.length === 0) {
      req.body = undefined;
      return next();
    }
    try {
      const body = parseJsonBody(raw, opts.jsonMaxDepth);
      assertSerialisedFits(raw, body, opts.bodyLimitBytes);
      req.body = body;
      next();
    } catch (err) {
      next(err);
    }
  };
  return [checkRequestLine, readRaw, parse];
}
