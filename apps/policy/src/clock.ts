import { randomBytes } from 'node:crypto';

/** The clock and the key entropy are injected so use cases stay testable with frozen values. */
export interface Clock {
  now(): Date;
}
export const CLOCK = 'CLOCK';
export const systemClock: Clock = { now: () => new Date() };

export interface Entropy {
  bytes(n: number): Buffer;
}
export const ENTROPY = 'ENTROPY';
export const systemEntropy: Entropy = { bytes: (n) => randomBytes(n) };
