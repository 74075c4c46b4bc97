import { Database } from '@gateway/db';
import { Seeder } from './seed';

/**
 * Routes and workloads for `npm run chaos`: scripted provider-sim routes (latency spread, one that
 * withholds usage, one that cuts its streams) and two workloads, one with a budget tight enough to
 * be exhausted under load. Prints one JSON line with the keys.
 */
async function seedChaos(databaseUrl: string, sim: string): Promise<Record<string, string>> {
  const db = new Database(databaseUrl);
  try {
    const seed = new Seeder(db);
    const aliases = ['chaos-openai', 'chaos-gemini', 'chaos-no-usage', 'chaos-cut-stream'];
    await seed.route({
      routeId: 'chaos-openai',
      alias: 'chaos-openai',
      providerKind: 'openai-chat',
      upstreamBaseUrl: sim,
      upstreamModel: 'sim-gpt;latency=20-400',
    });
    await seed.route({
      routeId: 'chaos-gemini',
      alias: 'chaos-gemini',
      providerKind: 'gemini-generate',
      upstreamBaseUrl: sim,
      upstreamModel: 'gemini-sim;latency=20-400',
    });
    await seed.route({
      routeId: 'chaos-no-usage',
      alias: 'chaos-no-usage',
      providerKind: 'openai-chat',
      upstreamBaseUrl: sim,
      upstreamModel: 'sim-gpt;no-usage',
    });
    await seed.route({
      routeId: 'chaos-cut-stream',
      alias: 'chaos-cut-stream',
      providerKind: 'openai-chat',
      upstreamBaseUrl: sim,
      upstreamModel: 'sim-gpt;cut-stream;latency=20-100',
    });
    const common = { allowedAliases: aliases, deadlineMs: 4000, maxInFlight: 256, perCandidateOutputCeiling: 256 };
    const load = await seed.workload({ id: 'chaos-load', budgetMicrousd: 50_000_000n, ...common });
    const tight = await seed.workload({ id: 'chaos-tight', budgetMicrousd: 150_000n, ...common });
    return { loadKey: load.key, tightKey: tight.key };
  } finally {
    await db.close();
  }
}

seedChaos(process.env.DATABASE_URL ?? '', process.env.PROVIDER_SIM_URL ?? '')
  .then((out) => process.stdout.write(JSON.stringify(out) + '\n'))
  .catch((err) => {
    console.error(err);
    process.exit(1);
  });
