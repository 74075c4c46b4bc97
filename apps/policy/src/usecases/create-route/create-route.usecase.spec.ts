import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { olga, routeCommand, T0, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from './create-route.usecase';

describe('CreateRoute', () => {
  const setup = () => {
    const store = new InMemoryPolicyStore();
    return { store, createRoute: new CreateRoute(store, new FakeClock(T0), new SequentialIds('rt'), ALLOWLIST) };
  };

  it('creates the route with an unverified contract version 1 and announces it', async () => {
    const { store, createRoute } = setup();
    const route = await createRoute.execute(olga, routeCommand());
    expect(route).toMatchObject({
      id: 'rt-openai',
      alias: 'approved-standard',
      current_version: 1,
      verification_state: 'unverified',
      contract: {
        version: 1,
        current: true,
        candidate_param: 'n',
        output_cap_semantics: 'per_candidate',
        verified_at: null,
        created_by: 'olga',
      },
    });
    expect(route.versions).toHaveLength(1);
    expect(store.changes).toEqual([{ entity: 'route', entityId: 'rt-openai', change: 'contract version 1', actor: 'olga' }]);
  });

  it('takes an id from the injected generator when none is given', async () => {
    const { createRoute } = setup();
    const route = await createRoute.execute(olga, routeCommand({ id: undefined }));
    expect(route.id).toBe('rt-1');
  });

  it('refuses an existing id or alias with 409 codes instead of appending a version', async () => {
    const { store, createRoute } = setup();
    await createRoute.execute(olga, routeCommand());
    await expect(createRoute.execute(olga, routeCommand({ alias: 'other' }))).rejects.toMatchObject({ code: 'route_exists', param: 'id' });
    await expect(createRoute.execute(olga, routeCommand({ id: 'rt-2' }))).rejects.toMatchObject({ code: 'alias_taken', param: 'alias' });
    expect(store.routes.get('rt-openai')!.currentVersion).toBe(1);
  });

  it.each([
    'http://10.0.0.8/v1',
    'http://169.254.169.254',
    'http://localhost:3010',
    'https://evil.example',
    'http://upstream.test/v1?key=x',
    'http://user:pw@upstream.test',
  ])('refuses upstream_base_url %s with 400 invalid_request and writes nothing', async (url) => {
    const { store, createRoute } = setup();
    await expect(createRoute.execute(olga, routeCommand({ upstream_base_url: url }))).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'upstream_base_url',
    });
    expect(store.routes.size).toBe(0);
  });
});
