import { APIError } from 'openai';
import { simContract } from './policy-call';
import { openai, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * Issue 3, the operator story end to end: a route created and verified through the policy API,
 * a workload and key issued there, an exception requested, refused for self-approval, approved
 * by a different approver, used by the app through the openai SDK, then revoked — each change
 * applying at the next request with no restart. Issue 16: every request carries its evidence
 * (outcome, expected volume, typical input) and the policy API projects its cost; approving a
 * projection above the budget needs an override reason.
 */
describe('exceptions through the policy API', () => {
  const run = uid();
  const routeId = `pol-route-${run}`;
  const workloadId = `pol-wl-${run}`;
  let operator: string;
  let approver: string;
  let dualRole: string;

  const call = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${stack.policy}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const parsed = text ? (JSON.parse(text) as Record<string, any>) : {};
    if (process.env.E2E_DEBUG) console.log(method, path, res.status, text);
    return { status: res.status, ok: res.ok, body: parsed };
  };

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      operator = await seed.operator(`olga-${run}`, ['operator']);
      approver = await seed.operator(`arno-${run}`, ['approver']);
      dualRole = await seed.operator(`dana-${run}`, ['operator', 'approver']);
    });
  });

  let appKey = '';
  let exceptionId = '';
  const evidence = (expectedRequests: number) => ({
    outcome: { metric: 'search eval nDCG@10', baseline: 0.41, target: 0.45 },
    expected_requests: expectedRequests,
    typical_input_tokens: 500,
  });
  const request = (over: Record<string, unknown> = {}) => ({
    owner: 'search-team',
    workload_id: workloadId,
    route_id: routeId,
    max_candidates: 2,
    per_candidate_output_ceiling: 64,
    budget_microusd: '1000000',
    expires_at: new Date(Date.now() + 7 * 86400_000).toISOString(),
    justification: 'rerank two drafts for the search eval',
    ...evidence(200),
    ...over,
  });

  it('an operator creates and verifies a route, prices it, and sets up a workload with a key', async () => {
    const created = await call('POST', '/routes', operator, { id: routeId, alias: routeId, ...simContract() });
    expect(created).toMatchObject({ ok: true });
    const verified = await call('POST', `/routes/${routeId}/verify`, operator, { notes: 'reviewed' });
    expect(verified).toMatchObject({ ok: true });
    expect(verified.body.verification_state ?? verified.body.route?.verification_state).toBe('verified');
    const priced = await call('POST', `/routes/${routeId}/prices`, operator, {
      input_per_mtok_microusd: '2500000',
      cached_input_per_mtok_microusd: '1250000',
      output_per_mtok_microusd: '10000000',
      reasoning_per_mtok_microusd: '10000000',
      effective_from: new Date().toISOString(),
    });
    // A route's first price and a new workload raise spend: a second operator approves them.
    expect(priced.status).toBe(202);
    expect((await call('POST', `/change-requests/${priced.body.id}/approve`, approver, {})).status).toBe(200);
    const wl = await call('PUT', `/workloads/${workloadId}`, operator, {
      team: 'search',
      environment: 'dev',
      default_max_candidates: 1,
      per_candidate_output_ceiling: 128,
      budget_microusd: '20000000',
      budget_period: 'month',
      allowed_aliases: [routeId],
      fallback_chain: [],
      allow_length: true,
      allow_content_filter: false,
      deadline_ms: 15000,
      max_in_flight: 8,
    });
    expect(wl.status).toBe(202);
    expect((await call('POST', `/change-requests/${wl.body.id}/approve`, approver, {})).status).toBe(200);
    const key = await call('POST', `/workloads/${workloadId}/keys`, operator, {});
    expect(key).toMatchObject({ ok: true });
    appKey = key.body.key;
    expect(appKey).toMatch(/^gw_/);
  });

  it('an app key calling the policy API gets 403', async () => {
    const res = await call('GET', `/workloads/${workloadId}`, appKey);
    expect(res.status).toBe(403);
  });

  it('n=2 is refused before any exception exists', async () => {
    const err = (await openai(appKey)
      .chat.completions.create({ model: routeId, n: 2, messages: [{ role: 'user', content: 'two' }] })
      .catch((e) => e)) as APIError;
    expect(err.status).toBe(400);
    expect(err.code).toBe('candidate_count_exceeds_policy');
  });

  it('the requester cannot approve their own exception; another approver can', async () => {
    const requested = await call('POST', '/exceptions', dualRole, {
      owner: 'search-team',
      workload_id: workloadId,
      route_id: routeId,
      max_candidates: 2,
      per_candidate_output_ceiling: 64,
      budget_microusd: '1000000',
      expires_at: new Date(Date.now() + 7 * 86400_000).toISOString(),
      justification: 'rerank two drafts for the search eval',
      ...evidence(200),
    });
    expect(requested.status).toBe(201);
    exceptionId = requested.body.id;
    expect(requested.body.status).toBe('requested');
    // 200 × (500 × $2.50 + 2 × 64 × $10 per MTok) = 200 × 2,530 micro-USD, within the 1 USD budget
    expect(requested.body.projection.at_request).toMatchObject({ cost_microusd: '506000', exceeds_budget: false });

    const self = await call('POST', `/exceptions/${exceptionId}/approve`, dualRole, { reason: 'looks fine' });
    expect(self.status).toBe(403);
    expect(self.body.error.code).toBe('self_approval');
    const notApprover = await call('POST', `/exceptions/${exceptionId}/approve`, operator, {});
    expect(notApprover.status).toBe(403);

    const approved = await call('POST', `/exceptions/${exceptionId}/approve`, approver, { reason: 'bounded and time-boxed' });
    expect(approved).toMatchObject({ ok: true });
    expect(approved.body.status).toBe('active');
  });

  it('the app gets two candidates within the exception, capped at its ceiling', async () => {
    const before = await simLastSeq();
    const { data, response } = await openai(appKey)
      .chat.completions.create({ model: routeId, n: 2, messages: [{ role: 'user', content: 'two drafts' }] })
      .withResponse();
    expect(data.choices).toHaveLength(2);
    expect(response.headers.get('x-gateway-effective-candidates')).toBe('2');
    expect((await simRequestsSince(before))[0]).toMatchObject({ candidateCount: 2, maxTokens: 64 });
  });

  it('after revocation the same request is refused at once, and the audit trail shows who did what', async () => {
    const revoked = await call('POST', `/exceptions/${exceptionId}/revoke`, operator, { reason: 'eval finished' });
    expect(revoked).toMatchObject({ ok: true });
    const before = await simLastSeq();
    const err = (await openai(appKey)
      .chat.completions.create({ model: routeId, n: 2, messages: [{ role: 'user', content: 'two' }] })
      .catch((e) => e)) as APIError;
    expect(err.status).toBe(400);
    expect(err.code).toBe('candidate_count_exceeds_policy');
    expect(await simRequestsSince(before)).toHaveLength(0);
    const audit = await call('GET', `/exceptions/${exceptionId}`, operator);
    expect(audit.body.status).toBe('revoked');
    expect(audit.body.events.map((e: any) => e.event)).toEqual(expect.arrayContaining(['request', 'approve', 'revoke']));
  });

  it('a request without its evidence is refused: 400 invalid_request naming the field', async () => {
    for (const [field, body] of [
      ['outcome', request({ outcome: undefined })],
      ['expected_requests', request({ expected_requests: undefined })],
      ['typical_input_tokens', request({ typical_input_tokens: undefined })],
      ['outcome.target', request({ outcome: { metric: 'm', baseline: 0.41, target: 0.41 } })],
      ['expected_requests', request({ expected_requests: 0 })],
    ] as const) {
      const res = await call('POST', '/exceptions', operator, body);
      expect({ field, status: res.status, code: res.body.error?.code, param: res.body.error?.param }).toEqual({
        field,
        status: 400,
        code: 'invalid_request',
        param: field,
      });
    }
  });

  it('a projection above the budget is shown to the approver, refused without an override reason, approved with one', async () => {
    // 1,000 × 2,530 micro-USD = 2.53 USD projected against a 1 USD budget
    const requested = await call('POST', '/exceptions', operator, request(evidence(1_000)));
    expect(requested.status).toBe(201);
    const id: string = requested.body.id;
    const shown = await call('GET', `/exceptions/${id}`, approver);
    expect(shown.body).toMatchObject({
      budget_microusd: '1000000',
      outcome: { metric: 'search eval nDCG@10', baseline: 0.41, target: 0.45, direction: 'increase' },
      expected_requests: 1000,
      typical_input_tokens: 500,
      projection: {
        budget_microusd: '1000000',
        at_request: { cost_microusd: '2530000', exceeds_budget: true, route_id: routeId, price_revision_id: expect.any(String) },
        at_approval: null,
        override_reason: null,
      },
    });
    const listed = await call('GET', `/exceptions?workload_id=${workloadId}`, approver);
    expect(listed.body.exceptions.find((e: any) => e.id === id)?.projection.at_request).toMatchObject({ cost_microusd: '2530000' });

    const refused = await call('POST', `/exceptions/${id}/approve`, approver, { reason: 'looks useful' });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'projection_exceeds_budget', param: 'override_reason' });
    expect(refused.body.error.message).toMatch(/2530000 micro-USD.*exceeds its budget \(1000000 micro-USD\)/);
    expect((await call('GET', `/exceptions/${id}`, approver)).body.status).toBe('requested');
    const blank = await call('POST', `/exceptions/${id}/approve`, approver, { override_reason: '   ' });
    expect(blank.status).toBe(400);
    expect(blank.body.error).toMatchObject({ code: 'invalid_request', param: 'override_reason' });

    const override = 'the eval stops when the budget is spent; volume is a ceiling';
    const approved = await call('POST', `/exceptions/${id}/approve`, approver, { reason: 'looks useful', override_reason: override });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({
      status: 'active',
      projection: {
        at_request: { cost_microusd: '2530000' },
        at_approval: {
          cost_microusd: '2530000',
          exceeds_budget: true,
          price_revision_id: shown.body.projection.at_request.price_revision_id,
        },
        override_reason: override,
      },
    });
    const audit = await call('GET', `/exceptions/${id}`, operator);
    expect(audit.body.projection.override_reason).toBe(override);
    expect(audit.body.events.find((e: any) => e.event === 'approve')).toMatchObject({
      actor: expect.stringMatching(/^arno-/),
      reason: 'looks useful',
      override_reason: override,
    });
    expect((await call('POST', `/exceptions/${id}/revoke`, operator, { reason: 'e2e done' })).status).toBe(200);
  });
});
