import { EventEmitter } from 'node:events';
import type { Request, Response } from 'express';
import { createLogger, requestLog } from './logger';

describe('createLogger redaction', () => {
  it('removes headers, bodies and upstream keys however they are nested', () => {
    const lines: string[] = [];
    const log = createLogger('test', 'info', { write: (line: string) => void lines.push(line) });
    log.info(
      {
        authorization: 'Bearer sk-canary-1',
        'x-goog-api-key': 'AIza-canary-2',
        credential: 'sk-canary-3',
        req: { headers: { authorization: 'Bearer sk-canary-4' } },
        upstream: { authorization: 'Bearer sk-canary-5', 'x-goog-api-key': 'AIza-canary-6', credential: 'sk-canary-7' },
        action_id: 'act-1',
      },
      'attempt',
    );
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0])).toMatchObject({ action_id: 'act-1', upstream: {}, req: {} });
    expect(lines[0]).not.toMatch(/canary/);
  });
});

describe('requestLog', () => {
  const setup = () => {
    const lines: Array<Record<string, unknown>> = [];
    const mw = requestLog(createLogger('test', 'info', { write: (line: string) => void lines.push(JSON.parse(line)) }));
    const request = (method: string, originalUrl: string, status: number, end: 'finish' | 'close' | 'both' = 'finish') => {
      const res = Object.assign(new EventEmitter(), { statusCode: status }) as unknown as Response;
      let passed = false;
      mw({ method, originalUrl, url: originalUrl, headers: { authorization: 'Bearer sk-canary' } } as unknown as Request, res, () => {
        passed = true;
      });
      if (end !== 'close') (res as unknown as EventEmitter).emit('finish');
      if (end !== 'finish') (res as unknown as EventEmitter).emit('close');
      expect(passed).toBe(true);
    };
    return { lines, request };
  };

  it('writes one line per request as pino-http did: method, path without the query, status, duration', () => {
    const { lines, request } = setup();
    request('POST', '/v1beta/models/m:generateContent?key=AIza-canary', 200, 'both');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      service: 'test',
      req: { method: 'POST', path: '/v1beta/models/m:generateContent' },
      res: { statusCode: 200 },
      msg: 'request completed',
    });
    expect(Object.keys(lines[0])).toEqual(['level', 'time', 'service', 'req', 'res', 'responseTime', 'msg']);
    expect(JSON.stringify(lines)).not.toMatch(/canary|authorization/);
  });

  it('a 5xx is "request errored" with the error; health and metrics are not logged', () => {
    const { lines, request } = setup();
    request('GET', '/health', 200);
    request('GET', '/metrics', 200);
    request('POST', '/v1/chat/completions', 503, 'close');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      res: { statusCode: 503 },
      err: { message: 'failed with status code 503' },
      msg: 'request errored',
    });
  });
});
