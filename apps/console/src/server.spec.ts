import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createConsoleServer, proxyTarget } from './server';

describe('proxyTarget', () => {
  it('maps the three prefixes to their service with the rest of the path and query unchanged', () => {
    expect(proxyTarget('/api/policy/exceptions?limit=1&x=%00')).toEqual({ service: 'policy', path: '/exceptions?limit=1&x=%00' });
    expect(proxyTarget('/api/settlement/ledger')).toEqual({ service: 'settlement', path: '/ledger' });
    expect(proxyTarget('/api/reconciliation?x=1')).toEqual({ service: 'reconciliation', path: '/?x=1' });
    expect(proxyTarget('/api/reconciliation')).toEqual({ service: 'reconciliation', path: '/' });
  });

  it('proxies nothing else: another spelling, a longer name, other services', () => {
    for (const url of [
      '/api/policyx/exceptions',
      '/api/Policy/exceptions',
      '/api/admission/v1/chat/completions',
      '/policy/exceptions',
      '/api//policy/x',
      '/',
    ]) {
      expect(proxyTarget(url)).toBeNull();
    }
  });
});

describe('the console server', () => {
  let upstream: http.Server;
  let server: http.Server;
  let base = '';
  const seen: { method?: string; url?: string; auth?: string; body: string; host?: string; xff?: string }[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'console-static-'));

  beforeAll(async () => {
    fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><p>console</p>');
    fs.writeFileSync(path.join(dir, 'app.js'), 'console.log(1)');
    upstream = http.createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        seen.push({
          method: req.method,
          url: req.url,
          auth: req.headers.authorization,
          body,
          host: req.headers.host,
          xff: req.headers['x-forwarded-for'] as string | undefined,
        });
        res.writeHead(418, { 'content-type': 'application/json', 'x-upstream': 'yes' });
        res.end(JSON.stringify({ error: { code: 'teapot', message: 'from upstream' } }));
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    const up = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    // settlement points at a closed port: the proxy must answer 502 with a code, not hang or 500
    server = createConsoleServer({ staticDir: dir, upstreams: { policy: up, reconciliation: up, settlement: 'http://127.0.0.1:1' } });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    await new Promise((r) => upstream.close(r));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('hands a request to the service unchanged (method, path, query, token, body) and its answer back unchanged', async () => {
    const res = await fetch(`${base}/api/policy/exceptions/x1/approve?a=1&a=2`, {
      method: 'POST',
      headers: { authorization: 'Bearer op_abc', 'content-type': 'application/json' },
      body: '{"note":"ü"}',
    });
    expect(res.status).toBe(418);
    expect(res.headers.get('x-upstream')).toBe('yes');
    expect(await res.json()).toEqual({ error: { code: 'teapot', message: 'from upstream' } });
    expect(seen.at(-1)).toMatchObject({
      method: 'POST',
      url: '/exceptions/x1/approve?a=1&a=2',
      auth: 'Bearer op_abc',
      body: '{"note":"ü"}',
    });
    expect(seen.at(-1)?.host).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(seen.at(-1)?.xff).toMatch(/^(::ffff:)?127\.0\.0\.1$/);
  });

  it("appends the browser's address to a forwarded-for chain it was given (a trusting service reads the last hop)", async () => {
    await fetch(`${base}/api/policy/routes`, { headers: { 'x-forwarded-for': '203.0.113.9' } });
    expect(seen.at(-1)?.xff).toMatch(/^203\.0\.113\.9, (::ffff:)?127\.0\.0\.1$/);
  });

  it('passes hostile paths through for the service to refuse (percent-encoded NUL, dot segments)', async () => {
    await fetch(`${base}/api/reconciliation/cases?status=%00`);
    expect(seen.at(-1)?.url).toBe('/cases?status=%00');
  });

  it('answers 502 upstream_unavailable when the service is down', async () => {
    const res = await fetch(`${base}/api/settlement/ledger`);
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: { code: 'upstream_unavailable' } });
  });

  it('serves only the built files: index.html for any other page, never a file outside the build', async () => {
    const asset = await fetch(`${base}/app.js`);
    expect(asset.headers.get('content-type')).toContain('text/javascript');
    expect(await asset.text()).toBe('console.log(1)');
    for (const p of ['/', '/spend', '/..%2f..%2fetc%2fpasswd', '/%2e%2e/%2e%2e/etc/passwd']) {
      const res = await fetch(`${base}${p}`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('<p>console</p>');
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    }
  });

  it('refuses an unknown API prefix and writes with a stable code', async () => {
    const api = await fetch(`${base}/api/admission/v1/models`);
    expect(api.status).toBe(404);
    expect(await api.json()).toMatchObject({ error: { code: 'not_found' } });
    const post = await fetch(`${base}/index.html`, { method: 'POST', body: 'x' });
    expect(post.status).toBe(405);
    expect(await post.json()).toMatchObject({ error: { code: 'method_not_allowed' } });
  });
});
