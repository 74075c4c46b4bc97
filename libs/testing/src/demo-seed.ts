import { randomUUID } from 'node:crypto';
import {
  CatalogRepository,
  Database,
  DEMO_DATABASE_KEY,
  ExceptionRepository,
  GatewayMetaRepository,
  OutboxRepository,
  projectExceptionOver,
} from '@gateway/db';
import { RealRoute } from './real-routes';
import { DEFAULT_PRICES, Prices, Seeder } from './seed';

/**
 * Demo data for `npm start`: prints a JSON line with the keys and tokens it issued. It writes only
 * to a database marked as a demo database (gateway_meta `demo_database`): `markDemoDatabase` marks
 * it first, which `npm start` does for the database it created itself, never for a DATABASE_URL
 * someone passed in (set GATEWAY_DEMO_DATABASE=1 to mark such a database deliberately).
 */
export async function seedDemo(
  databaseUrl: string,
  providerSimUrl: string,
  demoKey?: string,
  opts: { markDemoDatabase?: boolean; realRoutes?: readonly RealRoute[] } = {},
): Promise<Record<string, string>> {
  const db = new Database(databaseUrl);
  try {
    const meta = new GatewayMetaRepository(db);
    if (opts.markDemoDatabase) await meta.set(DEMO_DATABASE_KEY, 'true', new Date());
    if ((await meta.get(DEMO_DATABASE_KEY)) !== 'true') {
      throw new Error(
        'refusing to seed demo data: this database is not marked as a demo database (gateway_meta demo_database); ' +
          'set GATEWAY_DEMO_DATABASE=1 if it really is one',
      );
    }
    const seed = new Seeder(db);
    await seed.route(
      {
        routeId: 'approved-standard',
        alias: 'approved-standard',
        providerKind: 'openai-chat',
        upstreamBaseUrl: providerSimUrl,
        upstreamModel: 'sim-gpt',
      },
      { price: DEMO_OPENAI_PRICE },
    );
    await seed.route(
      {
        routeId: 'gemini-flash',
        alias: 'gemini-flash',
        providerKind: 'gemini-generate',
        upstreamBaseUrl: providerSimUrl,
        upstreamModel: 'gemini-sim',
      },
      { price: DEMO_GEMINI_PRICE },
    );
    const real = opts.realRoutes ?? [];
    for (const r of real) {
      // Unverified, and only once: a later start keeps the operator's verification (and any
      // contract change made since) instead of appending a fresh unverified version.
      if (await seed.policy.routeById(r.contract.routeId)) continue;
      await seed.route({ ...r.contract }, { verified: false, price: r.price });
    }
    const realAliases = real.map((r) => r.contract.alias);
    const support = await seed.workload({ id: 'support-draft', allowedAliases: ['approved-standard', 'gemini-flash', ...realAliases] });
    const supportKey = demoKey ? await seed.key('support-draft', demoKey).catch(() => demoKey) : support.key;
    const evalRerank = await seed.workload({
      id: 'eval-rerank',
      allowedAliases: ['approved-standard', 'gemini-flash'],
      perCandidateOutputCeiling: 256,
    });
    const now = new Date();
    if ((await new CatalogRepository(db).activeExceptions('eval-rerank', now)).length === 0) {
      // Requested by one operator and approved by another, through the same records as any exception.
      const exceptions = new ExceptionRepository(db, new OutboxRepository(db));
      // Its evidence and projection as the policy API records them: 1,000 requests of ~500 input
      // tokens, 2 × 256 output each, at the dearer allowed route's price (6.37 USD, within 10 USD).
      const volume = { expectedRequests: 1_000, typicalInputTokens: 500, maxCandidates: 2, perCandidateOutputCeiling: 256 };
      const scope = { routeId: null, allowedAliases: ['approved-standard', 'gemini-flash'] };
      const requested = await exceptions.create(
        {
          id: randomUUID(),
          workloadId: 'eval-rerank',
          routeId: null,
          owner: 'demo-owner',
          maxCandidates: 2,
          perCandidateOutputCeiling: 256,
          budgetMicrousd: 10_000_000n,
          allowsStreaming: false,
          allowsDeterministicSampling: false,
          expiresAt: new Date(now.getTime() + 7 * 24 * 3600 * 1000),
          justification: 'demo: two-candidate reranking',
          requestedBy: 'demo-operator',
          outcome: { metric: 'reranked answer acceptance rate', baseline: 0.62, target: 0.7 },
          expectedRequests: volume.expectedRequests,
          typicalInputTokens: volume.typicalInputTokens,
          requestProjection: await projectExceptionOver(seed.policy, scope, volume, now),
        },
        now,
      );
      await exceptions.transition({
        id: requested.id,
        from: 'requested',
        to: 'active',
        event: 'approve',
        actor: 'demo-approver',
        reason: 'demo approval',
        now,
        expiry: 'unexpired',
        approval: { projection: await projectExceptionOver(seed.policy, scope, volume, now), overrideReason: null },
      });
    }
    // Route verification probes are reserved against the operations budget: $5 for the demo.
    await seed.fundOperations(5_000_000n);
    const operatorToken = await seed.operator('demo-operator', ['operator', 'finance']);
    const approverToken = await seed.operator('demo-approver', ['approver']);
    return { supportDraftKey: supportKey, evalRerankKey: evalRerank.key, operatorToken, approverToken };
  } finally {
    await db.close();
  }
}

/** The default rates × `times` / `per`. */
const scaled = (times: bigint, per = 1n) => ({
  inputPerMTokMicrousd: (DEFAULT_PRICES.inputPerMTokMicrousd * times) / per,
  cachedInputPerMTokMicrousd: (DEFAULT_PRICES.cachedInputPerMTokMicrousd * times) / per,
  outputPerMTokMicrousd: (DEFAULT_PRICES.outputPerMTokMicrousd * times) / per,
  reasoningPerMTokMicrousd: (DEFAULT_PRICES.reasoningPerMTokMicrousd * times) / per,
});

/**
 * The demo OpenAI route's price list as OpenAI publishes one: priority at twice and flex at half
 * the standard rates, and web search at $10 per 1,000 calls (three reserved per request). The
 * route contract does not admit service_tier or web_search, so requests asking for them are still
 * refused; the structure shows how a revision carries them.
 */
export const DEMO_OPENAI_PRICE: Prices = {
  ...DEFAULT_PRICES,
  serviceTiers: { priority: { rates: scaled(2n) }, flex: { rates: scaled(1n, 2n) } },
  perCallFees: [{ feature: 'web_search', feeMicrousd: 10_000n, reservedCallsPerRequest: 3 }],
};

/** The demo Gemini route: above 200,000 input tokens the whole request costs more (Gemini 2.5 Pro style). */
export const DEMO_GEMINI_PRICE: Prices = {
  ...DEFAULT_PRICES,
  contextTierRule: 'whole_request',
  contextTiers: [{ aboveInputTokens: 200_000, rates: scaled(2n) }],
};
