import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { olga, routeCommand, T0, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { GetRoute } from '../get-route/get-route.usecase';
import { AddPriceRevision } from './add-price-revision.usecase';

const finance = { subject: 'fin', roles: ['finance'] };
const prices = {
  input_per_mtok_microusd: 2_500_000n,
  cached_input_per_mtok_microusd: 1_250_000n,
  output_per_mtok_microusd: 10_000_000n,
  reasoning_per_mtok_microusd: 10_000_000n,
};

describe('AddPriceRevision', () => {
  const setup = async () => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(store, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    return { store, clock, add: new AddPriceRevision(store, clock, new SequentialIds('price')) };
  };

  it('adds an immutable revision with money as integer strings, effective now by default', async () => {
    const { add, store } = await setup();
    const p = await add.execute(finance, 'rt-openai', { ...prices, id: 'p1' });
    expect(p).toMatchObject({
      id: 'p1',
      route_id: 'rt-openai',
      effective_from: T0.toISOString(),
      input_per_mtok_microusd: '2500000',
      cached_input_per_mtok_microusd: '1250000',
      output_per_mtok_microusd: '10000000',
      reasoning_per_mtok_microusd: '10000000',
      created_by: 'fin',
    });
    expect(store.changes.at(-1)).toMatchObject({ entity: 'price_revision', entityId: 'p1', actor: 'fin' });
  });

  it('shows the revision in force on the route; a future one takes over at its time', async () => {
    const { add, clock, store } = await setup();
    await add.execute(finance, 'rt-openai', { ...prices, id: 'p1' });
    await add.execute(finance, 'rt-openai', {
      ...prices,
      id: 'p2',
      output_per_mtok_microusd: 8_000_000n,
      effective_from: new Date(T0.getTime() + 60_000),
    });
    const get = new GetRoute(store, clock);
    expect((await get.execute('rt-openai')).price_in_force).toMatchObject({ id: 'p1' });
    clock.advance(60_000);
    expect((await get.execute('rt-openai')).price_in_force).toMatchObject({ id: 'p2', output_per_mtok_microusd: '8000000' });
  });

  it('refuses backdating, a clashing effective_from, and a reused id with other values', async () => {
    const { add } = await setup();
    await expect(
      add.execute(finance, 'rt-openai', { ...prices, effective_from: new Date(T0.getTime() - 3_600_000) }),
    ).rejects.toMatchObject({ code: 'invalid_request', param: 'effective_from' });
    await add.execute(finance, 'rt-openai', { ...prices, id: 'p1' });
    await expect(add.execute(finance, 'rt-openai', { ...prices, id: 'p9' })).rejects.toMatchObject({
      code: 'price_revision_exists',
      param: 'effective_from',
    });
    await expect(add.execute(finance, 'rt-openai', { ...prices, id: 'p1', input_per_mtok_microusd: 1n })).rejects.toMatchObject({
      code: 'price_revision_exists',
      param: 'id',
    });
  });

  it('a retry with the same id and values returns the stored revision', async () => {
    const { add, clock, store } = await setup();
    const first = await add.execute(finance, 'rt-openai', { ...prices, id: 'p1' });
    clock.advance(1000);
    expect(await add.execute(finance, 'rt-openai', { ...prices, id: 'p1' })).toEqual(first);
    expect(store.routes.get('rt-openai')!.prices).toHaveLength(1);
  });

  it('is 404 for an unknown route', async () => {
    const { add } = await setup();
    await expect(add.execute(finance, 'nope', prices)).rejects.toMatchObject({ code: 'not_found' });
  });
});
