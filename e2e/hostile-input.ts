/**
 * The hostile-input suite (issue 8 "Must hold"; the inputs issue 7 saw end in a 5xx): seeded,
 * bounded fast-check generators of bad requests against the running services, and a runner that
 * sends them and judges the answers. Used by e2e/hostile-input.e2e-spec.ts (a few hundred, in
 * `npm test`) and by scripts/fuzz.mjs (`npm run fuzz`, ten thousand against a stack of its own).
 *
 * Every answer must be below 500; every 4xx must carry a stable code of the one registry
 * (OpenAI shape `error.code`, Gemini shape `error.status`); no connection may be reset.
 */
import fc from 'fast-check';
import { Agent, request } from 'undici';
import { ERROR_CODES } from '@gateway/domain';
import type { Seeder } from '@gateway/testing';

export interface HostileTargets {
  admission: string;
  policy: string;
  settlement?: string;
  reconciliation?: string;
}

export interface HostileCredentials {
  workloadKey: string;
  operatorToken: string;
  /** an OpenAI-dialect alias and a Gemini-dialect alias the workload may use */
  alias: string;
  geminiAlias: string;
}

/** A workload with one route per dialect (upstream: the provider simulator) and an operator with every role. */
export async function seedHostile(seed: Seeder, providerSim: string, run: string): Promise<HostileCredentials> {
  const [alias, geminiAlias] = [`hostile-${run}`, `hostile-gem-${run}`];
  for (const [a, providerKind, upstreamModel] of [
    [alias, 'openai-chat', 'sim-gpt'],
    [geminiAlias, 'gemini-generate', 'gemini-sim'],
  ] as const) {
    await seed.route({ routeId: a, alias: a, providerKind, upstreamBaseUrl: providerSim, upstreamModel });
  }
  const { key } = await seed.workload({ id: `hostile-${run}`, allowedAliases: [alias, geminiAlias] });
  const operatorToken = await seed.operator(`hostile-${run}`, ['operator', 'approver', 'finance']);
  return { workloadKey: key, operatorToken, alias, geminiAlias };
}

export type Service = 'admission' | 'policy' | 'settlement' | 'reconciliation';

export interface HostileCase {
  category: string;
  service: Service;
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  /** true when the request carries a credential that authenticates */
  authenticated: boolean;
}

// ------------------------------------------------------------------ JSON text fragments

const hostileNumber = fc.oneof(
  fc.constantFrom(
    '0',
    '-1',
    '1.5',
    '-0',
    '1e999',
    '-1e999',
    '1E400',
    '9007199254740993',
    '-9007199254740993',
    '18446744073709551616',
    '1e15',
    '1e-400',
    '2147483648',
    '4294967296',
    '0.0000001',
    '123456789012345678901234567890',
  ),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
);

const hostileString = fc.oneof(
  fc.constantFrom(
    '"\\u0000"',
    '"a\\u0000b"',
    '"\\ud800"',
    '"x\\udc00y"',
    '"\\udbff\\udbff"',
    '"\\ud83d\\ude00"',
    '""',
    '" "',
    '"\\n\\r\\t"',
    '"__proto__"',
    '"constructor"',
    '"%00"',
    '"\u202e\u2028"',
  ),
  fc.string({ maxLength: 40 }).map((s) => JSON.stringify(s)),
  fc.string({ unit: 'grapheme', maxLength: 20 }).map((s) => JSON.stringify(s)),
  fc.integer({ min: 129, max: 5000 }).map((n) => JSON.stringify('m'.repeat(n))),
);

const scalar = fc.oneof(hostileNumber, hostileString, fc.constantFrom('true', 'false', 'null'));

const hostileKey = fc.oneof(
  fc.constantFrom('"\\u0000"', '"\\ud800"', '"__proto__"', '""', '"n"', '"candidateCount"', '"candidate_count"'),
  fc.string({ maxLength: 12 }).map((s) => JSON.stringify(s)),
);

/** Any JSON-ish value text, a few levels deep. */
const value: fc.Arbitrary<string> = fc.letrec<{ v: string }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('v'), { maxLength: 4 }).map((xs) => `[${xs.join(',')}]`),
    fc.array(fc.tuple(hostileKey, tie('v')), { maxLength: 4 }).map((kvs) => `{${kvs.map(([k, v]) => `${k}:${v}`).join(',')}}`),
  ),
})).v;

/** Deep nesting well past the limit (issue 7: 10,000 overflowed the stack, 5,000 was admitted then 502). */
const deep = fc
  .tuple(fc.constantFrom(65, 100, 1000, 5000, 10_000, 50_000), fc.constantFrom('[', '{"a":'), fc.boolean())
  .map(([d, open, wrap]) => {
    const close = open === '[' ? ']' : '}';
    const inner = `${open.repeat(d)}1${close.repeat(d)}`;
    return wrap ? `{"model":"x","messages":[{"role":"user","content":${inner}}]}` : inner;
  });

/** A field set to a hostile value, or left as a valid one. */
const field = (valid: string) => fc.oneof({ weight: 3, arbitrary: fc.constant(valid) }, { weight: 1, arbitrary: value });

function object(fields: Array<[string, string | undefined]>): string {
  return `{${fields
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${JSON.stringify(k)}:${v}`)
    .join(',')}}`;
}

const chatBody = (alias: string) =>
  fc
    .record({
      model: fc.oneof(
        field(JSON.stringify(alias)),
        fc.integer({ min: 129, max: 2000 }).map((n) => JSON.stringify('a'.repeat(n))),
      ),
      messages: field('[{"role":"user","content":"hi"}]'),
      n: fc.option(fc.oneof(hostileNumber, value), { nil: undefined, freq: 2 }),
      max_tokens: fc.option(fc.oneof(hostileNumber, value), { nil: undefined, freq: 2 }),
      stream: fc.option(fc.oneof(fc.constantFrom('true', 'false'), value), { nil: undefined, freq: 2 }),
      extra: fc.option(value, { nil: undefined, freq: 2 }),
    })
    .map((r) =>
      object([
        ['model', r.model],
        ['messages', r.messages],
        ['n', r.n],
        ['max_tokens', r.max_tokens],
        ['stream', r.stream],
        ['metadata', r.extra],
      ]),
    );

/**
 * A well-formed request with one hostile value where the request schema does not look (a
 * passthrough field, a message text, the count): what gets past validation to authentication,
 * the decision, the reservation and the encrypted command.
 */
const targetedChat = (alias: string) =>
  fc
    .record({
      text: fc.oneof(hostileString, fc.constant('"hi"')),
      n: fc.option(hostileNumber, { nil: undefined }),
      extra: fc.oneof(value, deep, hostileNumber),
    })
    .map((r) =>
      object([
        ['model', JSON.stringify(alias)],
        ['messages', `[{"role":"user","content":${r.text}}]`],
        ['n', r.n],
        ['max_tokens', '16'],
        ['metadata', r.extra],
      ]),
    );

/** Responses API bodies: the fields admission types, and the ones it refuses by code. */
const responsesBody = (alias: string) =>
  fc
    .record({
      model: fc.oneof(field(JSON.stringify(alias)), value),
      input: fc.oneof(field('"hi"'), field('[{"role":"user","content":"hi"}]'), value),
      max_output_tokens: fc.option(fc.oneof(hostileNumber, value), { nil: undefined, freq: 2 }),
      stream: fc.option(fc.oneof(fc.constantFrom('true', 'false'), value), { nil: undefined, freq: 2 }),
      background: fc.option(fc.oneof(fc.constantFrom('true', 'false'), value), { nil: undefined, freq: 3 }),
      previous_response_id: fc.option(value, { nil: undefined, freq: 3 }),
      store: fc.option(fc.oneof(fc.constantFrom('true', 'false'), value), { nil: undefined, freq: 3 }),
      tools: fc.option(fc.oneof(field('[{"type":"web_search"}]'), value), { nil: undefined, freq: 3 }),
    })
    .map((r) =>
      object([
        ['model', r.model],
        ['input', r.input],
        ['max_output_tokens', r.max_output_tokens],
        ['stream', r.stream],
        ['background', r.background],
        ['previous_response_id', r.previous_response_id],
        ['store', r.store],
        ['tools', r.tools],
      ]),
    );

const targetedResponses = (alias: string) =>
  fc
    .record({
      text: fc.oneof(hostileString, fc.constant('"hi"')),
      n: fc.option(hostileNumber, { nil: undefined }),
      extra: fc.oneof(value, deep, hostileNumber),
    })
    .map((r) =>
      object([
        ['model', JSON.stringify(alias)],
        ['input', `[{"role":"user","content":[{"type":"input_text","text":${r.text}}]}]`],
        ['n', r.n],
        ['max_output_tokens', '16'],
        ['metadata', r.extra],
      ]),
    );

const targetedGemini = fc
  .record({
    text: fc.oneof(hostileString, fc.constant('"hi"')),
    configKey: fc.constantFrom('generationConfig', 'generation_config'),
    countKey: fc.constantFrom('candidateCount', 'candidate_count'),
    count: fc.option(hostileNumber, { nil: undefined }),
    extra: fc.oneof(value, deep, hostileNumber),
  })
  .map((r) =>
    object([
      ['contents', `[{"role":"user","parts":[{"text":${r.text}}]}]`],
      [r.configKey, object([[r.countKey, r.count]])],
      ['labels', r.extra],
    ]),
  );

/** Gemini bodies in both JSON spellings (lowerCamel and proto snake_case), mixed. */
const geminiBody = fc
  .record({
    contentsKey: fc.constantFrom('contents'),
    contents: field('[{"role":"user","parts":[{"text":"hi"}]}]'),
    configKey: fc.constantFrom('generationConfig', 'generation_config'),
    countKey: fc.constantFrom('candidateCount', 'candidate_count'),
    capKey: fc.constantFrom('maxOutputTokens', 'max_output_tokens'),
    count: fc.option(fc.oneof(hostileNumber, value), { nil: undefined }),
    cap: fc.option(fc.oneof(hostileNumber, value), { nil: undefined }),
    both: fc.boolean(),
    system: fc.option(fc.tuple(fc.constantFrom('systemInstruction', 'system_instruction'), value), { nil: undefined }),
  })
  .map((r) => {
    const config = object([
      [r.countKey, r.count],
      [r.capKey, r.cap],
    ]);
    const fields: Array<[string, string | undefined]> = [
      [r.contentsKey, r.contents],
      [r.configKey, config],
    ];
    if (r.both) fields.push([r.configKey === 'generationConfig' ? 'generation_config' : 'generationConfig', config]);
    if (r.system) fields.push(r.system);
    return object(fields);
  });

const nonJson: fc.Arbitrary<string | Buffer> = fc.oneof(
  fc.constantFrom('hello', '<xml/>', 'model=x&messages=y', '{"model":', '[1,2', '{"a":1}}', "{'a':1}", 'NaN', 'Infinity', '\ufeff{}', ''),
  fc.uint8Array({ minLength: 1, maxLength: 200 }).map((a) => Buffer.from(a)),
  fc.constant(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
);

/** Bodies around the limits: between the broker's 1 MB message and the old 2 MB body limit, and beyond. */
const bigBody = fc
  .tuple(fc.constantFrom(700_000, 900_000, 1_100_000, 1_500_000, 2_500_000), fc.constantFrom('string', 'numbers'))
  .map(([size, shape]) =>
    shape === 'string'
      ? `{"model":"x","messages":[{"role":"user","content":"${'x'.repeat(size)}"}]}`
      : `{"model":"x","messages":[{"role":"user","content":"hi"}],"metadata":[${Array(Math.floor(size / 5))
          .fill('1e15')
          .join(',')}]}`,
  );

// ------------------------------------------------------------------ headers, paths, queries

const contentType = fc.constantFrom(
  'application/json',
  'application/json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'application/octet-stream',
  '',
);

/** Header values undici will send (tab, printable ASCII, Latin-1). */
const headerText = fc.oneof(
  fc.string({ maxLength: 40 }).map((s) => s.replace(/[^\t\x20-\x7e]/g, '')),
  fc.constantFrom('\u00ff\u00e9', 'Bearer', 'Bearer ', 'Basic Zm9vOmJhcg==', 'Bearer \u00ff'),
  fc.integer({ min: 256, max: 6000 }).map((n) => 'k'.repeat(n)),
);

/** A path parameter: printable, encoded Unicode, NUL, invalid or truncated percent-encoding, very long. */
const pathParam = fc.oneof(
  fc.constantFrom(
    '%00',
    'a%00b',
    '%ff',
    '%ED%A0%80',
    '%E0%A4%A',
    '..',
    '%2e%2e',
    'a%2Fb',
    '%20',
    '%F0%9F%98%80',
    '-'.repeat(36),
    "'",
    '%27%3B--',
  ),
  fc.string({ maxLength: 30 }).map((s) => encodeURIComponent(s) || 'x'),
  fc.string({ unit: 'grapheme', maxLength: 10 }).map((s) => encodeURIComponent(s) || 'x'),
  fc.integer({ min: 200, max: 3000 }).map((n) => 'p'.repeat(n)),
);

const queryValue = fc.oneof(
  fc.constantFrom('%00', '%ff', '-1', '0', '1e999', '99999999999999999999', 'abc', '', '2026-13-45', 'NaN', '%ED%A0%80'),
  fc.string({ maxLength: 12 }).map((s) => encodeURIComponent(s)),
);

const query = (names: string[]) =>
  fc.tuple(fc.array(fc.tuple(fc.constantFrom(...names), queryValue), { maxLength: 3 }), fc.boolean()).map(([pairs, repeat]) => {
    const all = repeat && pairs.length > 0 ? [...pairs, pairs[0]] : pairs;
    return all.length === 0 ? '' : `?${all.map(([k, v]) => `${k}=${v}`).join('&')}`;
  });

// ------------------------------------------------------------------ whole requests

type Auth = { header: Record<string, string>; authenticated: boolean };

function authFor(c: HostileCredentials, kind: 'workload' | 'operator'): fc.Arbitrary<Auth> {
  const valid = kind === 'workload' ? c.workloadKey : c.operatorToken;
  const other = kind === 'workload' ? c.operatorToken : c.workloadKey;
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant({ header: { authorization: `Bearer ${valid}` }, authenticated: true }) },
    { weight: 1, arbitrary: fc.constant({ header: {}, authenticated: false }) },
    { weight: 1, arbitrary: fc.constant({ header: { authorization: `Bearer ${other}` }, authenticated: false }) },
    { weight: 2, arbitrary: headerText.map((h) => ({ header: { authorization: h }, authenticated: false })) },
    { weight: 1, arbitrary: headerText.map((h) => ({ header: { authorization: `Bearer ${h}` }, authenticated: false })) },
  );
}

const bodyFor = (shaped: fc.Arbitrary<string>, targeted: fc.Arbitrary<string> = shaped) =>
  fc.oneof(
    { weight: 4, arbitrary: shaped as fc.Arbitrary<string | Buffer> },
    { weight: 6, arbitrary: targeted as fc.Arbitrary<string | Buffer> },
    { weight: 2, arbitrary: value as fc.Arbitrary<string | Buffer> },
    { weight: 2, arbitrary: deep as fc.Arbitrary<string | Buffer> },
    { weight: 2, arbitrary: nonJson },
    { weight: 1, arbitrary: bigBody as fc.Arbitrary<string | Buffer> },
  );

const idempotency = fc.option(headerText, { nil: undefined, freq: 3 });

/** Bad requests to admission: both dialects, the action lookup, hostile headers and paths. */
function admissionCase(c: HostileCredentials): fc.Arbitrary<HostileCase> {
  const chat = fc
    .record({
      auth: authFor(c, 'workload'),
      body: bodyFor(chatBody(c.alias), targetedChat(c.alias)),
      ct: contentType,
      idem: idempotency,
      q: query(['stream', 'n']),
    })
    .map((r): HostileCase => ({
      category: 'admission chat',
      service: 'admission',
      method: 'POST',
      path: `/v1/chat/completions${r.q}`,
      headers: {
        ...r.auth.header,
        ...(r.ct ? { 'content-type': r.ct } : {}),
        ...(r.idem !== undefined ? { 'idempotency-key': r.idem } : {}),
      },
      body: r.body,
      authenticated: r.auth.authenticated,
    }));
  const gemini = fc
    .record({
      auth: authFor(c, 'workload'),
      viaGoog: fc.boolean(),
      model: fc.oneof({ weight: 3, arbitrary: fc.constant(c.geminiAlias) }, { weight: 2, arbitrary: pathParam }),
      method: fc.constantFrom('generateContent', 'streamGenerateContent', 'countTokens', ''),
      q: query(['alt', 'key']),
      body: bodyFor(geminiBody, targetedGemini),
      ct: contentType,
      idem: idempotency,
    })
    .map((r): HostileCase => {
      const key = r.auth.header.authorization?.replace(/^Bearer /, '');
      const auth = r.viaGoog && key !== undefined ? { 'x-goog-api-key': key } : r.auth.header;
      return {
        category: 'admission gemini',
        service: 'admission',
        method: 'POST',
        path: `/v1beta/models/${r.model}:${r.method}${r.q}`,
        headers: { ...auth, ...(r.ct ? { 'content-type': r.ct } : {}), ...(r.idem !== undefined ? { 'idempotency-key': r.idem } : {}) },
        body: r.body,
        authenticated: r.auth.authenticated,
      };
    });
  const responses = fc
    .record({
      auth: authFor(c, 'workload'),
      body: bodyFor(responsesBody(c.alias), targetedResponses(c.alias)),
      ct: contentType,
      idem: idempotency,
    })
    .map((r): HostileCase => ({
      category: 'admission responses',
      service: 'admission',
      method: 'POST',
      path: '/v1/responses',
      headers: {
        ...r.auth.header,
        ...(r.ct ? { 'content-type': r.ct } : {}),
        ...(r.idem !== undefined ? { 'idempotency-key': r.idem } : {}),
      },
      body: r.body,
      authenticated: r.auth.authenticated,
    }));
  const action = fc.record({ auth: authFor(c, 'workload'), id: pathParam, q: query(['x']) }).map((r): HostileCase => ({
    category: 'admission action',
    service: 'admission',
    method: 'GET',
    path: `/v1/actions/${r.id}${r.q}`,
    headers: r.auth.header,
    authenticated: r.auth.authenticated,
  }));
  return fc.oneof(
    { weight: 5, arbitrary: chat },
    { weight: 4, arbitrary: gemini },
    { weight: 2, arbitrary: responses },
    { weight: 1, arbitrary: action },
  );
}

/** Bad requests to the operator APIs: bodies, path parameters and query strings. */
function operatorCase(c: HostileCredentials, targets: HostileTargets): fc.Arbitrary<HostileCase> {
  const routes: Array<{ service: Service; method: HostileCase['method']; path: (p: string) => string; q: string[]; body: boolean }> = [
    { service: 'policy', method: 'POST', path: () => '/routes', q: [], body: true },
    { service: 'policy', method: 'GET', path: () => '/routes', q: ['limit'], body: false },
    { service: 'policy', method: 'GET', path: (p) => `/routes/${p}`, q: [], body: false },
    { service: 'policy', method: 'PUT', path: (p) => `/routes/${p}/contract`, q: [], body: true },
    { service: 'policy', method: 'POST', path: (p) => `/routes/${p}/verify`, q: [], body: true },
    { service: 'policy', method: 'POST', path: (p) => `/routes/${p}/prices`, q: [], body: true },
    { service: 'policy', method: 'PUT', path: (p) => `/workloads/${p}`, q: [], body: true },
    { service: 'policy', method: 'GET', path: (p) => `/workloads/${p}`, q: [], body: false },
    { service: 'policy', method: 'POST', path: (p) => `/workloads/${p}/keys/${p}/revoke`, q: [], body: true },
    { service: 'policy', method: 'POST', path: () => '/exceptions', q: [], body: true },
    { service: 'policy', method: 'GET', path: () => '/exceptions', q: ['workload_id', 'limit'], body: false },
    { service: 'policy', method: 'GET', path: (p) => `/exceptions/${p}`, q: [], body: false },
    { service: 'policy', method: 'POST', path: (p) => `/exceptions/${p}/approve`, q: [], body: true },
    {
      service: 'settlement',
      method: 'GET',
      path: () => '/ledger',
      q: ['workload_id', 'action_id', 'from', 'to', 'cursor', 'limit'],
      body: false,
    },
    { service: 'reconciliation', method: 'GET', path: () => '/cases', q: ['status', 'workload_id', 'limit'], body: false },
    { service: 'reconciliation', method: 'GET', path: () => '/exposure', q: ['workload_id'], body: false },
    { service: 'reconciliation', method: 'POST', path: (p) => `/cases/${p}/release`, q: [], body: true },
    { service: 'reconciliation', method: 'POST', path: (p) => `/cases/${p}/import-usage`, q: [], body: true },
  ];
  const usable = routes.filter((r) => targets[r.service]);
  const objectBody = fc
    .array(
      fc.tuple(
        fc.constantFrom(
          'id',
          'alias',
          'workload_id',
          'budget_microusd',
          'max_candidates',
          'expires_at',
          'reason',
          'input_per_mtok_microusd',
          'limit',
        ),
        value,
      ),
      { maxLength: 6 },
    )
    .map((kvs) => object(kvs));
  return fc
    .record({
      route: fc.constantFrom(...usable),
      auth: authFor(c, 'operator'),
      param: pathParam,
      q: fc.constantFrom(...usable).chain((r) => (r.q.length ? query(r.q) : fc.constant(''))),
      body: bodyFor(objectBody),
      ct: contentType,
    })
    .map((r): HostileCase => ({
      category: `${r.route.service} ${r.route.method}`,
      service: r.route.service,
      method: r.route.method,
      path: r.route.path(r.param) + (r.route.q.length ? r.q : ''),
      headers: { ...r.auth.header, ...(r.ct && r.route.body ? { 'content-type': r.ct } : {}) },
      body: r.route.body ? r.body : undefined,
      authenticated: r.auth.authenticated,
    }));
}

/** Every kind of bad request, weighted towards admission (the public API). */
export function hostileRequests(c: HostileCredentials, targets: HostileTargets): fc.Arbitrary<HostileCase> {
  return fc.oneof({ weight: 3, arbitrary: admissionCase(c) }, { weight: 2, arbitrary: operatorCase(c, targets) });
}

/** Only requests that do not authenticate (for the "no row written" check). */
export function unauthenticatedRequests(c: HostileCredentials, targets: HostileTargets): fc.Arbitrary<HostileCase> {
  return hostileRequests(c, targets).filter((h) => !h.authenticated);
}

// ------------------------------------------------------------------ the runner

export interface HostileOutcome {
  hostileCase: HostileCase;
  status: number | null;
  code: string | null;
  error: string | null;
}

export interface HostileReport {
  sent: number;
  /** "<category> <status>" → count */
  table: Map<string, number>;
  failures: Array<{ why: string; hostileCase: HostileCase; status: number | null; body: string }>;
}

/**
 * Sends every case (with `concurrency` in flight), each from a source address of its own in
 * 127.1.0.0/16 so the per-source failed-authentication throttle does not turn the run into a wall
 * of 429s (it is tested on its own).
 */
export async function sendHostile(
  targets: HostileTargets,
  cases: HostileCase[],
  opts: { concurrency?: number; sources?: number; timeoutMs?: number; onProgress?: (done: number) => void } = {},
): Promise<HostileReport> {
  const agents = Array.from(
    { length: Math.min(opts.sources ?? 32, 250 * 250) },
    (_, i) =>
      new Agent({
        localAddress: `127.1.${Math.floor(i / 250)}.${(i % 250) + 2}`,
        headersTimeout: opts.timeoutMs ?? 30_000,
        bodyTimeout: opts.timeoutMs ?? 30_000,
      }),
  );
  const report: HostileReport = { sent: 0, table: new Map(), failures: [] };
  let next = 0;
  const worker = async () => {
    while (next < cases.length) {
      const i = next++;
      const h = cases[i];
      const outcome = await sendOne(targets, h, agents[i % agents.length]);
      report.sent += 1;
      const label = `${h.category} ${outcome.status ?? outcome.error}`;
      report.table.set(label, (report.table.get(label) ?? 0) + 1);
      const why = judge(outcome);
      if (why) report.failures.push({ why, hostileCase: summarise(h), status: outcome.status, body: outcome.code ?? '' });
      opts.onProgress?.(report.sent);
    }
  };
  try {
    await Promise.all(Array.from({ length: opts.concurrency ?? 8 }, worker));
  } finally {
    await Promise.all(agents.map((a) => a.close()));
  }
  return report;
}

async function sendOne(targets: HostileTargets, h: HostileCase, agent: Agent): Promise<HostileOutcome> {
  const base = targets[h.service];
  if (!base) return { hostileCase: h, status: null, code: null, error: 'no target' };
  try {
    const res = await request(`${base}${h.path}`, { method: h.method, headers: h.headers, body: h.body, dispatcher: agent });
    const text = await res.body.text();
    return {
      hostileCase: h,
      status: res.statusCode,
      code: stableCode(text) ?? (res.statusCode >= 400 ? `no code: ${text.slice(0, 200)}` : null),
      error: null,
    };
  } catch (err) {
    const e = err as { code?: string; message?: string; cause?: { code?: string } };
    return { hostileCase: h, status: null, code: null, error: e.code ?? e.cause?.code ?? e.message ?? String(err) };
  }
}

function stableCode(text: string): string | null {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; status?: unknown } };
    for (const c of [body.error?.code, body.error?.status]) {
      if (typeof c === 'string' && (ERROR_CODES as readonly string[]).includes(c)) return c;
    }
  } catch {
    // not JSON
  }
  return null;
}

function judge(o: HostileOutcome): string | null {
  if (o.error !== null) return `no answer (${o.error})`;
  if (o.status === null) return 'no status';
  if (o.status >= 500) return `answered ${o.status}`;
  if (o.status >= 400 && (o.code === null || o.code.startsWith('no code'))) return `a ${o.status} without a stable code`;
  return null;
}

/** A failing case, short enough to print (bodies cut). */
function summarise(h: HostileCase): HostileCase {
  const body = h.body === undefined ? undefined : typeof h.body === 'string' ? h.body.slice(0, 300) : `<${h.body.length} bytes>`;
  return {
    ...h,
    path: h.path.slice(0, 300),
    body,
    headers: Object.fromEntries(Object.entries(h.headers).map(([k, v]) => [k, v.slice(0, 80)])),
  };
}

/** The cases for one seeded run. */
export function sample<T>(arb: fc.Arbitrary<T>, count: number, seed: number): T[] {
  return fc.sample(arb, { numRuns: count, seed });
}

/** The report as aligned text: one row per category and status, sorted. */
export function reportTable(report: HostileReport): string {
  const rows = [...report.table.entries()].sort(([a], [b]) => a.localeCompare(b));
  const width = Math.max(10, ...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}
