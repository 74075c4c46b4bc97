import { assertNonNegativeInteger, assertNonNegativeMicrousd, assertPositiveInteger } from './validation';

describe('validation guards', () => {
  it.each([0, 1, Number.MAX_SAFE_INTEGER])('non-negative accepts %p', (v) => {
    expect(() => assertNonNegativeInteger(v, 'x')).not.toThrow();
  });
  it.each([-1, 1.5, NaN, Infinity, Number.MAX_SAFE_INTEGER + 1])('non-negative rejects %p', (v) => {
    expect(() => assertNonNegativeInteger(v, 'x')).toThrow(RangeError);
  });
  it.each([1, 7])('positive accepts %p', (v) => {
    expect(() => assertPositiveInteger(v, 'x')).not.toThrow();
  });
  it.each([0, -3, 2.5, NaN])('positive rejects %p', (v) => {
    expect(() => assertPositiveInteger(v, 'x')).toThrow(/x must be a positive/);
  });
  it('micro-USD must be a non-negative bigint', () => {
    expect(() => assertNonNegativeMicrousd(0n, 'm')).not.toThrow();
    expect(() => assertNonNegativeMicrousd(-1n, 'm')).toThrow(RangeError);
    expect(() => assertNonNegativeMicrousd(5 as unknown as bigint, 'm')).toThrow(RangeError);
  });
});
