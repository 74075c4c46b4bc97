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
