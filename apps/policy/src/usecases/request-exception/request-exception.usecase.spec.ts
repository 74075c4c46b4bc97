import { FakeClock, InMemoryExceptionStore, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { DAY_MS, exceptionCommand, olga, routeCommand, T0, workloadCommand, ALLOWLIST } from '../../testing/fixtures';
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
    await fourEyes(policy, clock).seedWorkload('wl', workloadCommand());
    return { exceptions, request: new RequestException(exceptions, policy, clock, new SequentialIds('ex')) };
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
    const { request } = await setup();
    await expect(
      request.execute(olga, exceptionCommand({ expires_at: new Date(T0.getTime() + 90 * DAY_MS), route_id: null })),
    ).resolves.toMatchObject({ route_id: null });
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
  };
}
