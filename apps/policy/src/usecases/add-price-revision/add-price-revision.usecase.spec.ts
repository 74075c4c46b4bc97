import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { bob, DAY_MS, olga, routeCommand, T0, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { GetRoute } from '../get-route/get-route.usecase';
import { parseBody } from '../input';
import { addPriceRevisionBody } from './add-price-revision.command';
import { PendingChange } from '../change-requests';
import { fourEyes } from '../../testing/four-eyes';
import { priceRevisionFromWire } from '@gateway/contracts';
import { priceJson } from '../views';

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

  describe('structured revisions', () => {
    const rates = (input: string, output: string) => ({
      input_per_mtok_microusd: input,
      cached_input_per_mtok_microusd: '125000',
      output_per_mtok_microusd: output,
      reasoning_per_mtok_microusd: output,
    });
    const body = {
      ...rates('1250000', '10000000'),
      context_tier_rule: 'whole_request',
      context_tiers: [{ above_input_tokens: 200_000, rates: rates('2500000', '15000000') }],
      service_tiers: { priority: { rates: rates('2500000', '20000000') }, flex: { rates: rates('625000', '5000000') } },
      per_call_fees: [{ feature: 'web_search', fee_microusd: '10000', reserved_calls_per_request: 5 }],
    };
    const refusal = (raw: object) => {
      try {
        parseBody(addPriceRevisionBody, raw);
      } catch (err) {
        return { code: (err as { code: string }).code, param: (err as { param?: string }).param, message: (err as Error).message };
      }
      throw new Error('accepted');
    };

    it('stores a structure (after approval: it prices new tiers and a fee) and shows it exactly as sent', async () => {
      const { add, eyes, store } = await setup();
      const pending = (await add.execute(finance, 'rt-openai', {
        ...parseBody(addPriceRevisionBody, body),
        id: 'p-tiers',
      })) as PendingChange;
      expect(pending.body.raises).toEqual(
        expect.arrayContaining(['service tier flex added (admits service_tier flex)', 'per-call fee web_search added (admits web_search)']),
      );
      await eyes.decide.execute(bob, pending.body.id, { decision: 'approve' });
      const stored = await store.priceById('p-tiers');
      expect(stored).toMatchObject({ contextTiers: [{ aboveInputTokens: 200_000 }], perCallFees: [{ feeMicrousd: 10_000n }] });
      const { id: _id, route_id: _r, effective_from: _e, created_at: _c, created_by: _b, reason: _why, ...shown } = priceJson(stored!);
      expect(shown).toEqual(body);
    });

    it.each<[string, object, string, RegExp]>([
      [
        'overlapping context tiers',
        { context_tiers: [body.context_tiers[0], body.context_tiers[0]] },
        'context_tiers.1.above_input_tokens',
        /overlaps the tier before it/,
      ],
      [
        'unordered context tiers',
        { context_tiers: [{ above_input_tokens: 300_000, rates: rates('3', '3') }, body.context_tiers[0]] },
        'context_tiers.1.above_input_tokens',
        /ascending order/,
      ],
      [
        "a service tier's context tier with a negative rate",
        { service_tiers: { flex: { rates: rates('1', '1'), context_tiers: [{ above_input_tokens: 1, rates: rates('-1', '1') }] } } },
        'service_tiers.flex.context_tiers.0.rates.input_per_mtok_microusd',
        /non-negative integer/,
      ],
      [
        'a tier that prices a category its base does not',
        { context_tiers: [{ above_input_tokens: 1, rates: { ...rates('1', '1'), image_output_per_mtok_microusd: '5' } }] },
        'context_tiers.0.rates.image_output_per_mtok_microusd',
        /exactly the categories its base prices/,
      ],
      ['a service tier named default', { service_tiers: { default: { rates: rates('1', '1') } } }, 'service_tiers.default', /named like/],
      [
        'a rate-priced feature as a fee',
        { per_call_fees: [{ feature: 'service_tier', fee_microusd: 1, reserved_calls_per_request: 1 }] },
        'per_call_fees.0.feature',
        /must be one of/,
      ],
      [
        'a fee reserving no calls',
        { per_call_fees: [{ ...body.per_call_fees[0], reserved_calls_per_request: 0 }] },
        'per_call_fees.0.reserved_calls_per_request',
        /from 1 to 1000/,
      ],
      [
        'an unknown key inside a tier',
        { context_tiers: [{ ...body.context_tiers[0], currency: 'EUR' }] },
        'context_tiers.0.currency',
        /unknown field/,
      ],
      ['an unknown rule', { context_tier_rule: 'output_only' }, 'context_tier_rule', /whole_request/],
      [
        'a money amount as a float',
        { per_call_fees: [{ ...body.per_call_fees[0], fee_microusd: 0.5 }] },
        'per_call_fees.0.fee_microusd',
        /never a float/,
      ],
      [
        'too many context tiers',
        { context_tiers: Array.from({ length: 17 }, (_, i) => ({ above_input_tokens: i + 1, rates: rates('1', '1') })) },
        'context_tiers',
        /at most 16/,
      ],
      [
        'a fee whose reserved calls overflow the reservation',
        { per_call_fees: [{ feature: 'web_search', fee_microusd: '9000000000000000000', reserved_calls_per_request: 1000 }] },
        'per_call_fees.0.fee_microusd',
        /above the 9223372036854775807 the gateway can store/,
      ],
    ])('refuses %s with a 400 naming the field', (_name, change, param, message) => {
      expect(refusal({ ...body, ...change })).toEqual({ code: 'invalid_request', param, message: expect.stringMatching(message) });
    });

    it('a lowered tier rate waits for a second operator; an identical retry is the same revision, a different body is refused', async () => {
      const { add, store } = await setup();
      await store.putPrice(
        {
          ...priceRevisionFromWire('p-s0', parseBody(addPriceRevisionBody, body)),
          routeId: 'rt-openai',
          effectiveFrom: T0,
          actor: 'seed',
          reason: 'seed',
        },
        T0,
      );
      const cheaperFlex = { ...body, service_tiers: { ...body.service_tiers, flex: { rates: rates('600000', '5000000') } } };
      const pending = (await add.execute(finance, 'rt-openai', {
        ...parseBody(addPriceRevisionBody, cheaperFlex),
        id: 'p-s1',
        effective_from: new Date(T0.getTime() + DAY_MS),
      })) as PendingChange;
      expect(pending.body.raises).toEqual(['service tier flex: inputPerMTokMicrousd lowered']);
      const dearer = { ...body, per_call_fees: [{ ...body.per_call_fees[0], fee_microusd: '12000' }] };
      const cmd = { ...parseBody(addPriceRevisionBody, dearer), id: 'p-s2', effective_from: new Date(T0.getTime() + 2 * DAY_MS) };
      const first = await add.execute(finance, 'rt-openai', cmd);
      expect(await add.execute(finance, 'rt-openai', cmd)).toEqual(first);
      await expect(
        add.execute(finance, 'rt-openai', { ...cmd, per_call_fees: [{ ...cmd.per_call_fees![0], reserved_calls_per_request: 6 }] }),
      ).rejects.toMatchObject({
        code: 'price_revision_exists',
      });
    });
  });
});
