import { EventEmitter } from 'node:events';
import type { Request, Response } from 'express';
import { AuthFailureThrottle, authThrottleMiddleware, sourceOf } from './auth-throttle';

describe('AuthFailureThrottle', () => {
  let now = 0;
  const throttle = () => new AuthFailureThrottle({ burst: 3, perMinute: 6 }, () => now);

  beforeEach(() => (now = 1_000_000));

  it('lets a burst of failures through, then refuses the source until a token refills', () => {
    const t = throttle();
    for (let i = 0; i < 3; i++) {
      expect(t.retryAfterSeconds('10.0.0.1')).toBe(0);
      t.recordFailure('10.0.0.1');
    }
    expect(t.retryAfterSeconds('10.0.0.1')).toBe(10); // 6 per minute: one every 10 s
    expect(t.retryAfterSeconds('10.0.0.2')).toBe(0); // other sources are not affected
    now += 10_000;
    expect(t.retryAfterSeconds('10.0.0.1')).toBe(0);
  });

  it('forgets the least recently failing sources beyond its size', () => {
    const t = new AuthFailureThrottle({ burst: 1, perMinute: 1, maxSources: 2 }, () => now);
    for (const s of ['a', 'b', 'c']) t.recordFailure(s);
    expect(t.retryAfterSeconds('a')).toBe(0);
    expect(t.retryAfterSeconds('c')).toBeGreaterThan(0);
  });
});

describe('sourceOf', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:10.1.2.3', '10.1.2.3'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
  ])('%s → %s', (ip, key) => expect(sourceOf({ ip } as Request)).toBe(key));
});

describe('authThrottleMiddleware', () => {
  it('counts 401 answers against the source and then answers 429 authentication_rate_limited with Retry-After', () => {
    const t = new AuthFailureThrottle({ burst: 2, perMinute: 60 }, () => 0);
    const mw = authThrottleMiddleware(t);
    let refused = 0;
    const send = (status: number, path = '/v1/chat/completions') => {
      const res = Object.assign(new EventEmitter(), { statusCode: status }) as unknown as Response;
      let passed: unknown = 'not called';
      mw({ ip: '10.9.9.9', path } as Request, res, (err?: unknown) => (passed = err));
      (res as unknown as EventEmitter).emit('finish');
      if (passed) refused++;
      return passed;
    };
    expect(send(401)).toBeUndefined();
    expect(send(200)).toBeUndefined();
    expect(send(401)).toBeUndefined();
    expect(send(200)).toMatchObject({ code: 'authentication_rate_limited', headers: { 'retry-after': '1' } });
    expect(send(200, '/health')).toBeUndefined();
    expect(refused).toBe(1);
  });
});
