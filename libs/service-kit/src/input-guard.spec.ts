import { Readable } from 'node:stream';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { ContentCipher } from '@gateway/messaging';
import { DomainError } from '@gateway/domain';
import { KAFKA_DEFAULT_MESSAGE_MAX_BYTES, loadHttpInputConfig, maxBodyBytesFor } from './config';
import { assertIdempotencyKeyAcceptable, assertUrlAcceptable, inputGuard, jsonDepthExceeds, parseJsonBody } from './input-guard';

const code = (fn: () => unknown): string | null => {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof DomainError ? err.code : `not a DomainError: ${String(err)}`;
  }
};
const parse = (text: string) => () => parseJsonBody(Buffer.from(text, 'utf8'));

/** Runs the guard's middleware chain over one in-process request; resolves with the error passed to next, or the parsed body. */
async function through(body: Buffer, limit = 1024, url = '/v1/chat/completions'): Promise<{ err: unknown; body: unknown }> {
  const req = Object.assign(Readable.from([body]), {
    url,
    originalUrl: url,
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
  }) as unknown as Request;
  for (const mw of inputGuard({ bodyLimitBytes: limit }) as RequestHandler[]) {
    const err = await new Promise<unknown>((resolve) => mw(req, {} as Response, resolve as NextFunction));
    if (err) return { err, body: undefined };
  }
  return { err: null, body: req.body };
}

describe('parseJsonBody (every service, before any handler)', () => {
  // Issue 7: each of these reached a handler and ended as a 5xx.
  it.each([
    ['a 10,000-deep array (stack overflow → 500)', '['.repeat(10_000) + ']'.repeat(10_000)],
    ['a 5,000-deep object (admitted, reserved, then 502)', '{"a":'.repeat(5_000) + '1' + '}'.repeat(5_000)],
    ['65 levels', '['.repeat(65) + ']'.repeat(65)],
    ['1e999 anywhere (Infinity)', '{"messages":[{"content":"x","x":[1e999]}]}'],
    ['-1e999', '{"a":-1e999}'],
    ['a float beyond 2^53 (1.5e300)', '{"temperature":1.5e300}'],
    ['n beyond 2^53 (decision event fails its schema)', '{"n":9007199254740993}'],
    ['candidateCount beyond 2^53', '{"generationConfig":{"candidateCount":1e300}}'],
    ['NUL in a string (Postgres 22P05/22021)', '{"model":"a\\u0000b"}'],
    ['NUL in a key', '{"a\\u0000":1}'],
    ['a lone high surrogate (22P02)', '{"model":"\\ud800"}'],
    ['a lone low surrogate', '{"x":["ok","\\udc00x"]}'],
    ['a lone surrogate in a key', '{"\\udbff":1}'],
    ['not JSON', 'model=x&messages=y'],
    ['truncated JSON', '{"model":'],
  ])('%s → 400 invalid_request', (_what, text) => {
    expect(code(parse(text))).toBe('invalid_request');
  });

  it('invalid UTF-8 bytes → 400 invalid_request', () => {
    expect(code(() => parseJsonBody(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])))).toBe('invalid_request');
  });

  it.each([
    ['64 levels', '['.repeat(64) + ']'.repeat(64)],
    ['brackets inside strings do not count', JSON.stringify({ s: '[[[[{{{{'.repeat(100), e: 'a\\"[[[' })],
    ['a surrogate pair (emoji)', '{"model":"\\ud83d\\ude00 😀"}'],
    ['2^53 − 1 and fractions', '{"a":9007199254740991,"b":-9007199254740991,"c":1.5,"d":1e-300,"e":-0.25e3}'],
  ])('%s is accepted', (_what, text) => {
    expect(code(parse(text))).toBeNull();
  });

  it('the depth scan is linear and stops at the limit', () => {
    expect(jsonDepthExceeds('{"a":'.repeat(1_000_000), 64)).toBe(true);
    expect(jsonDepthExceeds('"' + '['.repeat(100) + '"', 64)).toBe(false);
  });
});

describe('assertUrlAcceptable (path and query parameters of every service)', () => {
  it.each([
    ['NUL in a path parameter', '/v1/actions/ab%00cd'],
    ['malformed percent-encoding', '/routes/%E0%A4%A'],
    ['percent-encoded invalid UTF-8', '/routes/%ff'],
    ['an encoded lone surrogate', '/routes/%ED%A0%80'],
    ['NUL in a query value', '/ledger?workload_id=a%00'],
    ['NUL in a query name', '/ledger?a%00=1'],
    ['a repeated query parameter', '/ledger?limit=1&limit=2'],
    ['a repeated Gemini alt', '/v1beta/models/x:streamGenerateContent?alt=sse&alt=json'],
  ])('%s → 400 invalid_request', (_what, url) => {
    expect(code(() => assertUrlAcceptable(url))).toBe('invalid_request');
  });

  it.each(['/v1/chat/completions', '/v1beta/models/gemini-flash:generateContent?alt=sse', '/ledger?from=a&to=b&cursor=%2F', '/cases?'])(
    '%s is accepted',
    (url) => expect(code(() => assertUrlAcceptable(url))).toBeNull(),
  );
});

describe('assertIdempotencyKeyAcceptable', () => {
  it('refuses empty, over 255 characters and non-printable keys', () => {
    expect(code(() => assertIdempotencyKeyAcceptable(''))).toBe('invalid_request');
    expect(code(() => assertIdempotencyKeyAcceptable('k'.repeat(256)))).toBe('invalid_request');
    expect(code(() => assertIdempotencyKeyAcceptable('caf\u00e9'))).toBe('invalid_request');
    expect(code(() => assertIdempotencyKeyAcceptable('k'.repeat(255)))).toBeNull();
    expect(code(() => assertIdempotencyKeyAcceptable(undefined))).toBeNull();
  });
});

describe('inputGuard body limit', () => {
  it('a body over the limit is 413 payload_too_large', async () => {
    const { err } = await through(Buffer.from(JSON.stringify({ s: 'x'.repeat(2000) })));
    expect(err).toMatchObject({ type: 'entity.too.large' });
  });

  it('a body that grows past the limit once re-serialised (1e15 → sixteen digits) is 413', async () => {
    const small = Buffer.from(`[${Array(200).fill('1e15').join(',')}]`);
    expect(small.length).toBeLessThan(1024);
    const { err } = await through(small);
    expect(err).toMatchObject({ code: 'payload_too_large' });
  });

  it('parses an acceptable body whatever the content type says', async () => {
    expect(await through(Buffer.from('{"a":[1,2]}'))).toEqual({ err: null, body: { a: [1, 2] } });
  });
});

describe('the default body limit fits one Kafka message', () => {
  it('derives from message.max.bytes, and the largest body still fits once encrypted in its envelope', () => {
    const limit = loadHttpInputConfig({}).maxBodyBytes;
    expect(limit).toBe(maxBodyBytesFor(KAFKA_DEFAULT_MESSAGE_MAX_BYTES));
    expect(limit).toBeGreaterThan(700_000);
    // The largest acceptable body inside a dispatch command with generous route fields, encrypted
    // and wrapped as admission publishes it.
    const body = { model: 'm'.repeat(128), messages: [{ role: 'user', content: 'x'.repeat(limit - 200) }] };
    expect(Buffer.byteLength(JSON.stringify(body))).toBeLessThanOrEqual(limit);
    const command = {
      action_id: 'a'.repeat(36),
      request_id: 'r'.repeat(36),
      workload_id: 'w'.repeat(200),
      environment: 'e'.repeat(64),
      route: { base_url: 'https://' + 'h'.repeat(2000), upstream_model: 'u'.repeat(256), model_alias: 'm'.repeat(128) },
      deadline: new Date(0).toISOString(),
      dispatch_deadline: new Date(0).toISOString(),
      request: body,
    };
    const value = {
      event_id: 'e'.repeat(36),
      action_id: 'a'.repeat(36),
      reply_to: 'i'.repeat(200),
      dispatch_deadline: new Date(0).toISOString(),
      body: new ContentCipher(Buffer.alloc(32, 7)).encrypt(command, 'a'.repeat(36)),
    };
    const recordOverhead = 61 + 36 + 64; // record batch header, key, record framing and headers
    expect(Buffer.byteLength(JSON.stringify(value)) + recordOverhead).toBeLessThanOrEqual(KAFKA_DEFAULT_MESSAGE_MAX_BYTES);
  });
});
