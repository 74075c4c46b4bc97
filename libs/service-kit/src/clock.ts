import { randomBytes, randomUUID } from 'node:crypto';
import { Inject } from '@nestjs/common';

/**
 * Time, identifiers and key entropy are injected (DESIGN: "the clock and randomness are passed
 * in"), so use cases, consumers and caches run under a frozen clock and fixed ids in tests.
 * CoreModule provides the system implementations to every service.
 */
export interface Clock {
  now(): Date;
}
export const CLOCK = Symbol('CLOCK');
export const systemClock: Clock = { now: () => new Date() };

/** What `awaitAtMost` gives when the promise has not settled in time. */
export const TIMED_OUT = Symbol('TIMED_OUT');

/**
 * `work`'s value, or TIMED_OUT when it has not settled within `ms` (its error, if it fails within
 * that time, is rethrown). The work itself runs on; only the wait is bounded. A real timer, not
 * the injected clock: what it bounds is how long a caller is held.
 */
export async function awaitAtMost<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), Math.max(0, ms));
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** New ids for rows and events (UUIDs in production). */
export interface IdGenerator {
  next(): string;
}
export const ID_GENERATOR = Symbol('ID_GENERATOR');
export const randomIds: IdGenerator = { next: () => randomUUID() };

export interface Entropy {
  bytes(n: number): Buffer;
}
export const ENTROPY = Symbol('ENTROPY');
export const systemEntropy: Entropy = { bytes: (n) => randomBytes(n) };

export const InjectClock = () => Inject(CLOCK);
export const InjectIds = () => Inject(ID_GENERATOR);
