// The web console's server (issue 13): the built static files of apps/console/web and a reverse
// proxy that hands /api/policy/*, /api/settlement/* and /api/reconciliation/* unchanged (method,
// path after the prefix, query, headers, body) to those services, so the browser talks to one
// origin and no service needs CORS. No route of its own touches Postgres or Kafka: every screen
// calls the services' public APIs with the operator token the user typed in.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

/** The services the console proxies to, by the prefix after /api/. */
export const PROXIED = ['policy', 'settlement', 'reconciliation'] as const;
export type Proxied = (typeof PROXIED)[number];

export interface ConsoleOptions {
  /** The built console (index.html and its assets); read once at start. */
  staticDir: string;
  /** Base URL (http://host:port) of each proxied service. */
  upstreams: Record<Proxied, string>;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

/** Hop-by-hop headers (RFC 9110 §7.6.1) are the proxy's own; everything else passes unchanged. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);

/**
 * Where a request under /api/ goes: the service and the path + query it is sent with, or null
 * (not a proxied prefix). The path is passed on byte for byte, so the services' own input checks
 * (NUL, repeated query parameters, …) answer for it; a path that does not start with "/" after
 * the prefix (`/api/policyx`) is not proxied.
 */
export function proxyTarget(url: string): { service: Proxied; path: string } | null {
  for (const service of PROXIED) {
    const prefix = `/api/${service}`;
    if (!url.startsWith(prefix)) continue;
    const rest = url.slice(prefix.length);
    if (rest === '' || rest.startsWith('?')) return { service, path: `/${rest}` };
    if (rest.startsWith('/')) return { service, path: rest };
  }
  return null;
}

/** The security headers every console answer carries: nothing framed, scripts only from this origin. */
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function loadStatic(dir: string): Map<string, { body: Buffer; type: string }> {
  const files = new Map<string, { body: Buffer; type: string }>();
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else
        files.set(`/${path.relative(dir, p).split(path.sep).join('/')}`, {
          body: fs.readFileSync(p),
          type: TYPES[path.extname(p)] ?? 'application/octet-stream',
        });
    }
  };
  walk(dir);
  if (!files.has('/index.html')) throw new Error(`${dir} holds no index.html: build the console first (scripts/console-build.mjs)`);
  return files;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', ...SECURITY_HEADERS });
  res.end(JSON.stringify(body));
}

/**
 * The console's HTTP server (not listening yet). Static files are served only from the set read
 * at start (no path is ever joined onto the file system, so `..` cannot escape); any other GET
 * outside /api/ answers index.html (the screens are one page).
 */
export function createConsoleServer(opts: ConsoleOptions): http.Server {
  const files = loadStatic(opts.staticDir);
  const index = files.get('/index.html')!;
  return http.createServer((req, res) => {
    const url = req.url ?? '/';
    if (url === '/health') return sendJson(res, 200, { status: 'ok' });
    const target = proxyTarget(url);
    if (target) return proxy(req, res, new URL(opts.upstreams[target.service]), target.path);
    if (url.startsWith('/api/')) return sendJson(res, 404, { error: { code: 'not_found', message: 'no such API prefix' } });
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { error: { code: 'method_not_allowed' } });
    const file = files.get(url.split('?')[0]) ?? index;
    res.writeHead(200, { 'content-type': file.type, 'cache-control': 'no-cache', ...SECURITY_HEADERS });
    res.end(req.method === 'HEAD' ? undefined : file.body);
  });
}

function proxy(req: http.IncomingMessage, res: http.ServerResponse, base: URL, pathAndQuery: string): void {
  const headers: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k) && k !== 'host') headers[k] = v;
  headers.host = base.host;
  // The browser's address appended as a proxy does, so a service with GATEWAY_TRUST_PROXY=loopback
  // throttles failed sign-ins per browser rather than per console (docs/decisions.md, Console).
  const peer = req.socket.remoteAddress ?? 'unknown';
  const prior = req.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = prior ? `${Array.isArray(prior) ? prior.join(', ') : prior}, ${peer}` : peer;
  let upstream: http.ClientRequest;
  try {
    upstream = http.request({ host: base.hostname, port: base.port, method: req.method, path: pathAndQuery, headers }, (up) => {
      const out: http.OutgoingHttpHeaders = {};
      for (const [k, v] of Object.entries(up.headers)) if (!HOP_BY_HOP.has(k)) out[k] = v;
      res.writeHead(up.statusCode ?? 502, out);
      up.pipe(res);
      up.on('error', () => res.destroy());
    });
  } catch {
    // a path Node refuses to send (unescaped characters): the client's mistake, never a 500
    req.resume();
    return sendJson(res, 400, { error: { code: 'invalid_request', message: 'the path cannot be forwarded' } });
  }
  upstream.on('error', () => {
    if (res.headersSent) res.destroy();
    else sendJson(res, 502, { error: { code: 'upstream_unavailable', message: 'the service behind this path did not answer' } });
  });
  req.pipe(upstream);
}
