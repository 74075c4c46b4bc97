import { Readable } from 'node:stream';
// eslint-disable-next-line no-restricted-imports -- what Nest's router throws, to map
import { NotFoundException } from '@nestjs/common';
import express, { Request, Response } from 'express';
import { DomainError } from '@gateway/domain';
import { isDatabaseUnavailable } from '@gateway/db';
import { classifyConsumerError, GatewayExceptionFilter, toDomainError } from './errors';

/** What express's JSON body parser passes to `next` for this body (in process, no socket). */
function bodyParserError(body: string, limit = '64b'): Promise<unknown> {
  const req = Object.assign(Readable.from([Buffer.from(body)]), {
    headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
  });
  return new Promise((resolve) => express.json({ limit })(req as unknown as Request, {} as Response, resolve));
}

function fakeResponse() {
  const out = { status: 0, headers: {} as Record<string, string>, body: undefined as unknown };
  const res = {
    headersSent: false,
    setHeader: (k: string, v: string) => void (out.headers[k] = v),
    status: (s: number) => ((out.status = s), res),
    json: (b: unknown) => void (out.body = b),
  };
  return { res: res as unknown as Response, out };
}

describe('toDomainError', () => {
  it('keeps domain errors (and their subclasses) as they are', () => {
    const e = new DomainError('case_not_found', 'gone');
    expect(toDomainError(e)).toBe(e);
  });

  it("maps Nest's own exceptions by status", () => {
    expect(toDomainError(new NotFoundException('Cannot GET /nope'))).toMatchObject({ code: 'not_found', message: 'Cannot GET /nope' });
  });

  it('maps malformed JSON from the body parser to invalid_request', async () => {
    expect(toDomainError(await bodyParserError('{"model":'))).toMatchObject({ code: 'invalid_request' });
  });

  it('maps a body over the limit to payload_too_large (was 400 invalid_request)', async () => {
    expect(toDomainError(await bodyParserError(JSON.stringify({ text: 'x'.repeat(200) })))).toMatchObject({ code: 'payload_too_large' });
  });

  it('leaves anything else to the 500 path', () => {
    expect(toDomainError(new Error('db down'))).toBeNull();
  });

  it('a database that cannot take work (terminated connection, pool exhausted) is a 503 with Retry-After, not a 500', () => {
    for (const message of [
      'Raw query failed. Code: `57P01`. Message: `terminating connection due to administrator command`',
      'Transaction API error: Unable to start a transaction in the given time.',
      'timeout exceeded when trying to connect',
    ]) {
      expect(toDomainError(new Error(message))).toMatchObject({ code: 'service_unavailable', headers: { 'retry-after': '1' } });
    }
  });

  it('so is the same failure from plain pg (admission’s prepared statement): the SQLSTATE is the error code', () => {
    for (const [code, message] of [
      ['57P01', 'terminating connection due to administrator command'],
      ['53300', 'sorry, too many clients already'],
      ['08006', 'connection failure'],
    ]) {
      const e = Object.assign(new Error(message), { code, severity: 'FATAL' });
      expect(toDomainError(e)).toMatchObject({ code: 'service_unavailable', headers: { 'retry-after': '1' } });
    }
    expect(toDomainError(Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' }))).toBeNull();
  });
});

describe('GatewayExceptionFilter', () => {
  const errors: object[] = [];
  const filter = new GatewayExceptionFilter({ error: (o) => errors.push(o) });
  const req = (path: string) => ({ path }) as Request;

  it('writes a body-parser failure as 413 with x-should-retry false, through the express error handler', async () => {
    const { res, out } = fakeResponse();
    filter.expressErrorHandler(await bodyParserError('"' + 'x'.repeat(100) + '"'), req('/v1/chat/completions'), res, () => undefined);
    expect(out.status).toBe(413);
    expect(out.headers['x-should-retry']).toBe('false');
    expect(out.body).toEqual({
      error: { message: expect.stringContaining('exceeds'), type: 'invalid_request_error', code: 'payload_too_large', param: null },
    });
  });

  it('answers the Gemini endpoints in the Gemini shape', async () => {
    const { res, out } = fakeResponse();
    filter.handle(await bodyParserError('{'), req('/v1beta/models/m:generateContent'), res);
    expect(out.status).toBe(400);
    expect(out.body).toMatchObject({ error: { code: 400, status: 'invalid_request' } });
  });

  it.each([
    ['/v1beta/models/m:generateContent', {}, true],
    ['/v1/models/m:streamGenerateContent', {}, true],
    ['/v1beta/models', {}, true],
    ['/v1/models', {}, false],
    ['/v1/models', { authorization: 'Bearer gw_x' }, false],
    // the model list is both dialects' path: the Gemini SDK's key header picks Gemini's shape
    ['/v1/models', { 'x-goog-api-key': 'gw_x' }, true],
    ['/v1/models/m', { 'x-goog-api-key': 'gw_x' }, true],
    ['/v1/chat/completions', { 'x-goog-api-key': 'gw_x' }, false],
  ])('writes %s %j in the Gemini shape: %p', (path, headers, gemini) => {
    const { res, out } = fakeResponse();
    filter.handle(new DomainError('unknown_route', 'no such alias', 'model'), { ...req(path), headers } as Request, res);
    expect(out.status).toBe(404);
    if (gemini) expect(out.body).toMatchObject({ error: { code: 404, status: 'unknown_route' } });
    else expect(out.body).toMatchObject({ error: { code: 'unknown_route', param: 'model' } });
  });

  it("sets the error's own headers", () => {
    const { res, out } = fakeResponse();
    filter.handle(
      new DomainError('token_quota_exceeded', 'slow down', undefined, { 'retry-after': '7' }),
      req('/v1/chat/completions'),
      res,
    );
    expect(out.status).toBe(429);
    expect(out.headers).toEqual({ 'x-should-retry': 'true', 'retry-after': '7' });
  });

  it('answers anything unexpected with a 500 without internals, and logs it', () => {
    const { res, out } = fakeResponse();
    filter.handle(new Error('secret internals'), req('/routes'), res);
    expect(out.status).toBe(500);
    expect(JSON.stringify(out.body)).not.toContain('secret');
    expect(out.body).toMatchObject({ error: { code: 'internal_error', type: 'api_error' } });
    expect(errors).toHaveLength(1);
  });
});

describe('classifyConsumerError', () => {
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
  it.each([
    // the server cannot be reached or went away: wait for it (minutes), do not park
    [Object.assign(new Error("Can't reach database server at 127.0.0.1:5432"), { code: 'P1001' }), 'unavailable'],
    [Object.assign(new Error('Server has closed the connection.'), { code: 'P1017' }), 'unavailable'],
    [pgError('57P03', 'the database system is starting up'), 'unavailable'],
    [pgError('57P01', 'terminating connection due to administrator command'), 'unavailable'],
    [pgError('08006', 'connection failure'), 'unavailable'],
    [new Error('Connection terminated unexpectedly'), 'unavailable'],
    [new Error('connect ECONNREFUSED 127.0.0.1:5432'), 'unavailable'],
    // the server answers but takes no writes (read-only, disk full): every message would fail alike
    [pgError('25006', 'cannot execute INSERT in a read-only transaction'), 'unavailable'],
    [pgError('53100', 'could not extend file "base/16385/16712": No space left on device'), 'unavailable'],
    [
      Object.assign(new Error('Raw query failed. Code: `25006`. Message: `cannot execute SELECT FOR UPDATE in a read-only transaction`'), {
        code: 'P2010',
      }),
      'unavailable',
    ],
    [Object.assign(new Error('Database error. Code: `53100`. Message: `could not extend file`'), { code: 'P2039' }), 'unavailable'],
    // a busy server or the work itself: the transient retries, then parked
    [new Error('timeout exceeded when trying to connect'), 'transient'],
    [pgError('53300', 'sorry, too many clients already'), 'transient'],
    [Object.assign(new Error('Transaction already closed'), { code: 'P2028' }), 'transient'],
    [pgError('40P01', 'deadlock detected'), 'transient'],
    // the message itself is wrong
    [new RangeError('cachedInputTokens cannot exceed inputTokens'), 'poison'],
  ])('%p is %s', (err, kind) => expect(classifyConsumerError(err)).toBe(kind));

  it('every error it waits for is one the API answers 503 for', () => {
    for (const err of [
      Object.assign(new Error("Can't reach database server"), { code: 'P1001' }),
      pgError('57P03', 'the database system is starting up'),
      new Error('Connection terminated unexpectedly'),
      pgError('25006', 'cannot execute INSERT in a read-only transaction'),
    ])
      expect(isDatabaseUnavailable(err)).toBe(true);
  });

  it('a database that takes no writes is a 503 that says so, not a 500', () => {
    for (const err of [
      pgError('25006', 'cannot execute INSERT in a read-only transaction'),
      Object.assign(new Error('Database error. Code: `53100`. Message: `could not extend file`'), { code: 'P2039' }),
    ]) {
      const denial = toDomainError(err);
      expect(denial?.code).toBe('service_unavailable');
      expect(denial?.headers).toEqual({ 'retry-after': '1' });
      expect(denial?.message).toBe("the gateway's database takes no writes right now; retry shortly");
    }
    expect(toDomainError(pgError('57P03', 'the database system is starting up'))?.message).toBe(
      'the gateway cannot reach its database right now; retry shortly',
    );
  });
});
