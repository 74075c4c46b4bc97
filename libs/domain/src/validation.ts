/**
 * Guards for programmer errors (bad config or adapter bugs), not for caller input:
 * caller input is answered with a denial, these throw.
 */

export function assertNonNegativeInteger(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative safe integer, got ${String(value)}`);
  }
}

export function assertPositiveInteger(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive safe integer, got ${String(value)}`);
  }
}

export function assertNonNegativeMicrousd(value: bigint, name: string): void {
  if (typeof value !== 'bigint' || value < 0n) {
    throw new RangeError(`${name} must be a non-negative bigint (micro-USD), got ${String(value)}`);
  }
}
