import { randomUUID } from 'node:crypto';
import { APIConnectionError, APIError } from 'openai';
import { Topics } from '@gateway/contracts';
import { actionStatus, settledAction } from './actions';
import { eventually, failureOf, openai, simLastSeq, simRequestsSince, stack, TopicReader, uid, withSeeder } from './support';

/**
 * What finance and operators see: Idempotency-Key replays, action visibility per workload, the
 * ledger API, labelled exposure, and a case without usage resolved by a provider usage import or
 * released by an operator with a reason (booked in the ledger at the amount the operator attests).
 */
describe('ledger, exposure and reconciliation', () => {
  const run = uid();
  const ok = `l-ok-${run}`;
  const nousage = `l-nousage-${run}`;
  const slow = `l-slow-${run}`;
  const workloadId = `l-wl-${run}`;
  let key: string;
  let otherKey: string;
  let hurriedKey: string;
  let finance: string;
  let operator: string;
  let settled: TopicReader;
  const settlement = process.env.E2E_SETTLEMENT_URL!;
  const reconciliation = process.env.E2E_RECONCILIATION_URL!;

  const get = async (url: string, token: string) => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const post = async (url: string, token: string, body: unknown) => {
    const res = await fetch(url, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  /** A request whose provider reports no usage, once its reconciliation case is open. */
  const requestWithoutUsage = async (content: string) => {
    const { response } = await openai(key)
      .chat.completions.create({ model: nousage, messages: [{ role: 'user', content }] })
      .withResponse();
    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await eventually(
      async () => {
        const s = await actionStatus(key, actionId);
        return s.open_reconciliation_cases.length ? s : undefined;
      },
      { what: 'case opened' },
    );
    return { actionId, status };
  };

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      await seed.route({
        routeId: ok,
        alias: ok,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt',
      });
      await seed.route({
        routeId: nousage,
        alias: nousage,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;no-usage',
      });
      await seed.route({
        routeId: slow,
        alias: slow,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;latency=1500',
      });
      key = (await seed.workload({ id: workloadId, allowedAliases: [ok, nousage, slow] })).key;
      // its deadline passes before the slow route answers
      hurriedKey = (await seed.workload({ id: `l-hurried-${run}`, allowedAliases: [slow], deadlineMs: 600 })).key;
      otherKey = (await seed.workload({ id: `l-other-${run}`, allowedAliases: [ok] })).key;
      finance = await seed.operator(`fin-${run}`, ['finance']);
      operator = await seed.operator(`ops-${run}`, ['operator']);
    });
    settled = new TopicReader([Topics.usageSettled.name]);
    await settled.start();
  });

  afterAll(() => settled.stop());

  it('Idempotency-Key: the same key and body return the first result without a second dispatch; another body → 409', async () => {
    const idem = randomUUID();
    const before = await simLastSeq();
    const body = { model: ok, messages: [{ role: 'user' as const, content: 'idempotent please' }] };
    const first = await openai(key)
      .chat.completions.create(body, { headers: { 'Idempotency-Key': idem } })
      .withResponse();
    const second = await openai(key)
      .chat.completions.create(body, { headers: { 'Idempotency-Key': idem } })
      .withResponse();
    expect(second.response.headers.get('x-gateway-action-id')).toBe(first.response.headers.get('x-gateway-action-id'));
    // a replay carries the first answer's x-gateway-* headers (DESIGN §4) as well as its own mark
    expect(second.response.headers.get('x-gateway-idempotent-replay')).toBe('true');
    for (const h of ['x-gateway-requested-candidates', 'x-gateway-effective-candidates', 'x-gateway-reserved-microusd'])
      expect(second.response.headers.get(h)).toBe(first.response.headers.get(h));
    expect(second.data.choices[0].message.content).toBe(first.data.choices[0].message.content);
    expect(await simRequestsSince(before)).toHaveLength(1);
    const res = await fetch(`${stack.admission}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idem },
      body: JSON.stringify({ ...body, messages: [{ role: 'user', content: 'a different body' }] }),
    });
    expect(res.status).toBe(409);
    expect(((await res.json()) as any).error.code).toBe('idempotency_key_reused');
  });

  it('Idempotency-Key: a client whose own timeout fired retries with the key and gets the first answer, from one upstream call', async () => {
    const idem = randomUUID();
    const before = await simLastSeq();
    const body = { model: slow, messages: [{ role: 'user' as const, content: 'slow and idempotent' }] };
    // The app gives up after 1 s (the provider takes 1.5 s): the SDK aborts its connection (an
    // APIConnectionError, the timeout's base class); the gateway keeps the answer coming. (A client
    // gone before its request was dispatched would have it withdrawn instead: client-left.e2e-spec;
    // admission and dispatch take far less than this 1 s.)
    const impatient = openai(key, 'current', { timeout: 1_000, maxRetries: 0 });
    await expect(impatient.chat.completions.create(body, { headers: { 'Idempotency-Key': idem } })).rejects.toBeInstanceOf(
      APIConnectionError,
    );
    // Its retry, while the first still runs, waits for the first answer instead of a 409.
    const retried = await openai(key)
      .chat.completions.create(body, { headers: { 'Idempotency-Key': idem } })
      .withResponse();
    expect(retried.response.status).toBe(200);
    expect(retried.response.headers.get('x-gateway-idempotent-replay')).toBe('true');
    const actionId = retried.response.headers.get('x-gateway-action-id')!;
    // And once more after it ended: the same answer, from the cache.
    const again = await openai(key)
      .chat.completions.create(body, { headers: { 'Idempotency-Key': idem } })
      .withResponse();
    expect(again.response.headers.get('x-gateway-action-id')).toBe(actionId);
    expect(again.data.choices[0].message.content).toBe(retried.data.choices[0].message.content);
    expect(await simRequestsSince(before)).toHaveLength(1);
    const status = await settledAction(key, actionId);
    expect(status.attempts).toHaveLength(1);
  });

  it("Idempotency-Key: a first request that ended at its deadline is the key's result: its retry gets the same 504, never a second call", async () => {
    const idem = randomUUID();
    const before = await simLastSeq();
    const body = { model: slow, messages: [{ role: 'user' as const, content: 'too slow for its deadline' }] };
    const send = () =>
      failureOf(
        openai(hurriedKey, 'current', { maxRetries: 0 }).chat.completions.create(body, { headers: { 'Idempotency-Key': idem } }),
      ) as Promise<APIError>;
    const first = await send();
    expect(first.status).toBe(504);
    expect(first.code).toBe('deadline_exceeded');
    const actionId = first.headers?.get('x-gateway-action-id');
    for (const again of [await send(), await send()]) {
      expect(again.status).toBe(504);
      expect(again.code).toBe('deadline_exceeded');
      expect(again.headers?.get('x-gateway-idempotent-replay')).toBe('true');
      expect(again.headers?.get('x-should-retry')).toBe('false'); // the same key only gets it again
      expect(again.headers?.get('x-gateway-action-id')).toBe(actionId);
    }
    expect(await simRequestsSince(before)).toHaveLength(1);
  });

  it('an action is visible to its own workload only; the ledger API shows its row to finance, not to app keys', async () => {
    const { response } = await openai(key)
      .chat.completions.create({ model: ok, messages: [{ role: 'user', content: 'ledger me' }] })
      .withResponse();
    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await settledAction(key, actionId);
    expect((await fetch(`${stack.admission}/v1/actions/${actionId}`, { headers: { authorization: `Bearer ${otherKey}` } })).status).toBe(
      404,
    );
    expect((await fetch(`${stack.admission}/v1/actions/${randomUUID()}`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(
      404,
    );

    const ledger = await get(`${settlement}/ledger?action_id=${actionId}`, finance);
    expect(ledger.status).toBe(200);
    expect(ledger.body.entries).toHaveLength(1);
    expect(ledger.body.entries[0]).toMatchObject({
      action_id: actionId,
      attempt_role: 'primary',
      usage_source: 'provider_response',
      cost_microusd: status.money_microusd.settled,
    });
    expect((await get(`${settlement}/ledger?action_id=${actionId}`, key)).status).toBe(403);
    expect((await get(`${settlement}/ledger?limit=0`, finance)).status).toBe(400);
  });

  it('exposure is reported as labelled settled / unresolved / pending figures, never one sum', async () => {
    const exposure = await get(`${reconciliation}/exposure?workload_id=${workloadId}`, finance);
    expect(exposure.status).toBe(200);
    const account = exposure.body.accounts.find((a: any) => a.scope === 'workload');
    expect(account).toBeDefined();
    for (const f of ['settled_microusd', 'unresolved_microusd', 'pending_microusd', 'budget_microusd']) expect(account[f]).toMatch(/^\d+$/);
    expect(BigInt(account.settled_microusd)).toBeGreaterThan(0n);
  });

  it('usage missing → an open case; importing the provider usage settles it with usage_source provider_export', async () => {
    const { actionId, status } = await requestWithoutUsage('no usage here');
    const caseId = status.open_reconciliation_cases[0].case_id;
    const cases = await get(`${reconciliation}/cases?workload_id=${workloadId}`, operator);
    expect(cases.body.cases.map((c: any) => c.case_id ?? c.id)).toContain(caseId);
    // Delivery and money are separate outcomes: the user got a valid answer; its money is unresolved.
    expect(status).toMatchObject({
      status: 'answered',
      delivery_outcome: 'answered',
      acceptance: { verdict: 'valid', reason: 'ok' },
      financial_state: 'unresolved',
    });

    const bad = await post(`${reconciliation}/cases/${caseId}/import-usage`, operator, {
      provider_request_id: status.attempts[0].provider_request_id,
      input_tokens: 10,
    });
    expect(bad.status).toBe(400);
    const imported = await post(`${reconciliation}/cases/${caseId}/import-usage`, operator, {
      provider_request_id: status.attempts[0].provider_request_id,
      input_tokens: 10,
      cached_input_tokens: 0,
      output_tokens_total: 12,
      reasoning_tokens: 0,
    });
    expect(imported.status).toBeLessThan(300);
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'usage.settled from the import');
    const after = await actionStatus(key, actionId);
    // the settled event carries the admission request id, whichever service settled
    expect(event).toMatchObject({
      usage_source: 'provider_export',
      input_tokens: 10,
      output_tokens_total: 12,
      request_id: after.request_id,
    });
    expect(after.financial_state).toBe('settled');
    expect(after.open_reconciliation_cases).toHaveLength(0);
    expect(after.money_microusd.unresolved).toBe('0');
    expect(after.money_microusd.settled).toBe(event.cost_microusd);
  });

  it('an operator releases an unresolved case only with a reason, booking the attested amount in the ledger', async () => {
    const { actionId, status } = await requestWithoutUsage('release me');
    const caseId = status.open_reconciliation_cases[0].case_id;
    const exposure = status.open_reconciliation_cases[0].exposure_microusd;
    expect((await post(`${reconciliation}/cases/${caseId}/release`, operator, {})).status).toBe(400);
    expect((await post(`${reconciliation}/cases/${caseId}/release`, finance, { reason: 'provider console shows the call' })).status).toBe(
      403,
    );
    // No amount attested: the full held exposure is booked, never zero.
    const released = await post(`${reconciliation}/cases/${caseId}/release`, operator, { reason: 'provider console shows the call' });
    expect(released.status).toBeLessThan(300);
    expect(released.body).toMatchObject({ usage_source: 'operator_release', settled_microusd: exposure });
    const after = await actionStatus(key, actionId);
    expect(after.open_reconciliation_cases).toHaveLength(0);
    expect(after.money_microusd.unresolved).toBe('0');
    expect(after.money_microusd.settled).toBe(exposure);
    expect(after.reservation_status).toBe('settled');
    expect(after.financial_state).toBe('settled');
    const ledger = await get(`${settlement}/ledger?action_id=${actionId}`, finance);
    expect(ledger.body.entries).toEqual([
      expect.objectContaining({
        usage_source: 'operator_release',
        cost_microusd: exposure,
        cost_microusd_by_category: null,
        input_tokens: null,
        attested_by: expect.any(String),
        attestation_reason: 'provider console shows the call',
        case_id: caseId,
        request_id: after.request_id,
      }),
    ]);
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'usage.settled from the release');
    expect(event).toMatchObject({ usage_source: 'operator_release', cost_microusd: exposure, request_id: after.request_id });
  });
});
