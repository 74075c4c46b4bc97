export interface Clock {
  now(): Date;
}
export const CLOCK = 'CLOCK';
export const UPSTREAM = 'UPSTREAM_DISPATCHER';
export const systemClock: Clock = { now: () => new Date() };
