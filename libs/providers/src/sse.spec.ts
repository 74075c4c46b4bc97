import { SseDecoder } from './sse';
import { sseData } from './sse-testing';

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

function decodeAll(pieces: Uint8Array[]): string[] {
  const d = new SseDecoder();
  return [...pieces.flatMap((p) => d.push(p)), ...d.end()];
}

const SIZES = [1, 2, 3, 5, 7, 11, 1000];

describe('SseDecoder', () => {
  const text = 'naïve 日本 🚀 café — ok';
  const events = [{ choices: [{ delta: { content: text } }] }, { choices: [{ delta: { content: '∑ ✓' } }] }];
  const expected = events.map((e) => JSON.stringify(e));

  it.each(SIZES)('keeps multi-byte characters whole however the bytes are cut (pieces of %i bytes)', (size) => {
    const body = utf8(expected.map((d) => `data: ${d}\n\n`).join('') + 'data: [DONE]\n\n');
    const out = sseData(body, size);
    expect(out).toEqual([...expected, '[DONE]']);
    expect(out.join('')).not.toContain('\uFFFD');
  });

  it.each(SIZES)('accepts CRLF line endings with CR and LF in different reads (pieces of %i bytes)', (size) => {
    const body = utf8(expected.map((d) => `data: ${d}\r\n\r\n`).join(''));
    expect(sseData(body, size)).toEqual(expected);
  });

  it.each(SIZES)('accepts lone-CR line endings (pieces of %i bytes)', (size) => {
    const body = utf8(expected.map((d) => `data: ${d}\r\r`).join('') + 'data: last\r\r');
    // A lone CR that ends a read may still be the first half of a CRLF, so the last event waits
    // for the next byte or the end of the stream to decide.
    expect(sseData(body, size)).toEqual([...expected, 'last']);
  });

  it.each(SIZES)('drops a leading byte-order mark, even one split across reads (pieces of %i bytes)', (size) => {
    const body = new Uint8Array([0xef, 0xbb, 0xbf, ...utf8('data: {"a":1}\n\n')]);
    expect(sseData(body, size)).toEqual(['{"a":1}']);
  });

  it('keeps a byte-order mark that is not at the very start as content', () => {
    const out = decodeAll([utf8('data: x\n\n'), utf8('data: \uFEFFy\n\n')]);
    expect(out).toEqual(['x', '\uFEFFy']);
  });

  it.each(SIZES)('reads only data from id, event, retry and comment lines (pieces of %i bytes)', (size) => {
    const body = utf8(
      [
        ': keep-alive',
        'retry: 3000',
        'id: 41',
        'event: message',
        'data: {"a":1}',
        '',
        'event: ping',
        'id: 42',
        '',
        'retry: soon',
        'data:{"b":2}',
        '',
        '',
      ].join('\n'),
    );
    // An event with no data line (the ping) is not an event to read.
    expect(sseData(body, size)).toEqual(['{"a":1}', '{"b":2}']);
  });

  it.each(SIZES)('joins multi-line data with LF whatever the line endings (pieces of %i bytes)', (size) => {
    const body = utf8('data: {"b":\r\ndata: 2}\r\n\r\ndata: one\rdata:two\r\rdata: x\ndata\n\n');
    expect(sseData(body, size)).toEqual(['{"b":\n2}', 'one\ntwo', 'x\n']);
  });

  it('holds an event back until its blank line arrives', () => {
    const d = new SseDecoder();
    expect(d.push(utf8('data: {"x":1}\n'))).toEqual([]);
    expect(d.push(utf8('\n'))).toEqual(['{"x":1}']);
  });

  it('discards an event cut before its blank line, and a character cut before its last byte', () => {
    const d = new SseDecoder();
    const bytes = utf8('data: ok\n\ndata: {"text":"日');
    expect(d.push(bytes.subarray(0, bytes.length - 1))).toEqual(['ok']);
    expect(d.end()).toEqual([]);
  });
});
