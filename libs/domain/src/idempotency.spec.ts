import fc from 'fast-check';
import { canonicalJson, fingerprint, requestFingerprint } from './idempotency';

describe('canonicalJson', () => {
  it.each<[unknown, string]>([
    [null, 'null'],
    [true, 'true'],
    [0, '0'],
    [-0, '0'],
    [1.5, '1.5'],
    ['a"b', '"a\\"b"'],
    [[], '[]'],
    [{}, '{}'],
    [{ b: 1, a: 2 }, '{"a":2,"b":1}'],
    [{ z: { y: 1, x: [3, { d: 1, c: 2 }] }, a: null }, '{"a":null,"z":{"x":[3,{"c":2,"d":1}],"y":1}}'],
    [{ a: undefined, b: () => 1, c: 1 }, '{"c":1}'],
    [[undefined, () => 1], '[null,null]'],
    [{ when: new Date('2030-01-01T00:00:00.000Z') }, '{"when":"2030-01-01T00:00:00.000Z"}'],
    [{ B: 1, a: 2, _: 3 }, '{"B":1,"_":3,"a":2}'],
  ])('%p -> %s', (value, expected) => {
    expect(canonicalJson(value)).toBe(expected);
  });

  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['NaN', NaN],
    ['Infinity', { x: Infinity }],
    ['bigint', { x: 1n }],
    ['symbol', [Symbol('s')]],
    ['Map', new Map()],
    ['Set', { s: new Set([1]) }],
  ])('throws on %s', (_label, value) => {
    expect(() => canonicalJson(value)).toThrow(TypeError);
  });

  it('throws on cycles but accepts shared (acyclic) references', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(/cyclic/);
    const shared = { v: 1 };
    expect(canonicalJson({ a: shared, b: [shared] })).toBe('{"a":{"v":1},"b":[{"v":1}]}');
  });

  it('property: parses back to the same JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        expect(JSON.parse(canonicalJson(v))).toEqual(JSON.parse(JSON.stringify(v)));
      }),
    );
  });

  it('property: insensitive to key insertion order', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (obj) => {
        const reversed = Object.fromEntries(Object.entries(obj).reverse());
        expect(canonicalJson(reversed)).toBe(canonicalJson(obj));
      }),
    );
  });

  it('property: canonical form is a fixed point', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const once = canonicalJson(v);
        expect(canonicalJson(JSON.parse(once))).toBe(once);
      }),
    );
  });
});

describe('fingerprint', () => {
  it('is the sha256 hex of the canonical JSON', () => {
    // sha256("{}") — a well-known digest.
    expect(fingerprint({})).toBe('44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a');
    expect(requestFingerprint('{}')).toBe(fingerprint({}));
  });

  it('distinguishes values that differ', () => {
    expect(fingerprint({ n: 1 })).not.toBe(fingerprint({ n: 2 }));
    expect(fingerprint({ n: 1 })).not.toBe(fingerprint({ n: '1' }));
    expect(fingerprint([1, 2])).not.toBe(fingerprint([2, 1]));
  });

  it('property: same for reordered keys, always 64 lowercase hex chars', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), fc.jsonValue()), (obj) => {
        const reversed = Object.fromEntries(Object.entries(obj).reverse());
        const f = fingerprint(obj);
        expect(f).toMatch(/^[0-9a-f]{64}$/);
        expect(fingerprint(reversed)).toBe(f);
      }),
    );
  });
});
