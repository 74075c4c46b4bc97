import { spawnSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import type { Request, Response } from 'express';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
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

describe('createLogger destination', () => {
  it('writes each line before the call returns: a process killed right after keeps all of them', () => {
    // A child logs 300 lines through the default destination, then SIGKILLs itself: no exit
    // hook runs. An asynchronous destination (pino's default) loses what its thread pool had
    // not written yet.
    const script =
      "const { createLogger } = require('./libs/service-kit/src/logger.ts');" +
      "const log = createLogger('killed', 'info');" +
      "for (let i = 0; i < 300; i++) log.info({ i }, 'line');" +
      "process.kill(process.pid, 'SIGKILL');";
    const child = spawnSync(process.execPath, ['-r', '@swc-node/register', '-e', script], {
      cwd: path.resolve(__dirname, '../../..'),
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(child.signal).toBe('SIGKILL');
    const lines = child.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number; service: string });
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 300 }, (_, i) => i));
    expect(lines[299].service).toBe('killed');
  });
});

describe('requestLog', () => {
  const setup = () => {
    const lines: Array<Record<string, unknown>> = [];
    const mw = requestLog(createLogger('test', 'info', { write: (line: string) => void lines.push(JSON.parse(line)) }));
    const request = (
      method: string,
      originalUrl: string,
      status: number,
      end: 'finish' | 'close' | 'both' = 'finish',
      headersSent = end !== 'close',
    ) => {
      const res = Object.assign(new EventEmitter(), { statusCode: status, headersSent }) as unknown as Response;
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
    request('POST', '/v1/chat/completions', 503, 'both');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      res: { statusCode: 503 },
      err: { type: 'Error', message: 'failed with status code 503' },
      msg: 'request errored',
    });
  });

  it('a connection closed before the answer is "request aborted", without the default status no client saw', () => {
    const { lines, request } = setup();
    // Nest's default for a POST is 201 until the handler sets one; nothing was sent.
    request('POST', '/v1/chat/completions', 201, 'close');
    // Headers went out (a stream the client left): the status sent is kept.
    request('POST', '/v1/chat/completions', 200, 'close', true);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      level: 30,
      req: { method: 'POST', path: '/v1/chat/completions' },
      res: { statusCode: null },
      msg: 'request aborted',
    });
    expect(lines[0]).not.toHaveProperty('err');
    expect(typeof lines[0].responseTime).toBe('number');
    expect(lines[1]).toMatchObject({ res: { statusCode: 200 }, msg: 'request aborted' });
  });

  it('on a real server: an answered request is "completed" with its status, one the client left is "aborted"', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const mw = requestLog(createLogger('test', 'info', { write: (line: string) => void lines.push(JSON.parse(line)) }));
    const server = http.createServer((req, res) => {
      res.statusCode = 201; // what Nest sets for a POST before the handler answers
      mw(req as unknown as Request, res as unknown as Response, () => {
        if (req.url === '/answer') res.end('{}');
        // '/stall' never answers: the client gives up
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      await new Promise<void>((resolve, reject) =>
        http
          .request({ port, host: '127.0.0.1', path: '/answer', method: 'POST' }, (res) => res.resume().on('end', resolve))
          .on('error', reject)
          .end(),
      );
      const stalled = http.request({ port, host: '127.0.0.1', path: '/stall', method: 'POST' });
      stalled.on('error', () => undefined).end();
      await new Promise((resolve) => setTimeout(resolve, 50));
      stalled.destroy();
      for (let i = 0; i < 100 && lines.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
    expect(lines.map((l) => [l.msg, (l.req as { path: string }).path, (l.res as { statusCode: unknown }).statusCode])).toEqual([
      ['request completed', '/answer', 201],
      ['request aborted', '/stall', null],
    ]);
  });
});
