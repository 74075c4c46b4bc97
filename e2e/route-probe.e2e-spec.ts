import { createHash } from 'node:crypto';
import { Topics } from '@gateway/contracts';
import { OPERATIONS_WORKLOAD_ID } from '@gateway/domain';
import { eventually, simLastSeq, simRequestsSince, TopicReader, uid, withSeeder } from './support';
import { policyCall as call, simContract, simPrice } from './policy-call';

/**
 * Issue 8 §6, probe spend is spend: a verification probe goes through dispatch like any call. It
 * is reserved against the operations workload's budget before it leaves (refused, with nothing
 * sent, when that budget cannot fund it or the route has no price), and its attempt settles into
 * the ledger and onto gateway.usage.settled.v1 with attempt_role `probe`, passed or failed.
 */
describe('route verification probes are reserved and settled spend', () => {
  const run = uid();
  const settlement = process.env.E2E_SETTLEMENT_URL!;
  let operator: string;
  let approver: string;
  let finance: string;
  let settled: TopicReader;

  const ledgerOf = async (actionId: string) => {
    const res = await fetch(`${settlement}/ledger?action_id=${actionId}`, { headers: { authorization: `Bearer ${finance}` } });
    return ((await res.json()) as { entries: Array<Record<string, unknown>> }).entries;
  };
  /** A route on the simulator with an approved price (a probe needs one), unverified. */
  const pricedRoute = async (routeId: string, contract: Record<string, unknown> = simContract()) => {
    expect((await call('POST', '/routes', operator, { id: routeId, alias: routeId, ...contract })).status).toBe(201);
    const price = await call('POST', `/routes/${routeId}/prices`, operator, simPrice);
    expect((await call('POST', `/change-requests/${price.body.id}/approve`, approver, {})).status).toBe(200);
  };
  const fundOperations = async (budget: string) => {
    const put = await call('PUT', `/workloads/${OPERATIONS_WORKLOAD_ID}`, operator, {
      team: 'gateway',
      environment: 'operations',
      per_candidate_output_ceiling: 16,
      budget_microusd: budget,
      budget_period: 'month',
      allowed_aliases: [],
      reason: 'fund route verification probes',
    });
    // Raising a budget is four-eyes: it waits for a second operator.
    expect(put.status).toBe(202);
    expect((await call('POST', `/change-requests/${put.body.id}/approve`, approver, {})).status).toBe(200);
  };

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      operator = await seed.operator(`olga-${run}`, ['operator']);
      approver = await seed.operator(`arno-${run}`, ['approver']);
      finance = await seed.operator(`fin-${run}`, ['finance']);
      await seed.fundOperations(0n);
    });
    settled = new TopicReader([Topics.usageSettled.name]);
    await settled.start();
  });

  afterAll(async () => {
    await settled.stop();
    await withSeeder((seed) => seed.fundOperations(50_000_000n));
  });

  it('an unfunded operations budget refuses the probe (403 budget_exhausted), nothing sent upstream', async () => {
    const routeId = `pr-unfunded-${run}`;
    await pricedRoute(routeId);
    const before = await simLastSeq();
    const refused = await call('POST', `/routes/${routeId}/verify`, operator, { probe: true });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: 'budget_exhausted', message: expect.stringMatching(/operations budget/) });
    expect(await simRequestsSince(before)).toHaveLength(0);
    expect((await call('GET', `/routes/${routeId}`, operator)).body.verification_state).toBe('unverified');
  });

  it('a route without a price cannot be probed (409 route_unpriced), nothing sent upstream', async () => {
    await fundOperations('10000000');
    const routeId = `pr-unpriced-${run}`;
    expect((await call('POST', '/routes', operator, { id: routeId, alias: routeId, ...simContract() })).status).toBe(201);
    const before = await simLastSeq();
    const refused = await call('POST', `/routes/${routeId}/verify`, operator, { probe: true });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('route_unpriced');
    expect(await simRequestsSince(before)).toHaveLength(0);
  });

  it('a passing probe sends the contract fields upstream, verifies, and settles one ledger row with attempt_role probe', async () => {
    const routeId = `pr-ok-${run}`;
    await pricedRoute(routeId);
    const before = await simLastSeq();
    const verified = await call('POST', `/routes/${routeId}/verify`, operator, { probe: true });
    expect(verified.status).toBe(200);
    const probe = verified.body.contract.verification_notes.probe;
    expect(probe).toMatchObject({ http_status: 200, returned_candidates: 2, usage_present: true, passed: true });
    expect(BigInt(probe.reserved_microusd)).toBeGreaterThan(0n);
    expect(await simRequestsSince(before)).toEqual([expect.objectContaining({ candidateCount: 2, maxTokens: 16 })]);

    const rows = await eventually(
      async () => {
        const r = await ledgerOf(probe.action_id);
        return r.length ? r : undefined;
      },
      { what: 'the probe settled in the ledger' },
    );
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      attempt_id: probe.attempt_id,
      attempt_role: 'probe',
      workload_id: OPERATIONS_WORKLOAD_ID,
      route_id: routeId,
      input_tokens: probe.input_tokens,
      output_tokens_total: probe.output_tokens_total,
    });
    expect(BigInt(rows[0].cost_microusd as string)).toBeGreaterThan(0n);
    expect(BigInt(rows[0].cost_microusd as string)).toBeLessThanOrEqual(BigInt(probe.reserved_microusd));
    const event = await settled.waitFor<Record<string, unknown>>((m) => m.action_id === probe.action_id, 'the probe settled event');
    expect(event).toMatchObject({ attempt_role: 'probe', workload_id: OPERATIONS_WORKLOAD_ID, usage_source: 'provider_response' });
  });

  it('probes a Gemini route with candidateCount and maxOutputTokens from its contract', async () => {
    const routeId = `pr-gemini-${run}`;
    await pricedRoute(
      routeId,
      simContract({
        provider_kind: 'gemini-generate',
        upstream_model: 'gemini-sim',
        candidate_param: 'candidateCount',
        output_cap_param: 'maxOutputTokens',
        usage_shape: 'gemini.usageMetadata',
        streaming_usage: 'final_chunk_usageMetadata',
        client_library_version: '@google/genai@2.32.0',
      }),
    );
    const before = await simLastSeq();
    const verified = await call('POST', `/routes/${routeId}/verify`, operator, { probe: true });
    expect(verified.status).toBe(200);
    expect(verified.body.contract.verification_notes.probe).toMatchObject({ returned_candidates: 2, usage_present: true, passed: true });
    expect(await simRequestsSince(before)).toEqual([expect.objectContaining({ model: 'gemini-sim', candidateCount: 2, maxTokens: 16 })]);
  });

  it('a route that silently serves fewer candidates fails the probe (409 probe_failed), and the probe is still paid for', async () => {
    const routeId = `pr-short-${run}`;
    await pricedRoute(routeId, simContract({ upstream_model: 'sim-gpt;serve=1' }));
    const refused = await call('POST', `/routes/${routeId}/verify`, operator, { probe: true });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'probe_failed', message: expect.stringMatching(/asked for 2 candidates, got 1/) });
    const read = await call('GET', `/routes/${routeId}`, operator);
    const failed = read.body.contract.verification_notes.last_failed_probe;
    expect(read.body.verification_state).toBe('unverified');
    expect(failed).toMatchObject({ returned_candidates: 1, passed: false });
    const rows = await eventually(
      async () => {
        const r = await ledgerOf(failed.action_id);
        return r.length ? r : undefined;
      },
      { what: 'the failed probe settled' },
    );
    expect(rows[0]).toMatchObject({ attempt_role: 'probe', workload_id: OPERATIONS_WORKLOAD_ID });
  });

  it('a route without aggregate usage fails the probe; its attempt goes to reconciliation, never settled as zero', async () => {
    const routeId = `pr-nousage-${run}`;
    await pricedRoute(routeId, simContract({ upstream_model: 'sim-gpt;no-usage' }));
    const refused = await call('POST', `/routes/${routeId}/verify`, operator, { probe: true });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'probe_failed', message: expect.stringMatching(/no aggregate usage/) });
    const failed = (await call('GET', `/routes/${routeId}`, operator)).body.contract.verification_notes.last_failed_probe;
    const cases = new TopicReader([Topics.reconciliationRequired.name]);
    await cases.start();
    try {
      const required = await cases.waitFor<Record<string, unknown>>((m) => m.action_id === failed.action_id, 'the probe case');
      expect(required).toMatchObject({ attempt_role: 'probe', workload_id: OPERATIONS_WORKLOAD_ID });
      expect(BigInt(required.exposure_microusd as string)).toBeGreaterThan(0n);
    } finally {
      await cases.stop();
    }
    expect(await ledgerOf(failed.action_id)).toHaveLength(0);
  });

  it("a probe carries the route's credential from dispatch; an unknown credential_ref fails it with nothing sent", async () => {
    const key = process.env.GATEWAY_CREDENTIAL_E2E_ENV!;
    const keyed = `pr-keyed-${run}`;
    const sha = createHash('sha256').update(key).digest('hex');
    await pricedRoute(keyed, simContract({ upstream_model: `sim-gpt;key-sha256=${sha}`, credential_ref: 'E2E_ENV' }));
    const before = await simLastSeq();
    const verified = await call('POST', `/routes/${keyed}/verify`, operator, { probe: true });
    expect(verified.status).toBe(200);
    expect(await simRequestsSince(before)).toEqual([expect.objectContaining({ keyHeader: 'authorization', keyVerdict: 'matched' })]);

    const unknown = `pr-nokey-${run}`;
    await pricedRoute(unknown, simContract({ credential_ref: `E2E_UNKNOWN_${run.toUpperCase()}` }));
    const since = await simLastSeq();
    const refused = await call('POST', `/routes/${unknown}/verify`, operator, { probe: true });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'probe_failed', message: expect.stringMatching(/upstream_credential_missing/) });
    expect(await simRequestsSince(since)).toHaveLength(0);
  });
});
