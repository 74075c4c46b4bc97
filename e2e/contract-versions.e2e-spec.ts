import { APIError } from 'openai';
import { eventually, openai, simLastSeq, simRequestsSince, uid, withSeeder } from './support';
import { policyCall as call, simContract, simPrice } from './policy-call';

/**
 * Issue 8 §4 through the policy API: admission serves the newest *verified* contract version. A
 * new version (here a new upstream model, approved by a second operator) takes no traffic until a
 * probe verifies it; meanwhile the previous verified version keeps serving. A route whose only
 * verification went stale, or that was never verified, refuses every request, one candidate too.
 */
describe('contract versions: only a verified, fresh contract serves', () => {
  const run = uid();
  const routeId = `cv-route-${run}`;
  const workloadId = `cv-wl-${run}`;
  const staleAlias = `cv-stale-${run}`;
  const unverifiedAlias = `cv-unverified-${run}`;
  let operator: string;
  let approver: string;
  let appKey = '';

  const ask = (model: string) =>
    openai(appKey).chat.completions.create({ model, messages: [{ role: 'user', content: 'which model?' }], max_completion_tokens: 8 });

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      operator = await seed.operator(`olga-${run}`, ['operator']);
      approver = await seed.operator(`arno-${run}`, ['approver']);
      // probes are reserved against the operations budget
      await seed.fundOperations(50_000_000n);
      const sim = simContract().upstream_base_url;
      // verified three days ago with a one-day TTL: stale
      await seed.route(
        {
          routeId: staleAlias,
          alias: staleAlias,
          providerKind: 'openai-chat',
          upstreamBaseUrl: sim,
          upstreamModel: 'sim-gpt',
          verificationTtlSeconds: 86400,
        },
        { verifiedAt: new Date(Date.now() - 3 * 86400 * 1000) },
      );
      await seed.route(
        { routeId: unverifiedAlias, alias: unverifiedAlias, providerKind: 'openai-chat', upstreamBaseUrl: sim, upstreamModel: 'sim-gpt' },
        { verified: false },
      );
    });
    expect(
      (await call('POST', '/routes', operator, { id: routeId, alias: routeId, ...simContract({ upstream_model: 'sim-gpt-v1' }) })).status,
    ).toBe(201);
    const price = await call('POST', `/routes/${routeId}/prices`, operator, simPrice);
    await call('POST', `/change-requests/${price.body.id}/approve`, approver, {});
    const wl = await call('PUT', `/workloads/${workloadId}`, operator, {
      team: 'search',
      environment: 'dev',
      per_candidate_output_ceiling: 64,
      budget_microusd: '20000000',
      budget_period: 'month',
      allowed_aliases: [routeId, staleAlias, unverifiedAlias],
    });
    await call('POST', `/change-requests/${wl.body.id}/approve`, approver, {});
    appKey = (await call('POST', `/workloads/${workloadId}/keys`, operator, {})).body.key;
  });

  it('a route nobody verified yet refuses one candidate (403 route_contract_unverified); verified, it serves', async () => {
    const before = await simLastSeq();
    const err = (await ask(routeId).catch((e) => e)) as APIError;
    expect(err.status).toBe(403);
    expect(err.code).toBe('route_contract_unverified');
    expect(await simRequestsSince(before)).toHaveLength(0);
    expect((await call('POST', `/routes/${routeId}/verify`, operator, { probe: true })).status).toBe(200);
    const ok = await eventually(() => ask(routeId).catch(() => undefined), { what: 'the verified route serves' });
    expect(ok.choices).toHaveLength(1);
  });

  it('a new version waits for verification while the previous verified one keeps serving', async () => {
    const changed = await call('PUT', `/routes/${routeId}/contract`, operator, simContract({ upstream_model: 'sim-gpt-v2' }));
    expect(changed.status).toBe(202);
    await call('POST', `/change-requests/${changed.body.id}/approve`, approver, {});
    expect((await call('GET', `/routes/${routeId}`, operator)).body).toMatchObject({
      current_version: 2,
      verification_state: 'unverified',
    });

    // Well past the admission cache TTL: still version 1's model upstream.
    const before = await simLastSeq();
    for (let i = 0; i < 3; i++) await ask(routeId);
    const seen = await simRequestsSince(before);
    expect(seen.map((r) => r.model)).toEqual(['sim-gpt-v1', 'sim-gpt-v1', 'sim-gpt-v1']);

    expect((await call('POST', `/routes/${routeId}/verify`, operator, { probe: true })).status).toBe(200);
    await eventually(
      async () => {
        const since = await simLastSeq();
        await ask(routeId);
        return (await simRequestsSince(since)).some((r) => r.model === 'sim-gpt-v2') || undefined;
      },
      { what: 'version 2 serves once verified' },
    );
  });

  it('a stale or never-verified contract refuses every count, nothing dispatched', async () => {
    const before = await simLastSeq();
    for (const model of [staleAlias, unverifiedAlias]) {
      for (const n of [undefined, 1]) {
        const err = (await openai(appKey)
          .chat.completions.create({ model, ...(n === undefined ? {} : { n }), messages: [{ role: 'user', content: 'x' }] })
          .catch((e) => e)) as APIError;
        expect(err.status).toBe(403);
        expect(err.code).toBe('route_contract_unverified');
      }
    }
    expect(await simRequestsSince(before)).toHaveLength(0);
  });
});
