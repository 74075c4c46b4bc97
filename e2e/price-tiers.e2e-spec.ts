import { APIError } from 'openai';
import { structuredPriceBody } from '@gateway/testing';
import { policyCall } from './policy-call';
import { eventually, openai, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * Issue 14 through the official OpenAI SDK: a `service_tier` is admitted only when the route
 * contract declares it and the price revision in force prices that tier, and the reservation is at
 * the worst rates the request can reach — the requested service tier, and the context tier its
 * input estimate can cross. The structured revision goes in through the policy API (a lowered
 * price: four-eyes) like an operator's would.
 */
describe('service tiers and the price in force (issue 14)', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  const CEILING = 64;
  let key: string;

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      const sim = stack.providerSim;
      const route = { providerKind: 'openai-chat' as const, upstreamBaseUrl: sim, upstreamModel: 'sim-gpt' };
      await seed.route({ ...route, routeId: r('tier-none'), alias: r('tier-none') });
      await seed.route({ ...route, routeId: r('tier-declared'), alias: r('tier-declared'), pricedFeatures: ['service_tier'] });
      await seed.route({ ...route, routeId: r('tier-priced'), alias: r('tier-priced'), pricedFeatures: ['service_tier'] });
      const aliases = [r('tier-none'), r('tier-declared'), r('tier-priced')];
      key = (await seed.workload({ id: r('tiers'), allowedAliases: aliases, perCandidateOutputCeiling: CEILING })).key;
      operator = await seed.operator(`tier-op-${run}`, ['operator']);
      approver = await seed.operator(`tier-ap-${run}`, ['approver']);
    });
    // base $1.25 / $10 (cache write $1.5625), a context tier above 2,000 input tokens at $2.50 / $15
    // (cache write $3.125) for the whole request, priority at $2.50 / $20 (cache write $3.125)
    const body = structuredPriceBody(`price-${r('tier-priced')}-v2`);
    const posted = await policyCall('POST', `/routes/${r('tier-priced')}/prices`, operator, {
      ...body,
      context_tiers: body.context_tiers.map((t) => ({ ...t, above_input_tokens: THRESHOLD })),
      service_tiers: { priority: body.service_tiers.priority },
    });
    // its rates are below the seeded flat ones: a lowered price waits for another approver
    expect(posted.status).toBe(202);
    expect((await policyCall('POST', `/change-requests/${posted.body.id}/approve`, approver, { reason: 'published' })).status).toBe(200);
  });

  let operator: string;
  let approver: string;
  const THRESHOLD = 2_000;
  const ceil = (tokens: bigint, perMTok: bigint) => (tokens * perMTok + 999_999n) / 1_000_000n;

  /** The action's input estimate and the reservation header of an answered request. */
  async function reservation(response: Response): Promise<{ input: bigint; reserved: bigint }> {
    const actionId = response.headers.get('x-gateway-action-id')!;
    const action = await withSeeder((_seed, db) => db.prisma.action.findUniqueOrThrow({ where: { id: actionId } }));
    return { input: BigInt(action.inputTokensEstimate), reserved: BigInt(response.headers.get('x-gateway-reserved-microusd')!) };
  }

  it('priority on a route whose price revision prices it is admitted, reserved at priority rates, and sent upstream as asked', async () => {
    // the admission catalog picks the approved revision up from policy.changed
    const { data, response } = await eventually(() => ask(r('tier-priced'), 'priority').withResponse(), { timeoutMs: 15_000 });
    expect(data.choices).toHaveLength(1);
    expect(data.service_tier).toBe('priority');
    const { input, reserved } = await reservation(response);
    expect(input).toBeLessThan(BigInt(THRESHOLD));
    // input side: the dearest priority rate is the cache write $3.125; $2.50 and $3.125 are both
    // fractional and under $1 apart, so settlement's per-category rounding can add 1 micro-USD
    expect(reserved).toBe(ceil(input, 3_125_000n) + 1n + BigInt(CEILING) * 20n);

    // settled at the tier the provider reported, from its usage: uncached input at $2.50, cached
    // at $0.25, output at $20, each rounded up on its own
    const actionId = response.headers.get('x-gateway-action-id')!;
    const row = await eventually(() =>
      withSeeder((_seed, db) => db.prisma.ledgerEntry.findFirst({ where: { actionId } })).then((r) => r ?? undefined),
    );
    expect(row.serviceTier).toBe('priority');
    const cached = BigInt(row.cachedInputTokens!);
    const uncached = BigInt(row.inputTokens!) - cached;
    const output = BigInt(row.outputTokensTotal!) - BigInt(row.reasoningTokens!);
    expect(row.costMicrousd).toBe(
      ceil(uncached, 2_500_000n) + ceil(cached, 250_000n) + ceil(output, 20_000_000n) + ceil(BigInt(row.reasoningTokens!), 20_000_000n),
    );
    expect(row.costMicrousd).toBeLessThanOrEqual(reserved);
  });

  it('a prompt whose estimate crosses the context threshold reserves the whole request at the higher tier', async () => {
    const long = 'lorem ipsum dolor sit amet '.repeat(300); // ~8 KB: an estimate above 2,000 tokens
    const { response } = await openai(key)
      .chat.completions.create({ model: r('tier-priced'), messages: [{ role: 'user', content: `${long} ${uid()}` }] })
      .withResponse();
    const { input, reserved } = await reservation(response);
    expect(input).toBeGreaterThan(BigInt(THRESHOLD));
    expect(reserved).toBe(ceil(input, 3_125_000n) + 1n + BigInt(CEILING) * 15n);

    const short = await ask(r('tier-priced')).withResponse();
    const below = await reservation(short.response);
    expect(below.reserved).toBe(ceil(below.input, 1_562_500n) + 1n + BigInt(CEILING) * 10n);
  });

  const ask = (model: string, service_tier?: 'priority' | 'flex' | 'default') =>
    openai(key).chat.completions.create({ model, messages: [{ role: 'user', content: `tiers ${uid()}` }], service_tier });

  async function refused(model: string, tier: 'priority' | 'flex'): Promise<APIError> {
    const before = await simLastSeq();
    const err = await ask(model, tier).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(APIError);
    expect(await simRequestsSince(before)).toHaveLength(0);
    return err as APIError;
  }

  it.each(['priority', 'flex'] as const)(
    '%s on a route whose contract declares service_tier but whose price revision has no such tier → 400 unpriced_feature, nothing upstream',
    async (tier) => {
      const err = await refused(r('tier-declared'), tier);
      expect(err.status).toBe(400);
      expect(err.code).toBe('unpriced_feature');
      expect(err.param).toBe('service_tier');
      expect(err.message).toContain(`service tier '${tier}'`);
      expect(err.message).toContain(`its price revision price-${r('tier-declared')}-v1 does not price`);
    },
  );

  it('priority on a route whose contract does not declare service_tier → 400 unpriced_feature naming the contract', async () => {
    const err = await refused(r('tier-none'), 'priority');
    expect(err.status).toBe(400);
    expect(err.code).toBe('unpriced_feature');
    expect(err.message).toContain(`route ${r('tier-none')}'s contract`);
  });

  it('the default tier is admitted and reserved at the base rates: ceil(input estimate × $2.50) + ceiling × $10', async () => {
    const { data, response } = await ask(r('tier-declared'), 'default').withResponse();
    expect(data.choices).toHaveLength(1);
    const actionId = response.headers.get('x-gateway-action-id')!;
    const action = await withSeeder((_seed, db) => db.prisma.action.findUniqueOrThrow({ where: { id: actionId } }));
    const input = BigInt(action.inputTokensEstimate);
    expect(response.headers.get('x-gateway-reserved-microusd')).toBe(
      ((input * 2_500_000n + 999_999n) / 1_000_000n + BigInt(CEILING) * 10n).toString(),
    );
  });
});
