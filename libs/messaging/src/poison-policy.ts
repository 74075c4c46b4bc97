import { createHash } from 'node:crypto';
import { z } from 'zod';

/**
 * What a consumer does with a handler error. `transient` errors (the database or broker briefly
 * unavailable, a timeout, a serialisation failure) are retried in place with capped backoff, so
 * the consumer keeps its partition; `poison` errors fail the same way on every delivery and are
 * parked on the dead-letter topic so the partition moves on. An error still failing after
 * `maxTransientRetries` is parked too: retrying without end is how one event blocked settlement.
 * `unavailable` errors say that what every message needs cannot be reached at all (the database
 * server is down, restarting or failing over): no message can succeed until it is back, and a
 * parked message waits for an operator, so these are retried in place for up to
 * `maxUnavailableMs` and do not count against `maxTransientRetries` (docs/decisions.md, "A crash of
 * Postgres, injected"). The classifier that knows the database says which errors those are.
 */
export type ErrorKind = 'transient' | 'poison' | 'unavailable';
export type ErrorClassifier = (err: unknown) => ErrorKind;

export interface PoisonPolicy {
  classify: ErrorClassifier;
  /** retries of a transient error before the message is parked */
  maxTransientRetries: number;
  /** how long `unavailable` errors are retried, from the first, before the message is parked */
  maxUnavailableMs: number;
  /** while `unavailable` errors are retried, at most one warn line per this many ms (the first always) */
  unavailableLogEveryMs: number;
  /** first backoff; doubles per retry up to `maxBackoffMs` */
  initialBackoffMs: number;
  maxBackoffMs: number;
}

/** Thrown by handlers for a message that can never succeed (e.g. undecryptable content). */
export class PoisonMessageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PoisonMessageError';
  }
}

/** Errors that say "this input is wrong", whatever the state of the database or the broker. */
const DETERMINISTIC = new Set([
  'RangeError',
  'TypeError',
  'SyntaxError',
  'ZodError',
  'InvalidTransitionError',
  'DomainError',
  'PoisonMessageError',
]);

/** Network failures surface as TypeError from fetch; those are transient, not poison. */
const NETWORK_CODES = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|EAI_AGAIN|UND_ERR_\w+)$/;

export const defaultClassifier: ErrorClassifier = (err) => {
  if (!(err instanceof Error)) return 'transient';
  if (err instanceof z.ZodError) return 'poison';
  if (!DETERMINISTIC.has(err.name)) return 'transient';
  if (err.name === 'TypeError' && isNetworkError(err)) return 'transient';
  return 'poison';
};

function isNetworkError(err: Error): boolean {
  const cause = (err as { cause?: { code?: unknown } }).cause;
  return err.message === 'fetch failed' || (typeof cause?.code === 'string' && NETWORK_CODES.test(cause.code));
}

export const defaultPoisonPolicy: PoisonPolicy = {
  classify: defaultClassifier,
  maxTransientRetries: 6,
  maxUnavailableMs: 10 * 60_000,
  unavailableLogEveryMs: 30_000,
  initialBackoffMs: 200,
  maxBackoffMs: 5_000,
};

/** Backoff before transient retry number `retry` (1-based). */
export function backoffMs(policy: PoisonPolicy, retry: number): number {
  return Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** Math.max(0, retry - 1));
}

/** The error's class name, for the dead-letter record and the metric. */
export function errorClass(err: unknown): string {
  if (err instanceof z.ZodError) return 'ZodError';
  return err instanceof Error ? err.name || 'Error' : typeof err;
}

/**
 * An error's text without the values it may quote (a zod issue shows only codes and paths; other
 * messages lose anything in quotes or brackets and long digit runs), capped in length. Handler
 * errors may echo input; the dead-letter topic carries ids and reasons, never content.
 */
export function sanitisedReason(err: unknown): string {
  if (err instanceof z.ZodError) {
    return cap(err.issues.map((i) => `${i.code} at ${i.path.map(String).join('.') || '(root)'}`).join('; '));
  }
  const text = err instanceof Error ? err.message : String(err);
  return cap(
    text
      .replace(/(["'`])(?:(?!\1).)*\1/g, '…')
      .replace(/\([^)]*\)/g, '(…)')
      .replace(/\d{6,}/g, '…')
      .replace(/\s+/g, ' ')
      .trim(),
  );
}

function cap(s: string): string {
  return s.length > 300 ? `${s.slice(0, 299)}…` : s;
}

/** A UUID derived from the message's position in the log, so parking it twice gives one id. */
export function deadLetterId(group: string, topic: string, partition: number, offset: string): string {
  const h = createHash('sha256').update(`${group}\0${topic}\0${partition}\0${offset}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const hex = h.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
