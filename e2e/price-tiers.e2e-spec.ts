import { APIError } from 'openai';
import { openai, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * Issue 14 through the official OpenAI SDK: a `service_tier` is admitted only when the route
 * contract declares it and the price revision in force prices that tier, and the reservation is at
 * the rates the request can reach.
 *
 * On h/wire price revisions in Postgres are still four flat rates (their structure, its storage and
 * policy API land with h/store), so every revision seeded here prices no tier: the admitted-at-
 * priority and long-context cases run in apps/admission/test/admission-tiers.int-spec.ts over a
 * structured revision. After the merge, seed a structured revision through the policy API here and
 * add them (priority admitted and reserved at priority rates; a prompt above a context threshold
 * reserved at the higher tier).
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
      key = (
        await seed.workload({ id: r('tiers'), allowedAliases: [r('tier-none'), r('tier-declared')], perCandidateOutputCeiling: CEILING })
      ).key;
    });
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
