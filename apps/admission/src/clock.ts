/** The clock is injected so use cases stay testable with a frozen time. */
export interface Clock {
  now(): Date;
}
export const CLOCK = 'CLOCK';
export const systemClock: Clock = { now: () => new Date() };
