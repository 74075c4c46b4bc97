import { fragments, midEvent } from './exchange';

describe('fragments', () => {
  const bytes = Buffer.from('\uFEFFdata: naïve 日本 🚀\r\n\r\n', 'utf8');
  const pieces = fragments(bytes);

  it('loses and reorders nothing', () => {
    expect(Buffer.concat(pieces).equals(bytes)).toBe(true);
  });

  it('cuts inside every multi-byte character and between every CR and LF', () => {
    const decodedAlone = pieces.map((p) => p.toString('utf8'));
    // Decoding the pieces one by one mangles every non-ASCII character (BOM, ï, 日, 本, 🚀).
    expect(decodedAlone.join('').split('\uFFFD').length - 1).toBeGreaterThanOrEqual(5);
    expect(pieces.filter((p) => p[p.length - 1] === 0x0d)).toHaveLength(2);
    for (const p of pieces) expect(p[p.length - 1] === 0x0d || p[p.length - 1] >= 0xc0 || p === pieces[pieces.length - 1]).toBe(true);
  });
});

describe('midEvent', () => {
  it('pauses after a whole SSE event or JSON-array element past the middle', () => {
    const sse = 'data: 1\n\ndata: 2\n\ndata: 3\n\n';
    expect(sse.slice(0, midEvent(sse))).toBe('data: 1\n\ndata: 2\n\n');
    const array = '[{"a":1},\r\n{"a":2},\r\n{"a":3}';
    expect(array.slice(0, midEvent(array))).toBe('[{"a":1},\r\n{"a":2},\r\n');
    expect(midEvent('no separator')).toBe('no separator'.length);
  });
});
