import { APIError } from 'openai';
import { openai, uid, withSeeder } from './support';
import { policyCall as call, simContract, simPrice } from './policy-call';

/**
 * Issue 8 §5 through the policy API: every change that raises spend (a workload's limits, a
 * lowered or first price, a new upstream) answers 202 with a change request, takes effect only
 * when an approver other than the requester approves it, and leaves an audit trail; lowering a
 * limit stays one step.
 */
describe('four-eyes for changes that raise spend', () => {
  const run = uid();
  const routeId = `fe-route-${run}`;
  const workloadId = `fe-wl-${run}`;
  let operator: string;
  let approver: string;
  let appKey = '';

  const approve = async (id: string) => {
    const self = await call('POST', `/change-requests/${id}/approve`, operator, {});
    expect(self.status).toBe(403);
    const res = await call('POST', `/change-requests/${id}/approve`, approver, { reason: 'checked' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'approved', decided_by: `arno-${run}` });
    return res.body;
  };

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      // the requester also holds the approver role, so only the four-eyes rule stops self-approval
      operator = await seed.operator(`olga-${run}`, ['operator', 'approver', 'finance']);
      approver = await seed.operator(`arno-${run}`, ['approver']);
    });
    expect((await call('POST', '/routes', operator, { id: routeId, alias: routeId, ...simContract() })).status).toBe(201);
    expect((await call('POST', `/routes/${routeId}/verify`, operator, { notes: 'reviewed' })).status).toBe(200);
  });

  it('a route’s first price and an all-zero revision wait for approval', async () => {
    const first = await call('POST', `/routes/${routeId}/prices`, operator, simPrice);
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ kind: 'price_revision', target_id: routeId, status: 'pending', requested_by: `olga-${run}` });
    expect((await call('GET', `/routes/${routeId}`, operator)).body.price_in_force).toBeNull();
    await approve(first.body.id);
    expect((await call('GET', `/routes/${routeId}`, operator)).body.price_in_force).toMatchObject({ output_per_mtok_microusd: '10000000' });

    const zero = await call('POST', `/routes/${routeId}/prices`, operator, {
      input_per_mtok_microusd: 0,
      cached_input_per_mtok_microusd: 0,
      output_per_mtok_microusd: 0,
      reasoning_per_mtok_microusd: 0,
      effective_from: new Date(Date.now() + 60_000).toISOString(),
    });
    expect(zero.status).toBe(202);
    expect(zero.body.raises).toHaveLength(4);
    const rejected = await call('POST', `/change-requests/${zero.body.id}/reject`, approver, { reason: 'free is not a price' });
    expect(rejected.body).toMatchObject({ status: 'rejected', decision_reason: 'free is not a price' });
    expect((await call('POST', `/change-requests/${zero.body.id}/approve`, approver, {})).status).toBe(409);
    expect((await call('GET', `/routes/${routeId}`, operator)).body.prices).toHaveLength(1);
  });

  it('a new workload and higher limits wait for approval; lowering applies at once', async () => {
    const policy = {
      team: 'search',
      environment: 'dev',
      per_candidate_output_ceiling: 128,
      budget_microusd: '20000000',
      budget_period: 'month',
      allowed_aliases: [routeId],
      max_in_flight: 8,
    };
    const created = await call('PUT', `/workloads/${workloadId}`, operator, policy);
    expect(created.status).toBe(202);
    expect((await call('GET', `/workloads/${workloadId}`, operator)).status).toBe(404);
    await approve(created.body.id);
    appKey = (await call('POST', `/workloads/${workloadId}/keys`, operator, {})).body.key;

    const raised = await call('PUT', `/workloads/${workloadId}`, operator, {
      ...policy,
      default_max_candidates: 4,
      budget_microusd: '90000000',
    });
    expect(raised.status).toBe(202);
    expect(raised.body.raises).toEqual(['default_max_candidates up', 'budget up']);
    // not applied: n=2 is still over the approved maximum
    const refused = (await openai(appKey)
      .chat.completions.create({ model: routeId, n: 2, messages: [{ role: 'user', content: 'two' }] })
      .catch((e) => e)) as APIError;
    expect(refused.status).toBe(400);
    expect(refused.code).toBe('candidate_count_exceeds_policy');

    const lowered = await call('PUT', `/workloads/${workloadId}`, operator, { ...policy, budget_microusd: '10000000', max_in_flight: 4 });
    expect(lowered.status).toBe(200);
    expect(lowered.body).toMatchObject({ budget_microusd: '10000000', max_in_flight: 4 });

    await approve(raised.body.id);
    expect((await call('GET', `/workloads/${workloadId}`, operator)).body).toMatchObject({
      default_max_candidates: 4,
      budget_microusd: '90000000',
    });
  });

  it('a new upstream URL waits for approval; a host off the allowlist is refused outright', async () => {
    const other = simContract({ upstream_base_url: 'http://127.0.0.1:9' });
    const moved = await call('PUT', `/routes/${routeId}/contract`, operator, other);
    expect(moved.status).toBe(202);
    expect(moved.body).toMatchObject({ kind: 'route_contract', raises: ['upstream_base_url changed'] });
    expect((await call('GET', `/routes/${routeId}`, operator)).body.current_version).toBe(1);

    for (const url of ['http://10.1.2.3/v1', 'http://169.254.169.254', 'https://evil.example', `${simContract().upstream_base_url}/?k=1`]) {
      const bad = await call('PUT', `/routes/${routeId}/contract`, operator, simContract({ upstream_base_url: url }));
      expect(bad.status).toBe(400);
      expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'upstream_base_url' });
    }

    await approve(moved.body.id);
    const route = (await call('GET', `/routes/${routeId}`, operator)).body;
    expect(route).toMatchObject({ current_version: 2, verification_state: 'unverified' });
  });

  it('the audit trail lists every request with requester, decision and decider', async () => {
    const all = await call('GET', '/change-requests?limit=1000', approver);
    const mine = (all.body.change_requests as Array<Record<string, unknown>>).filter((c) => c.requested_by === `olga-${run}`);
    expect(mine.map((c) => [c.kind, c.status]).sort()).toEqual(
      [
        ['price_revision', 'approved'],
        ['price_revision', 'rejected'],
        ['route_contract', 'approved'],
        ['workload_policy', 'approved'],
        ['workload_policy', 'approved'],
      ].sort(),
    );
    expect(mine.every((c) => c.decided_by === `arno-${run}` && c.decided_at !== null)).toBe(true);
    expect((await call('GET', '/change-requests?status=bogus', approver)).status).toBe(400);
  });
});
