import { FakeClock, InMemoryExceptionStore, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { DAY_MS, exceptionCommand, olga, priceInput, routeCommand, T0, workloadCommand, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { parseBody } from '../input';
import { fourEyes } from '../../testing/four-eyes';
import { requestExceptionBody, RequestExceptionCommand } from './request-exception.command';
import { RequestException } from './request-exception.usecase';

describe('RequestException', () => {
  const setup = async () => {
    const policy = new InMemoryPolicyStore();
    const exceptions = new InMemoryExceptionStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(policy, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    await policy.putPrice(priceInput(), T0);
    await fourEyes(policy, clock).seedWorkload('wl', workloadCommand());
    return { policy, clock, exceptions, request: new RequestException(exceptions, policy, clock, new SequentialIds('ex')) };
  };

  it('files a request (nothing granted yet) with requested_by = caller, an audit row and a policy event', async () => {
    const { request, exceptions } = await setup();
    const ex = await request.execute(olga, exceptionCommand());
    expect(ex).toMatchObject({
      status: 'requested',
      requested_by: 'olga',
      budget_microusd: '2000000',
      max_candidates: 3,
      route_id: 'rt-openai',
    });
    expect(ex.events).toEqual([
      expect.objectContaining({
        event: 'request',
        from_status: null,
        to_status: 'requested',
        actor: 'olga',
        reason: 'A/B test of reranking three drafts',
      }),
    ]);
    expect(exceptions.changes).toEqual([expect.objectContaining({ entity: 'exception', entityId: ex.id, actor: 'olga' })]);
  });

  it.each<[string, Partial<RequestExceptionCommand>, string]>([
    ['expiry in the past', { expires_at: new Date(T0.getTime() - 1) }, 'expires_at'],
    ['expiry now', { expires_at: T0 }, 'expires_at'],
    ['expiry beyond 90 days', { expires_at: new Date(T0.getTime() + 90 * DAY_MS + 1) }, 'expires_at'],
    ['zero budget', { budget_microusd: 0n }, 'budget_microusd'],
    ['unknown workload', { workload_id: 'nope' }, 'workload_id'],
    ['unknown route', { route_id: 'nope' }, 'route_id'],
    ['more candidates than the route supports', { max_candidates: 5 }, 'max_candidates'],
  ])('refuses %s (400 naming the field)', async (_what, change, param) => {
    const { request } = await setup();
    await expect(request.execute(olga, exceptionCommand(change))).rejects.toMatchObject({ code: 'invalid_request', param });
  });

  it('accepts exactly 90 days and a workload-wide exception (no route)', async () => {
    const { request, policy, clock } = await setup();
    await fourEyes(policy, clock).seedWorkload('wl', workloadCommand({ allowed_aliases: ['approved-standard'] }));
    await expect(
      request.execute(olga, exceptionCommand({ expires_at: new Date(T0.getTime() + 90 * DAY_MS), route_id: null })),
    ).resolves.toMatchObject({ route_id: null, projection: { at_request: { route_id: 'rt-openai', price_revision_id: 'p0' } } });
  });

  it('stores the evidence and the cost projected at the price in force, beside the budget', async () => {
    const { request, exceptions } = await setup();
    const ex = await request.execute(olga, exceptionCommand());
    expect(ex).toMatchObject({
      outcome: { metric: 'rerank win rate', baseline: 0.5, target: 0.6, direction: 'increase' },
      expected_requests: 200,
      typical_input_tokens: 500,
      projection: {
        budget_microusd: '2000000',
        // 200 × (500 × $2.50 + 3 × 256 × $10 per MTok) = 200 × (1,250 + 7,680)
        at_request: {
          cost_microusd: '1786000',
          exceeds_budget: false,
          route_id: 'rt-openai',
          price_revision_id: 'p0',
          at: T0.toISOString(),
        },
        at_approval: null,
        override_reason: null,
      },
    });
    expect(exceptions.rows.get(ex.id)!.requestProjection).toMatchObject({ costMicrousd: 1_786_000n, priceRevisionId: 'p0' });
    // a projection above the budget is recorded as such; approval will need an override
    const dear = await request.execute(olga, exceptionCommand({ expected_requests: 1_000 }));
    expect(dear.projection.at_request).toMatchObject({ cost_microusd: '8930000', exceeds_budget: true });
  });

  it('a workload-wide exception is projected on the dearest route its workload allows', async () => {
    const { request, policy, clock } = await setup();
    await new CreateRoute(policy, clock, new SequentialIds('rt2'), ALLOWLIST).execute(
      olga,
      routeCommand({ id: 'rt-dear', alias: 'dear', output_cap_semantics: 'per_candidate' }),
    );
    await policy.putPrice(priceInput({ id: 'dear-p', routeId: 'rt-dear', outputPerMTokMicrousd: 20_000_000n }), T0);
    await new CreateRoute(policy, clock, new SequentialIds('rt3'), ALLOWLIST).execute(
      olga,
      routeCommand({ id: 'rt-free', alias: 'unpriced' }),
    );
    await fourEyes(policy, clock).seedWorkload('wl', workloadCommand({ allowed_aliases: ['approved-standard', 'dear', 'unpriced'] }));
    const ex = await request.execute(olga, exceptionCommand({ route_id: null }));
    expect(ex.projection.at_request).toMatchObject({
      route_id: 'rt-dear',
      price_revision_id: 'dear-p',
      cost_microusd: String(200 * (1_250 + 15_360)),
    });
  });

  it.each<[string, Partial<RequestExceptionCommand>, boolean, string]>([
    ['a route without a price in force', { route_id: 'rt-unpriced' }, false, 'route_id'],
    ['a workload-wide exception whose workload allows no priced route', { route_id: null }, false, 'route_id'],
    [
      'a projection beyond what the gateway can store',
      { expected_requests: 2_000_000_000, per_candidate_output_ceiling: 1_000_000 },
      true,
      'expected_requests',
    ],
  ])('refuses %s (400 naming the field)', async (_what, change, hugePrice, param) => {
    const { request, policy, clock } = await setup();
    await new CreateRoute(policy, clock, new SequentialIds('rt2'), ALLOWLIST).execute(
      olga,
      routeCommand({ id: 'rt-unpriced', alias: 'unpriced' }),
    );
    if (hugePrice) await policy.putPrice(priceInput({ id: 'p-huge', effectiveFrom: T0, outputPerMTokMicrousd: 4_000_000_000_000n }), T0);
    await expect(request.execute(olga, exceptionCommand(change))).rejects.toMatchObject({ code: 'invalid_request', param });
  });

  it('refuses a maximum the workload already has', async () => {
    const { request } = await setup();
    expect(() => parseBody(requestExceptionBody, { ...wire(), max_candidates: 1 })).toThrow(
      expect.objectContaining({ param: 'max_candidates' }),
    );
    await expect(request.execute(olga, exceptionCommand({ max_candidates: 2 }))).resolves.toBeDefined();
  });

  it('parses the wire format: money as a string or integer, never a float', () => {
    expect(parseBody(requestExceptionBody, wire())).toMatchObject({
      budget_microusd: 2_000_000n,
      expires_at: new Date('2026-12-08T10:00:00Z'),
      allows_streaming: false,
    });
    expect(() => parseBody(requestExceptionBody, { ...wire(), budget_microusd: 2.5 })).toThrow(
      expect.objectContaining({ param: 'budget_microusd' }),
    );
    expect(() => parseBody(requestExceptionBody, { ...wire(), justification: '   ' })).toThrow(
      expect.objectContaining({ param: 'justification' }),
    );
    expect(() => parseBody(requestExceptionBody, { ...wire(), status: 'active' })).toThrow(expect.objectContaining({ param: 'status' }));
    // count × ceiling must fit one reservation; the budget must leave room for one more reservation
    expect(() => parseBody(requestExceptionBody, { ...wire(), max_candidates: 2, per_candidate_output_ceiling: 1_065_353_216 })).toThrow(
      expect.objectContaining({
        code: 'invalid_request',
        param: 'per_candidate_output_ceiling',
        message: expect.stringMatching(/at most 1065353215/),
      }),
    );
    expect(parseBody(requestExceptionBody, { ...wire(), max_candidates: 2, per_candidate_output_ceiling: 1_065_353_215 })).toBeTruthy();
    expect(() => parseBody(requestExceptionBody, { ...wire(), budget_microusd: '4611686018427387904' })).toThrow(
      expect.objectContaining({ param: 'budget_microusd' }),
    );
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['no outcome', { outcome: undefined }, 'outcome'],
    ['no expected volume', { expected_requests: undefined }, 'expected_requests'],
    ['no typical input', { typical_input_tokens: undefined }, 'typical_input_tokens'],
    ['a blank metric', { outcome: { metric: '  ', baseline: 1, target: 2 } }, 'outcome.metric'],
    ['an unbounded metric', { outcome: { metric: 'm'.repeat(201), baseline: 1, target: 2 } }, 'outcome.metric'],
    ['a target equal to the baseline', { outcome: { metric: 'm', baseline: 0.5, target: 0.5 } }, 'outcome.target'],
    ['a baseline that is not a number', { outcome: { metric: 'm', baseline: '0.5', target: 0.7 } }, 'outcome.baseline'],
    ['an unknown outcome field', { outcome: { metric: 'm', baseline: 0.5, target: 0.7, unit: '%' } }, 'outcome.unit'],
    ['zero expected requests', { expected_requests: 0 }, 'expected_requests'],
    ['fractional expected requests', { expected_requests: 10.5 }, 'expected_requests'],
    ['zero typical input', { typical_input_tokens: 0 }, 'typical_input_tokens'],
    ['more typical input than a request can carry', { typical_input_tokens: 16_777_217 }, 'typical_input_tokens'],
  ])('refuses %s: 400 invalid_request naming the field', (_what, change, param) => {
    expect(() => parseBody(requestExceptionBody, { ...wire(), ...change })).toThrow(
      expect.objectContaining({ code: 'invalid_request', param }),
    );
  });

  it('reads the direction from target vs baseline: a metric may be meant to fall', () => {
    expect(
      parseBody(requestExceptionBody, { ...wire(), outcome: { metric: 'p95 latency ms', baseline: 1200, target: 900 } }).outcome,
    ).toEqual({
      metric: 'p95 latency ms',
      baseline: 1200,
      target: 900,
    });
  });
});

function wire() {
  return {
    owner: 'search-team',
    workload_id: 'wl',
    max_candidates: 3,
    per_candidate_output_ceiling: 256,
    budget_microusd: '2000000',
    expires_at: '2026-12-08T10:00:00Z',
    justification: 'A/B test',
    outcome: { metric: 'rerank win rate', baseline: 0.5, target: 0.6 },
    expected_requests: 200,
    typical_input_tokens: 500,
  };
}
