import OpenAI, { APIError } from 'openai';
import { Topics } from '@gateway/contracts';
import { policyCall as call } from './policy-call';
import { simLastSeq, simRequestsSince, stack, TopicReader, uid, withSeeder } from './support';

/**
 * Issue 16 through the official openai SDK: a team's budget refuses a request although the
 * calling workload's own budget has room (the team is two workloads), and a workflow id that
 * fans out into more separate calls than its workload allows is refused with 429 and Retry-After.
 */
describe('quota scopes and fan-out', () => {
  const run = uid();
  const route = `qs-${run}`;
  const team = `team-${run}`;
  const keys: Record<string, string> = {};
  let operator: string;
  const decisions = new TopicReader([Topics.admissionDecisions.name]);
  const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${stack.admission}/v1`, maxRetries: 0 });
  const ask = (key: string, content: string, headers: Record<string, string> = {}) =>
    client(key).chat.completions.create({ model: route, messages: [{ role: 'user', content }], max_tokens: 64 }, { headers });

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      await seed.route({
        routeId: route,
        alias: route,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt',
      });
      operator = await seed.operator(`olga-${run}`, ['operator', 'finance']);
      // two workloads of one team, each with a budget far above one request
      for (const id of ['a', 'b']) {
        keys[id] = (await seed.workload({ id: `qs-${id}-${run}`, team, environment: `env-${run}`, allowedAliases: [route] })).key;
      }
      // the same request from a team without limits shows what one reservation is
      keys.probe = (await seed.workload({ id: `qs-probe-${run}`, team: `other-${run}`, allowedAliases: [route] })).key;
      keys.fanout = (
        await seed.workload({
          id: `qs-fan-${run}`,
          allowedAliases: [route],
          maxCallsPerWorkflow: 2,
          // a whole UTC day: the window does not roll between the calls below
          workflowWindowSeconds: 86_400,
        })
      ).key;
    });
    await decisions.start();
  });

  afterAll(() => decisions.stop());

  it('the team budget is exhausted while the workload budget is not → 403 budget_exhausted naming the team scope', async () => {
    const probe = await client(keys.probe)
      .chat.completions.create({ model: route, messages: [{ role: 'user', content: 'same words' }], max_tokens: 64 })
      .withResponse();
    const reserved = probe.response.headers.get('x-gateway-reserved-microusd')!;
    expect(BigInt(reserved)).toBeGreaterThan(0n);

    // exactly one reservation's worth for the whole team (a first limit applies at once)
    const set = await call('PUT', `/scope-limits/team/${team}`, operator, { budget_microusd: reserved, reason: 'e2e' });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ scope: 'team', scope_id: team, budget_microusd: reserved });

    const first = await ask(keys.a, 'same words');
    expect(first.choices).toHaveLength(1);

    const before = await simLastSeq();
    const err = (await ask(keys.b, 'same words').catch((e) => e)) as APIError;
    expect(err).toBeInstanceOf(APIError);
    expect(err.status).toBe(403);
    expect(err.code).toBe('budget_exhausted');
    expect(err.message).toContain(`team:${team} budget`);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(await simRequestsSince(before)).toHaveLength(0);

    const actionId = err.headers?.get('x-gateway-action-id');
    const event = await decisions.waitFor<Record<string, unknown>>((m) => m.action_id === actionId, 'the deny decision event');
    expect(event).toMatchObject({
      policy_result: 'deny',
      policy_reason: 'budget_exhausted',
      quota_scope: `team:${team}`,
      workload_id: `qs-b-${run}`,
    });
    const allowed = await decisions.waitFor<Record<string, unknown>>(
      (m) => m.workload_id === `qs-a-${run}` && m.policy_result === 'allow',
      'the allow decision event of workload a',
    );
    expect(allowed.quota_scope).toBe(`workload,team:${team}`);
  });

  it('the N+1th call with one workflow id → 429 fanout_limit_exceeded with Retry-After; other workflows pass', async () => {
    const workflow = { 'x-gateway-workflow-id': `wf-${run}` };
    for (let i = 0; i < 2; i++) expect((await ask(keys.fanout, `step ${i}`, workflow)).choices).toHaveLength(1);

    const before = await simLastSeq();
    const err = (await ask(keys.fanout, 'step 3', workflow).catch((e) => e)) as APIError;
    expect(err).toBeInstanceOf(APIError);
    expect(err.status).toBe(429);
    expect(err.code).toBe('fanout_limit_exceeded');
    const retryAfter = Number(err.headers?.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(86_400);
    expect(err.headers?.get('x-should-retry')).toBe('true');
    expect(await simRequestsSince(before)).toHaveLength(0);

    const actionId = err.headers?.get('x-gateway-action-id');
    const event = await decisions.waitFor<Record<string, unknown>>((m) => m.action_id === actionId, 'the fan-out deny event');
    expect(event).toMatchObject({
      policy_reason: 'fanout_limit_exceeded',
      quota_scope: 'workflow',
      workflow_id_hash: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(JSON.stringify(event)).not.toContain(`wf-${run}`);

    expect((await ask(keys.fanout, 'another workflow', { 'x-gateway-workflow-id': `wf-other-${run}` })).choices).toHaveLength(1);
    // a hostile workflow id is a 400, never a counter
    const bad = (await ask(keys.fanout, 'bad', { 'x-gateway-workflow-id': 'x'.repeat(300) }).catch((e) => e)) as APIError;
    expect(bad.status).toBe(400);
    expect(bad.code).toBe('invalid_request');
  });

  it('a team token rate kept per instance is named so, and reconciliation sums it into the organisation-wide figure', async () => {
    const instTeam = `inst-${run}`;
    const instKey = await withSeeder(
      async (seed) => (await seed.workload({ id: `qs-inst-${run}`, team: instTeam, allowedAliases: [route] })).key,
    );
    const set = await call('PUT', `/scope-limits/team/${instTeam}`, operator, {
      tokens_per_minute: 100_000,
      token_rate_enforcement: 'instance',
    });
    expect(set.status).toBe(200);
    const { response } = await client(instKey)
      .chat.completions.create({ model: route, messages: [{ role: 'user', content: 'counted per instance' }], max_tokens: 64 })
      .withResponse();
    const actionId = response.headers.get('x-gateway-action-id');
    const event = await decisions.waitFor<Record<string, unknown>>((m) => m.action_id === actionId, 'the allow decision event');
    expect(event.quota_scope).toMatch(new RegExp(`^workload,instance:[^/]+/team:${instTeam}$`));

    const res = await fetch(`${process.env.E2E_RECONCILIATION_URL}/quota-counters/instance-scoped`, {
      headers: { authorization: `Bearer ${operator}` },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { windows: Array<Record<string, any>> };
    const window = body.windows.find((w) => w.scope === `team:${instTeam}`);
    expect(window).toMatchObject({ enforcement: 'instance', tokens_per_minute_limit: 100_000, over_limit_tokens: 0 });
    expect(window!.organisation_tokens).toBeGreaterThan(0);
    expect(window!.organisation_tokens).toBe(window!.instances.reduce((sum: number, i: { tokens: number }) => sum + i.tokens, 0));
    expect(window!.instances[0].quota_scope).toMatch(new RegExp(`^instance:.+/team:${instTeam}$`));
    // an app key is not an operator
    const forbidden = await fetch(`${process.env.E2E_RECONCILIATION_URL}/quota-counters/instance-scoped`, {
      headers: { authorization: `Bearer ${instKey}` },
    });
    expect([401, 403]).toContain(forbidden.status);
  });
});
