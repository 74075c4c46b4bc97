import { Agent, request } from 'undici';
import { Topics } from '@gateway/contracts';
import { Database } from '@gateway/db';
import {
  HostileCredentials,
  hostileRequests,
  HostileTargets,
  seedHostile,
  reportTable,
  sample,
  sendHostile,
  unauthenticatedRequests,
} from './hostile-input';
import { simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * Issue 8 "Must hold" (the hostile-input suite, short version; `npm run fuzz` runs 10,000) and the
 * inputs issue 7 saw end in a 5xx: every one gets a 4xx with a stable code, on every service.
 */
const targets: HostileTargets = {
  admission: stack.admission,
  policy: stack.policy,
  settlement: process.env.E2E_SETTLEMENT_URL,
  reconciliation: process.env.E2E_RECONCILIATION_URL,
};
const COUNT = Number(process.env.HOSTILE_COUNT ?? 300);
const SEED = Number(process.env.HOSTILE_SEED ?? 8);

describe('hostile input: a 4xx with a stable code, never a 5xx, never a row for the unauthenticated', () => {
  let creds: HostileCredentials;
  let alias = '';
  let geminiAlias = '';

  beforeAll(async () => {
    creds = await withSeeder((seed) => seedHostile(seed, stack.providerSim, `e2e-${uid()}`));
    ({ alias, geminiAlias } = creds);
  });

  async function healthy(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const [name, base] of Object.entries(targets)) {
      if (base) out[name] = (await fetch(`${base}/health`)).status;
    }
    return out;
  }

  it('no service names its framework: no X-Powered-By on health, refusals or answers', async () => {
    const answers: Response[] = [];
    for (const base of Object.values(targets)) if (base) answers.push(await fetch(`${base}/health`));
    const chat = (headers: Record<string, string>) =>
      fetch(`${stack.admission}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: alias, messages: [{ role: 'user', content: 'hi' }] }),
      });
    answers.push(await chat({})); // no key: 401
    answers.push(await chat({ authorization: `Bearer ${creds.workloadKey}` }));
    expect(answers.map((a) => a.status)).toEqual([...answers.slice(0, -2).map(() => 200), 401, 200]);
    for (const a of answers) expect(a.headers.get('x-powered-by')).toBeNull();
  });

  it(`${COUNT} generated bad requests (seed ${SEED}) → no 5xx, no reset, every 4xx a registry code, every service healthy`, async () => {
    const cases = sample(hostileRequests(creds, targets), COUNT, SEED);
    const report = await sendHostile(targets, cases, { concurrency: 4 });
    if (report.failures.length > 0) {
      console.log(`${reportTable(report)}\n${JSON.stringify(report.failures.slice(0, 10), null, 1)}`);
    }
    expect(report.failures).toEqual([]);
    expect(report.sent).toBe(COUNT);
    expect(Object.values(await healthy()).every((s) => s === 200)).toBe(true);
    // the operator APIs count their unauthenticated refusals too (and store nothing)
    const metrics = await (await fetch(`${stack.policy}/metrics`)).text();
    expect(metrics).toMatch(/gateway_unauthenticated_refusals_total\{[^}]*reason="unknown_credential"[^}]*\} [1-9]/);
  }, 180_000);

  it('unauthenticated bad requests write no row: no decision event, no action', async () => {
    const db = new Database(stack.databaseUrl);
    try {
      const rows = async () => {
        const [r] = await db.prisma.$queryRaw<Array<{ decisions: number; actions: number }>>`
          SELECT (SELECT count(*)::int FROM outbox_message
                   WHERE topic = ${Topics.admissionDecisions.name} AND (key = 'unauthenticated' OR payload->>'workload_id' IS NULL)) AS decisions,
                 (SELECT count(*)::int FROM action) AS actions`;
        return r;
      };
      const before = await rows();
      const cases = sample(unauthenticatedRequests(creds, targets), 100, SEED + 1);
      // and plain well-formed requests with a wrong key, the case that used to write one row each
      for (let i = 0; i < 20; i++) {
        cases.push({
          category: 'admission chat',
          service: 'admission',
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { authorization: `Bearer gw_wrong_${i}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: alias, messages: [{ role: 'user', content: 'hi' }] }),
          authenticated: false,
        });
      }
      const report = await sendHostile(targets, cases, { concurrency: 4 });
      expect(report.failures).toEqual([]);
      expect(await rows()).toEqual(before);
    } finally {
      await db.close();
    }
  }, 120_000);

  describe('the inputs issue 7 saw end in a 5xx', () => {
    const chat = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${stack.admission}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${creds.workloadKey}`, 'content-type': 'application/json', ...headers },
        body,
      });
    const gemini = (body: string, model = geminiAlias) =>
      fetch(`${stack.admission}/v1beta/models/${model}:generateContent`, {
        method: 'POST',
        headers: { 'x-goog-api-key': creds.workloadKey, 'content-type': 'application/json' },
        body,
      });
    const op = (base: string | undefined, path: string) =>
      fetch(`${base}${path}`, { headers: { authorization: `Bearer ${creds.operatorToken}` } });
    const msgs = '[{"role":"user","content":"hi"}]';
    const deep = (d: number) => `{"model":"${alias}","messages":${msgs},"metadata":${'['.repeat(d)}${']'.repeat(d)}}`;

    it.each<[string, () => Promise<Response>, number, string]>([
      ['nesting 10,000 deep', () => chat(deep(10_000)), 400, 'invalid_request'],
      ['nesting 5,000 deep', () => chat(deep(5_000)), 400, 'invalid_request'],
      ['nesting 65 deep', () => chat(deep(65)), 400, 'invalid_request'],
      ['n beyond 2^53', () => chat(`{"model":"${alias}","messages":${msgs},"n":9007199254740993}`), 400, 'invalid_request'],
      [
        'candidateCount beyond 2^53',
        () => gemini(`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"candidateCount":1e20}}`),
        400,
        'invalid_request',
      ],
      [
        'candidate_count beyond 2^53',
        () => gemini(`{"contents":[{"parts":[{"text":"hi"}]}],"generation_config":{"candidate_count":1e300}}`),
        400,
        'invalid_request',
      ],
      ['1e999 anywhere', () => chat(`{"model":"${alias}","messages":${msgs},"temperature":1e999}`), 400, 'invalid_request'],
      ['NUL in a message', () => chat(`{"model":"${alias}","messages":[{"role":"user","content":"a\\u0000b"}]}`), 400, 'invalid_request'],
      ['NUL in the model', () => chat(`{"model":"a\\u0000","messages":${msgs}}`), 400, 'invalid_request'],
      ['a lone surrogate', () => chat(`{"model":"${alias}","messages":[{"role":"user","content":"\\ud800"}]}`), 400, 'invalid_request'],
      ['NUL in the Gemini model path', () => gemini('{"contents":[{"parts":[{"text":"hi"}]}]}', 'a%00b'), 400, 'invalid_request'],
      [
        'a body between the broker limit and 2 MB',
        () => chat(`{"model":"${alias}","messages":[{"role":"user","content":"${'x'.repeat(1_500_000)}"}]}`),
        413,
        'payload_too_large',
      ],
      [
        'a body that grows past the limit once normalised',
        () => chat(`{"model":"${alias}","messages":${msgs},"metadata":[${Array(190_000).fill('1e15').join(',')}]}`),
        413,
        'payload_too_large',
      ],
      [
        'model of 129 characters (before authentication)',
        () => chat(`{"model":"${'m'.repeat(129)}","messages":${msgs}}`, { authorization: 'Bearer nobody' }),
        400,
        'invalid_request',
      ],
      [
        'Idempotency-Key of 256 characters',
        () => chat(`{"model":"${alias}","messages":${msgs}}`, { 'idempotency-key': 'k'.repeat(256) }),
        400,
        'invalid_request',
      ],
      [
        'a repeated query parameter',
        () =>
          fetch(`${stack.admission}/v1beta/models/${geminiAlias}:streamGenerateContent?alt=sse&alt=sse`, {
            method: 'POST',
            headers: { 'x-goog-api-key': creds.workloadKey },
            body: '{"contents":[{"parts":[{"text":"hi"}]}]}',
          }),
        400,
        'invalid_request',
      ],
      [
        'NUL in an action id',
        () => fetch(`${stack.admission}/v1/actions/a%00b`, { headers: { authorization: `Bearer ${creds.workloadKey}` } }),
        400,
        'invalid_request',
      ],
      ['NUL in a policy path parameter', () => op(targets.policy, '/routes/a%00b'), 400, 'invalid_request'],
      ['NUL in a policy query parameter', () => op(targets.policy, '/exceptions?workload_id=%00'), 400, 'invalid_request'],
      ['NUL in a ledger query parameter', () => op(targets.settlement, '/ledger?workload_id=%00'), 400, 'invalid_request'],
      ['a repeated ledger query parameter', () => op(targets.settlement, '/ledger?limit=1&limit=2'), 400, 'invalid_request'],
      ['NUL in a reconciliation query parameter', () => op(targets.reconciliation, '/cases?workload_id=%00'), 400, 'invalid_request'],
      ['an encoded lone surrogate in a path', () => op(targets.reconciliation, '/cases/%ED%A0%80/release'), 400, 'invalid_request'],
    ])('%s', async (_what, send, status, code) => {
      const before = await simLastSeq();
      const res = await send();
      const body = (await res.json()) as { error: { code: unknown; status?: unknown } };
      // OpenAI shape: error.code; Gemini shape: error.status
      const stable = typeof body.error.code === 'string' ? body.error.code : body.error.status;
      expect({ status: res.status, code: stable }).toEqual({ status, code });
      expect(await simRequestsSince(before)).toHaveLength(0);
    });
  });

  it('failed authentication is throttled per source address: 429 with Retry-After, other sources unaffected', async () => {
    const from = (address: string) => new Agent({ localAddress: address });
    const blocked = from('127.2.0.1');
    const other = from('127.2.0.2');
    const post = (agent: Agent, key: string) =>
      request(`${stack.admission}/v1/chat/completions`, {
        method: 'POST',
        dispatcher: agent,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: alias, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }),
      });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 40; i++) {
        const res = await post(blocked, `gw_guess_${i}`);
        await res.body.text();
        statuses.push(res.statusCode);
        if (res.statusCode === 429) {
          expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
          expect(res.headers['x-should-retry']).toBe('true');
          break;
        }
      }
      expect(statuses.filter((s) => s === 401).length).toBeGreaterThan(0);
      expect(statuses.at(-1)).toBe(429);
      // a blocked source is refused before its key is looked at, even a valid one
      const valid = await post(blocked, creds.workloadKey);
      expect(valid.statusCode).toBe(429);
      expect(((await valid.body.json()) as { error: { code: string } }).error.code).toBe('authentication_rate_limited');
      const elsewhere = await post(other, creds.workloadKey);
      await elsewhere.body.text();
      expect(elsewhere.statusCode).toBe(200);
      const metrics = await (await fetch(`${stack.admission}/metrics`)).text();
      expect(metrics).toMatch(/gateway_unauthenticated_refusals_total\{[^}]*reason="rate_limited"[^}]*\} [1-9]/);
      expect(metrics).toMatch(/gateway_unauthenticated_refusals_total\{[^}]*reason="unknown_credential"[^}]*\} [1-9]/);
    } finally {
      await blocked.close();
      await other.close();
    }
  });
});
