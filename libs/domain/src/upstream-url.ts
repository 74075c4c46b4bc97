/**
 * Where the gateway may send a request (issue 8 §9). A route's `upstream_base_url` must name an
 * allowlisted host (GATEWAY_UPSTREAM_ALLOWLIST, parsed by `parseUpstreamAllowlist`), carry no
 * user-info or query string, and must not point at a private, link-local or loopback address
 * unless that address (or host) is itself on the allowlist. Policy checks the URL when a contract
 * is written; dispatch checks it again before it sends and checks every address a name resolves
 * to at connect time (a public name may resolve to a private address).
 */

/** Used when GATEWAY_UPSTREAM_ALLOWLIST is unset: the public provider hosts the gateway speaks. */
export const DEFAULT_UPSTREAM_ALLOWLIST: readonly string[] = ['api.openai.com', 'generativelanguage.googleapis.com'];

export type UpstreamUrlVerdict = { ok: true; host: string } | { ok: false; reason: string };

/** Comma- or whitespace-separated hosts (`api.example.com`, `*.example.com`, `127.0.0.1`, `[::1]`). */
export function parseUpstreamAllowlist(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === '') return [...DEFAULT_UPSTREAM_ALLOWLIST];
  return raw
    .split(/[\s,]+/)
    .map((h) => normaliseHost(h))
    .filter((h) => h !== '');
}

export function checkUpstreamUrl(raw: string, allowlist: readonly string[]): UpstreamUrlVerdict {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'not a URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, reason: 'must be http(s)' };
  if (url.username !== '' || url.password !== '' || raw.slice(0, raw.indexOf(url.host)).includes('@')) {
    return { ok: false, reason: 'must not carry user-info' };
  }
  if (url.search !== '' || raw.includes('?')) return { ok: false, reason: 'must not carry a query string' };
  if (url.hash !== '' || raw.includes('#')) return { ok: false, reason: 'must not carry a fragment' };
  const host = normaliseHost(url.hostname);
  if (!hostAllowed(host, allowlist)) return { ok: false, reason: `host ${host} is not on the upstream allowlist` };
  if (isNonPublicAddress(host) && !allowlist.includes(host)) {
    return { ok: false, reason: `host ${host} is a private, link-local or loopback address` };
  }
  return { ok: true, host };
}

/** Whether a resolved address may be connected to: public, or itself allowlisted. */
export function resolvedAddressAllowed(address: string, allowlist: readonly string[]): boolean {
  const a = normaliseHost(address);
  return !isNonPublicAddress(a) || allowlist.includes(a);
}

function hostAllowed(host: string, allowlist: readonly string[]): boolean {
  return allowlist.some((entry) =>
    entry.startsWith('*.') ? host.endsWith(entry.slice(1)) && host.length > entry.length - 1 : entry === host,
  );
}

function normaliseHost(h: string): string {
  const t = h.trim().toLowerCase().replace(/\.$/, '');
  return t.startsWith('[') && t.endsWith(']') ? t.slice(1, -1) : t;
}

/**
 * Loopback, private (RFC 1918, CGNAT, ULA), link-local, unspecified, multicast/reserved and
 * IPv4-mapped forms of those; `localhost` names count as loopback. A DNS name is judged by what
 * it resolves to, at connect time.
 */
export function isNonPublicAddress(host: string): boolean {
  const h = normaliseHost(host);
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const v4 = parseIpv4(h);
  if (v4) return nonPublicV4(v4);
  if (!h.includes(':')) return false;
  const v6 = parseIpv6(h);
  if (!v6) return true; // an unparseable IPv6 literal is not trusted
  const mapped = v6.slice(0, 5).every((x) => x === 0) && v6[5] === 0xffff;
  if (mapped) return nonPublicV4([v6[6] >> 8, v6[6] & 0xff, v6[7] >> 8, v6[7] & 0xff]);
  if (v6.every((x) => x === 0)) return true; // ::
  if (v6.slice(0, 7).every((x) => x === 0) && v6[7] === 1) return true; // ::1
  const first = v6[0];
  return (first & 0xfe00) === 0xfc00 || (first & 0xffc0) === 0xfe80 || (first & 0xff00) === 0xff00 || (first & 0xffc0) === 0xfec0;
}

function nonPublicV4([a, b]: number[]): boolean {
  return (
    a === 0 ||
    a === 10 ||
    a === 127 ||
    (a === 100 && b >= 64 && b <= 127) ||
    (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 198 && (b === 18 || b === 19)) ||
    a >= 224
  );
}

function parseIpv4(h: string): number[] | null {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(h);
  if (!m) return null;
  const parts = m.slice(1).map(Number);
  return parts.every((p) => p <= 255) ? parts : null;
}

function parseIpv6(h: string): number[] | null {
  // A dotted IPv4 tail (`::ffff:10.0.0.1`) becomes its two hex groups first.
  const text = h.split('%')[0].replace(/(\d{1,3}(?:\.\d{1,3}){3})$/, (v4text) => {
    const v4 = parseIpv4(v4text);
    return v4 ? `${((v4[0] << 8) | v4[1]).toString(16)}:${((v4[2] << 8) | v4[3]).toString(16)}` : 'x';
  });
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const group = (s: string) => (s === '' ? [] : s.split(':'));
  const head = group(halves[0]);
  const rest = halves.length === 2 ? group(halves[1]) : [];
  if (![...head, ...rest].every((w) => /^[0-9a-f]{1,4}$/.test(w))) return null;
  const missing = 8 - head.length - rest.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const zeros = Array<number>(halves.length === 2 ? missing : 0).fill(0);
  return [...head, ...zeros.map(String), ...rest].map((w) => parseInt(String(w), 16));
}
