/**
 * Admission reserves at the worst reachable tier (issue 14): the use case over the real catalog,
 * admission repository and Postgres, with both routes' revisions (one flat, one structured) stored
 * in Postgres as the policy service stores them.
 */
import { randomUUID } from 'node:crypto';
import { ActionWithdrawal, AdmissionRepository, CatalogRepository, Database, OutboxRepository } from '@gateway/db';
import { ContentCipher, KafkaBus, ReplyRouter } from '@gateway/messaging';
import { createLogger, Metrics, randomIds, ServiceConfig, systemClock } from '@gateway/service-kit';
import { Seeder, STRUCTURED_CONTEXT_THRESHOLD, structuredPrice } from '@gateway/testing';
import { AdmissionMetrics } from '../src/admission.metrics';
import { CatalogCache } from '../src/catalog-cache';
import { fromOpenAiChat } from '../src/usecases/admit-request/admit-request.command';
import { AdmitRequest } from '../src/usecases/admit-request/admit-request.usecase';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const CONFIG: ServiceConfig = {
  serviceName: 'admission',
  instanceId: 'adm-tiers',
  databaseUrl: url,
  kafkaBrokers: [],
  logLevel: 'silent',
  host: '127.0.0.1',
};
const CEILING = 100;

describe('admission at the worst reachable tier, on Postgres', () => {
  const db = new Database(url, { poolMax: 5 });
  const catalog = new CatalogRepository(db);
  const run = randomUUID().slice(0, 8);
  const flat = `tiers-flat-${run}`;
  const tiered = `tiers-structured-${run}`;
  let key: string;
  const admit = new AdmitRequest(
    new CatalogCache(catalog, systemClock),
    catalog,
    new AdmissionRepository(db, new OutboxRepository(db)),
    new ActionWithdrawal(db, createLogger('admission', 'silent')),
    // execute() never publishes; dispatch() is not called here
    new KafkaBus({ brokers: ['127.0.0.1:1'], clientId: 'admission-tiers-int', logger: quiet }),
    new ReplyRouter(),
    new ContentCipher(Buffer.alloc(32, 7)),
    new AdmissionMetrics(new Metrics('admission-tiers-int')),
    CONFIG,
    createLogger('admission', 'silent'),
    systemClock,
    randomIds,
  );

  beforeAll(async () => {
    const seed = new Seeder(db);
    for (const routeId of [flat, tiered]) {
      const { id: _id, ...structured } = structuredPrice(`price-${routeId}-v1`);
      await seed.route(
        {
          routeId,
          alias: routeId,
          providerKind: 'openai-chat',
          upstreamBaseUrl: 'http://upstream.invalid',
          upstreamModel: 'm',
          pricedFeatures: ['service_tier', 'web_search'],
        },
        routeId === tiered ? { price: structured } : {},
      );
    }
    key = (await seed.workload({ id: `wl-tiers-${run}`, allowedAliases: [flat, tiered], perCandidateOutputCeiling: CEILING })).key;
  });
  afterAll(() => db.close());

  /** A chat request of about `promptTokens` estimated input tokens (ASCII, 3 bytes a token). */
  const chat = (model: string, promptTokens: number, extra: Record<string, unknown> = {}) =>
    fromOpenAiChat({ model, messages: [{ role: 'user', content: 'x'.repeat(3 * promptTokens) }], ...extra }, key, null);

  async function reserved(cmd: ReturnType<typeof chat>) {
    const admitted = await admit.execute(cmd);
    const action = await db.prisma.action.findUniqueOrThrow({ where: { id: admitted.actionId } });
    const reservation = await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: admitted.actionId } });
    expect(admitted.headers['x-gateway-reserved-microusd']).toBe(reservation.reservedMicrousd.toString());
    return { input: BigInt(action.inputTokensEstimate), micro: reservation.reservedMicrousd, priceRevisionId: reservation.priceRevisionId };
  }

  /** ceil(tokens × perMTok / 1e6) */
  const at = (tokens: bigint, perMTok: bigint) => (tokens * perMTok + 999_999n) / 1_000_000n;

  it('a prompt whose estimate crosses the context threshold reserves every token at the higher tier', async () => {
    const short = await reserved(chat(tiered, 100));
    expect(short.input).toBeLessThanOrEqual(BigInt(STRUCTURED_CONTEXT_THRESHOLD));
    // any input token may be a cache write ($3.125, the dearest input rate); output at $10; + 1 is
    // the rounding allowance (plain input at $2.50 rounds on its own within $1/MTok of that rate)
    expect(short.micro).toBe(at(short.input, 3_125_000n) + 1n + BigInt(CEILING) * 10n);
    expect(short.priceRevisionId).toBe(`price-${tiered}-v1`);

    const long = await reserved(chat(tiered, STRUCTURED_CONTEXT_THRESHOLD + 50));
    expect(long.input).toBeGreaterThan(BigInt(STRUCTURED_CONTEXT_THRESHOLD));
    // above the threshold the whole request costs double: input up to $6.25, output $20
    expect(long.micro).toBe(at(long.input, 6_250_000n) + BigInt(CEILING) * 20n);
  });

  it('priority is refused on a route whose revision has no priority tier, and reserved at priority rates where it has one', async () => {
    const before = await db.prisma.action.count({ where: { routeId: flat } });
    await expect(admit.execute(chat(flat, 100, { service_tier: 'priority' }))).rejects.toMatchObject({
      code: 'unpriced_feature',
      param: 'service_tier',
      message: expect.stringContaining(`its price revision price-${flat}-v1 does not price`),
    });
    expect(await db.prisma.action.count({ where: { routeId: flat } })).toBe(before);

    const priority = await reserved(chat(tiered, 100, { service_tier: 'priority' }));
    // priority doubles every base rate: input up to $6.25, output $20
    expect(priority.micro).toBe(at(priority.input, 6_250_000n) + BigInt(CEILING) * 20n);
    const both = await reserved(chat(tiered, STRUCTURED_CONTEXT_THRESHOLD + 50, { service_tier: 'priority' }));
    // priority above the threshold: four times the base
    expect(both.micro).toBe(at(both.input, 12_500_000n) + BigInt(CEILING) * 40n);

    await expect(admit.execute(chat(tiered, 100, { service_tier: 'flex' }))).rejects.toMatchObject({ code: 'unpriced_feature' });
  });

  it('a priced tool adds its fee for the reserved calls; an unpriced one is refused', async () => {
    const search = await reserved(chat(tiered, 100, { web_search_options: {} }));
    expect(search.micro).toBe(at(search.input, 3_125_000n) + 1n + BigInt(CEILING) * 10n + 2n * 10_000n);
    await expect(admit.execute(chat(flat, 100, { web_search_options: {} }))).rejects.toMatchObject({
      code: 'unpriced_feature',
      param: 'web_search_options',
    });
  });
});
