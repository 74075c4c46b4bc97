import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { bob, DAY_MS, olga, routeCommand, T0, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { GetRoute } from '../get-route/get-route.usecase';
import { parseBody } from '../input';
import { addPriceRevisionBody } from './add-price-revision.command';
import { PendingChange } from '../change-requests';
import { fourEyes } from '../../testing/four-eyes';

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
    const eyes = fourEyes(store, clock);
    // The route's first price went through approval already (see 'a first price ...').
    await store.putPrice(
      {
        id: 'p0',
        routeId: 'rt-openai',
        effectiveFrom: new Date(T0.getTime() - DAY_MS),
        inputPerMTokMicrousd: prices.input_per_mtok_microusd,
        cachedInputPerMTokMicrousd: prices.cached_input_per_mtok_microusd,
        outputPerMTokMicrousd: prices.output_per_mtok_microusd,
        reasoningPerMTokMicrousd: prices.reasoning_per_mtok_microusd,
        actor: 'seed',
        reason: 'seed',
      },
      T0,
    );
    return { store, clock, eyes, add: eyes.addPrice };
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
      output_per_mtok_microusd: 12_000_000n,
      effective_from: new Date(T0.getTime() + 60_000),
    });
    const get = new GetRoute(store, clock);
    expect((await get.execute('rt-openai')).price_in_force).toMatchObject({ id: 'p1' });
    clock.advance(60_000);
    expect((await get.execute('rt-openai')).price_in_force).toMatchObject({ id: 'p2', output_per_mtok_microusd: '12000000' });
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
    expect(store.routes.get('rt-openai')!.prices).toHaveLength(2);
  });

  it('is 404 for an unknown route', async () => {
    const { add } = await setup();
    await expect(add.execute(finance, 'nope', prices)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('refuses a rate at which the largest reservation would not fit bigint micro-USD, naming the rate', () => {
    const wire = { input_per_mtok_microusd: '2500000', cached_input_per_mtok_microusd: '0', reasoning_per_mtok_microusd: '0' };
    expect(() => parseBody(addPriceRevisionBody, { ...wire, output_per_mtok_microusd: '5000000000000000' })).toThrow(
      expect.objectContaining({
        code: 'invalid_request',
        param: 'output_per_mtok_microusd',
        message: expect.stringMatching(/above the 9223372036854775807 the gateway can store/),
      }),
    );
    expect(parseBody(addPriceRevisionBody, { ...wire, output_per_mtok_microusd: '4000000000000000' })).toMatchObject({
      output_per_mtok_microusd: 4_000_000_000_000_000n,
    });
  });

  it('a lowered rate (or an all-zero revision) waits for a second operator; approval writes it', async () => {
    const { add, eyes, store } = await setup();
    const zero = (await add.execute(finance, 'rt-openai', {
      id: 'p-zero',
      input_per_mtok_microusd: 0n,
      cached_input_per_mtok_microusd: 0n,
      output_per_mtok_microusd: 0n,
      reasoning_per_mtok_microusd: 0n,
    })) as PendingChange;
    expect(zero).toBeInstanceOf(PendingChange);
    expect(zero.body).toMatchObject({ kind: 'price_revision', target_id: 'rt-openai', status: 'pending' });
    expect(zero.body.raises).toHaveLength(4);
    const cheaper = (await add.execute(finance, 'rt-openai', {
      ...prices,
      id: 'p-cheap',
      output_per_mtok_microusd: 9_000_000n,
    })) as PendingChange;
    expect(cheaper.body.raises).toEqual(['outputPerMTokMicrousd lowered']);
    expect(await store.priceById('p-cheap')).toBeNull();
    await expect(eyes.decide.execute(finance, cheaper.body.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'self_approval' });
    await expect(eyes.decide.execute(olga, cheaper.body.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'not_an_approver' });
    await eyes.decide.execute(bob, cheaper.body.id, { decision: 'approve' });
    expect(await store.priceById('p-cheap')).toMatchObject({ outputPerMTokMicrousd: 9_000_000n, createdBy: 'fin' });
    await eyes.decide.execute(bob, zero.body.id, { decision: 'reject', reason: 'free is not a price' });
    expect(await store.priceById('p-zero')).toBeNull();
  });

  it("a route's first price waits for a second operator", async () => {
    const store = new InMemoryPolicyStore();
    await new CreateRoute(store, new FakeClock(T0), new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    const add = fourEyes(store, new FakeClock(T0)).addPrice;
    const first = (await add.execute(finance, 'rt-openai', prices)) as PendingChange;
    expect(first.body.raises).toEqual(['first price of the route']);
  });
});
