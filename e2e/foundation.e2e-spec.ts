import OpenAI, { APIError } from 'openai';
import { Topics } from '@gateway/contracts';
import { Database } from '@gateway/db';
import {
  databaseDump,
  eventually,
  openai,
  serviceLogs,
  simLastSeq,
  simRequestsSince,
  stack,
  TopicReader,
  uid,
  withSeeder,
  gemini,
} from './support';

/**
 * Issue 2's walking skeleton, through the official openai SDK: one request travels admission →
 * Kafka → dispatch → provider-sim → reply → settlement → ledger → gateway.usage.settled.v1.
 */
describe('foundation: one request through every service', () => {
  const run = uid();
  const alias = `e2e-std-${run}`;
  const geminiAlias = `e2e-gem-${run}`;
  const workloadId = `e2e-found-${run}`;
  const canary = `CANARY-${run}-${uid()}`;
  let key: string;
  let client: OpenAI;
  let settledReader: TopicReader;

  beforeAll(async () => {
    key = await withSeeder(async (seed) => {
      await seed.route({
        routeId: alias,
        alias,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt',
      });
      await seed.route({
        routeId: geminiAlias,
        alias: geminiAlias,
        providerKind: 'gemini-generate',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'gemini-sim',
      });
      return (await seed.workload({ id: workloadId, allowedAliases: [alias, geminiAlias] })).key;
    });
    client = openai(key);
    settledReader = new TopicReader([Topics.usageSettled.name]);
    await settledReader.start();
  });

  afterAll(async () => {
    await settledReader.stop();
  });

  let actionId = '';

  it('(a) no n → 200, one choice, requested=omitted effective=1 returned=1', async () => {
    const before = await simLastSeq();
    const { data, response } = await client.chat.completions
      .create({ model: alias, messages: [{ role: 'user', content: `Summarise this ticket. ${canary}` }] })
      .withResponse();
    expect(response.status).toBe(200);
    expect(data.choices).toHaveLength(1);
    expect(response.headers.get('x-gateway-requested-candidates')).toBe('omitted');
    expect(response.headers.get('x-gateway-effective-candidates')).toBe('1');
    expect(response.headers.get('x-gateway-returned-candidates')).toBe('1');
    expect(Number(response.headers.get('x-gateway-reserved-microusd'))).toBeGreaterThan(0);
    actionId = response.headers.get('x-gateway-action-id') ?? '';
    expect(actionId).toMatch(/^[0-9a-f-]{36}$/);
    const sent = await simRequestsSince(before);
    expect(sent).toHaveLength(1);
    // The gateway always writes the output cap and the effective candidate count upstream.
    expect(sent[0].maxTokens).toBe(256);
    expect(sent[0].candidateCount).toBe(1);
  });

  it('(b) n: 3 → 400 candidate_count_exceeds_policy, x-should-retry: false, nothing dispatched', async () => {
    const before = await simLastSeq();
    const err = await client.chat.completions
      .create({ model: alias, n: 3, messages: [{ role: 'user', content: 'three please' }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    const apiErr = err as APIError;
    expect(apiErr.status).toBe(400);
    expect(apiErr.code).toBe('candidate_count_exceeds_policy');
    expect(apiErr.message).toMatch(/maximum of 1/);
    expect(apiErr.headers?.get('x-should-retry')).toBe('false');
    expect(await simRequestsSince(before)).toHaveLength(0);
  });

  it('(c) gateway.usage.settled.v1 carries aggregate usage and integer micro-USD cost', async () => {
    expect(Topics.usageSettled.name).toBe('gateway.usage.settled.v1');
    const msg = await settledReader.waitFor<Record<string, unknown>>((m) => m.action_id === actionId, `usage.settled for ${actionId}`);
    expect(msg).toMatchObject({
      workload_id: workloadId,
      attempt_role: 'primary',
      requested_candidate_count: null,
      effective_candidate_count: 1,
      returned_candidate_count: 1,
      usage_source: 'provider_response',
      stream_mode: 'none',
    });
    expect(msg.input_tokens).toEqual(expect.any(Number));
    expect(msg.output_tokens_total).toEqual(expect.any(Number));
    expect(msg.total_tokens).toBe((msg.input_tokens as number) + (msg.output_tokens_total as number));
    expect(String(msg.cost_microusd)).toMatch(/^\d+$/);
    expect(BigInt(String(msg.cost_microusd))).toBeGreaterThan(0n);
    const byCat = msg.cost_microusd_by_category as Record<string, string>;
    expect(Object.values(byCat).reduce((a, b) => a + BigInt(b), 0n)).toBe(BigInt(String(msg.cost_microusd)));
    expect(settledReader.messages.find((m) => m.value.includes(actionId))?.key).toBe(workloadId);

    const status = (await (
      await fetch(`${stack.admission}/v1/actions/${actionId}`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as Record<string, any>;
    expect(status.reservation_status).toBe('settled');
    expect(status.money_microusd.settled).toBe(String(msg.cost_microusd));
    expect(BigInt(status.money_microusd.reserved)).toBe(BigInt(status.money_microusd.settled) + BigInt(status.money_microusd.released));
    expect(status.attempts).toHaveLength(1);
    expect(status.attempts[0].cost_microusd).toBe(String(msg.cost_microusd));
  });

  it('(d) the canary prompt appears nowhere but the encrypted dispatch command/reply', async () => {
    // The canary also travels a stream and the Gemini dialect, so every content path is covered.
    const stream = await client.chat.completions.create({
      model: alias,
      stream: true,
      messages: [{ role: 'user', content: `Stream this. ${canary}` }],
    });
    for await (const _chunk of stream) {
      // drain
    }
    const ai = gemini(key);
    await ai.models.generateContent({ model: geminiAlias, contents: `Gemini this. ${canary}` });
    for await (const _chunk of await ai.models.generateContentStream({ model: geminiAlias, contents: `Gemini stream. ${canary}` })) {
      // drain
    }
    const everything = new TopicReader(Object.values(Topics).map((t) => t.name));
    await everything.start();
    try {
      await eventually(() => (everything.messages.some((m) => m.value.includes(actionId)) ? true : undefined), {
        what: 'topic messages for the action',
      });
      // Wait until the content-bearing topics show the action too, so the check below is not vacuous.
      const contentTopics = new TopicReader([Topics.dispatchCommands.name, Topics.dispatchReplies.name]);
      await contentTopics.start();
      await eventually(() => (contentTopics.messages.filter((m) => m.key === actionId).length >= 2 ? true : undefined), {
        what: 'dispatch command and reply',
      });
      expect(contentTopics.messages.some((m) => m.value.includes(canary))).toBe(false);
      await contentTopics.stop();
      expect(everything.messages.some((m) => m.value.includes(canary))).toBe(false);
    } finally {
      await everything.stop();
    }
    const db = new Database(stack.databaseUrl);
    try {
      const dump = await databaseDump(db);
      expect(dump).toContain(actionId);
      expect(dump).not.toContain(canary);
    } finally {
      await db.close();
    }
    const logs = serviceLogs();
    expect(logs).toContain(actionId);
    expect(logs).not.toContain(canary);
  });

  describe('bad input gets a 4xx with a stable code, never a 5xx', () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(`${stack.admission}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...headers },
        body,
      });
    const ok = (extra: Record<string, unknown>) => JSON.stringify({ model: alias, messages: [{ role: 'user', content: 'hi' }], ...extra });

    it.each([
      ['malformed JSON', () => post('{"model":', {}), 400, 'invalid_request'],
      ['wrong type for messages', () => post(JSON.stringify({ model: alias, messages: 'hi' })), 400, 'invalid_request'],
      ['wrong type for max_tokens', () => post(ok({ max_tokens: 'many' })), 400, 'invalid_request'],
      ['n: 0', () => post(ok({ n: 0 })), 400, 'invalid_request'],
      ['n: 1.5', () => post(ok({ n: 1.5 })), 400, 'invalid_request'],
      ['n: "2"', () => post(ok({ n: '2' })), 400, 'invalid_request'],
      ['missing auth', () => post(ok({}), { authorization: '' }), 401, 'unauthorized'],
      ['unknown key', () => post(ok({}), { authorization: 'Bearer gw_nope' }), 401, 'unauthorized'],
      [
        'unknown model',
        () => post(JSON.stringify({ model: 'no-such-alias', messages: [{ role: 'user', content: 'hi' }] })),
        404,
        'unknown_route',
      ],
    ])('%s', async (_name, send, status, code) => {
      const before = await simLastSeq();
      const res = await send();
      expect(res.status).toBe(status);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe(code);
      expect(body.error.message.length).toBeGreaterThan(0);
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect(await simRequestsSince(before)).toHaveLength(0);
    });
  });
});
