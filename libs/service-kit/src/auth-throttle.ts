import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { DomainError } from '@gateway/domain';

export interface AuthThrottleOptions {
  /** failed authentications a source may make in a burst */
  burst: number;
  /** failed authentications a source earns back per minute */
  perMinute: number;
  /** sources remembered at most (the least recently seen are forgotten first) */
  maxSources?: number;
}

interface Bucket {
  tokens: number;
  atMs: number;
}

/**
 * A token bucket of failed authentications per source address, in memory and per instance (so
 * N instances behind a balancer allow N times the rate; see docs/decisions.md). A source whose
 * bucket is empty is refused before its credential is even looked at, so a blocked source learns
 * nothing about the keys it tries.
 */
export class AuthFailureThrottle {
  private readonly buckets = new Map<string, Bucket>();
  private readonly maxSources: number;
  private readonly refillPerMs: number;

  constructor(
    private readonly opts: AuthThrottleOptions,
    private readonly nowMs: () => number,
  ) {
    this.maxSources = opts.maxSources ?? 100_000;
    this.refillPerMs = opts.perMinute / 60_000;
  }

  /** Seconds until the source may try again, or 0 when it may now. */
  retryAfterSeconds(source: string): number {
    const b = this.current(source);
    if (!b || b.tokens >= 1) return 0;
    return Math.max(1, Math.ceil((1 - b.tokens) / this.refillPerMs / 1000));
  }

  recordFailure(source: string): void {
    const b = this.current(source) ?? { tokens: this.opts.burst, atMs: this.nowMs() };
    b.tokens = Math.max(0, b.tokens - 1);
    // re-insert: the Map's order is least recently failed first
    this.buckets.delete(source);
    this.buckets.set(source, b);
    while (this.buckets.size > this.maxSources) {
      const oldest = this.buckets.keys().next().value;
      if (oldest === undefined) break;
      this.buckets.delete(oldest);
    }
  }

  private current(source: string): Bucket | undefined {
    const b = this.buckets.get(source);
    if (!b) return undefined;
    const now = this.nowMs();
    b.tokens = Math.min(this.opts.burst, b.tokens + (now - b.atMs) * this.refillPerMs);
    b.atMs = now;
    if (b.tokens >= this.opts.burst) {
      this.buckets.delete(source); // full again: nothing to remember
      return undefined;
    }
    return b;
  }
}

/**
 * The source a request is throttled by: the peer address (or, with Express's `trust proxy`, the
 * client address the trusted proxies report). IPv4-mapped IPv6 is plain IPv4; an IPv6 client is
 * keyed by its /64, which one subscriber usually holds whole.
 */
export function sourceOf(req: Pick<Request, 'ip' | 'socket'>): string {
  const raw = (req.ip ?? req.socket?.remoteAddress ?? 'unknown').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
  if (!raw.includes(':')) return raw;
  const [head] = raw.split('::');
  const groups = raw.includes('::') ? head.split(':').filter(Boolean) : raw.split(':');
  while (groups.length < 4) groups.push('0');
  return `${groups.slice(0, 4).join(':')}::/64`;
}

/**
 * Middleware: a source over its failed-authentication budget gets 429
 * `authentication_rate_limited` with Retry-After for every request (health and metrics excepted);
 * any 401 answered to a source costs it one token.
 */
export function authThrottleMiddleware(throttle: AuthFailureThrottle, onRefused: () => void = () => undefined): RequestHandler {
  return (req: Request, res: Response, next: NextFunction) => {
    if (/^\/(health|metrics)(\/|$)/.test(req.path)) return next();
    const source = sourceOf(req);
    const wait = throttle.retryAfterSeconds(source);
    if (wait > 0) {
      onRefused();
      return next(
        new DomainError(
          'authentication_rate_limited',
          `too many failed authentications from this address; retry after ${wait}s`,
          undefined,
          { 'retry-after': String(wait) },
        ),
      );
    }
    res.on('finish', () => {
      if (res.statusCode === 401) throttle.recordFailure(source);
    });
    next();
  };
}
