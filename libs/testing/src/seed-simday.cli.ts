import { Database } from '@gateway/db';
import { hedgeSettings } from './policy-bodies';
import { Seeder } from './seed';

/**
 * Routes, workloads, hedge policies and operator tokens for `npm run simulate-day`
 * (scripts/simulate-day.mjs): provider-sim routes for each fault of the day (a heavy-tailed route
 * with a hedge policy, withheld usage, cut streams, extra candidates, a flaky route that retries, a
 * route that is down and falls back), three workloads, one with a budget small enough to run out.
 * Prints one JSON line with the keys and tokens.
 */
async function seedSimulatedDay(databaseUrl: string, sim: string): Promise<Record<string, string | string[]>> {
  const db = new Database(databaseUrl);
  try {
    const seed = new Seeder(db);
    const openai = (routeId: string, model: string) =>
      seed.route({ routeId, alias: routeId, providerKind: 'openai-chat', upstreamBaseUrl: sim, upstreamModel: model });
    await openai('day-chat', 'sim-gpt;latency=10-80');
    await openai('day-tail', 'sim-gpt;latency=20-80;latency-tail=200:900-1600');
    await openai('day-no-usage', 'sim-gpt;no-usage;latency=10-50');
    await openai('day-cut', 'sim-gpt;cut-stream;latency=10-50');
    await openai('day-extra', 'sim-gpt;extra=1;latency=10-50');
    await openai('day-flaky', 'sim-gpt;fail-first=1;latency=10-50');
    await openai('day-down', 'sim-gpt;status=503');
    await openai('day-backup', 'sim-gpt;latency=10-50');
    await seed.route({
      routeId: 'day-gemini',
      alias: 'day-gemini',
      providerKind: 'gemini-generate',
      upstreamBaseUrl: sim,
      upstreamModel: 'gemini-sim;latency=10-80',
    });
    // a deadline that outlives dispatch's restart after the kill on a loaded two-core machine
    const common = { deadlineMs: 20_000, maxInFlight: 512, perCandidateOutputCeiling: 256 };
    const apps = await seed.workload({
      id: 'day-apps',
      allowedAliases: ['day-chat', 'day-tail', 'day-no-usage', 'day-cut', 'day-extra', 'day-flaky', 'day-down'],
      fallbackChain: ['day-backup'],
      budgetMicrousd: 100_000_000n,
      ...common,
    });
    const noHedge = (retry: Record<string, unknown>) => hedgeSettings({ max_hedges: 0, retry });
    // the heavy tail: a hedge 300 ms after a primary that has not answered
    await seed.hedgePolicy('day-apps', hedgeSettings({ delay: { kind: 'fixed', ms: 300 } }), 'day-tail');
    await seed.hedgePolicy('day-apps', noHedge({ transient: ['server_error'], max_retries: 1 }), 'day-flaky');
    await seed.hedgePolicy('day-apps', noHedge({ transient: ['server_error'], max_retries: 0 }), 'day-down');
    const gemini = await seed.workload({ id: 'day-gemini', allowedAliases: ['day-gemini'], budgetMicrousd: 100_000_000n, ...common });
    const tight = await seed.workload({ id: 'day-tight', allowedAliases: ['day-chat'], budgetMicrousd: 20_000n, ...common });
    return {
      appsKey: apps.key,
      geminiKey: gemini.key,
      tightKey: tight.key,
      operatorToken: await seed.operator('simday-operator', ['operator', 'finance']),
      // every route of the day reaches the one simulated provider, whose export covers them all
      routes: ['day-chat', 'day-tail', 'day-no-usage', 'day-cut', 'day-extra', 'day-flaky', 'day-down', 'day-backup', 'day-gemini'],
    };
  } finally {
    await db.close();
  }
}

seedSimulatedDay(process.env.DATABASE_URL ?? '', process.env.PROVIDER_SIM_URL ?? '')
  .then((out) => process.stdout.write(JSON.stringify(out) + '\n'))
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });
