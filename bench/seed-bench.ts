// Seeds the benchmark's route and workloads into DATABASE_URL and prints one JSON line:
//   { "alias": "...", "keys": { "<workloadId>": "<workload key>", ... } }
// Run by scripts/bench.mjs through runTs (node -r @swc-node/register bench/seed-bench.ts).
//
// Environment:
//   DATABASE_URL          the (freshly migrated) bench database
//   PROVIDER_SIM_URL      base URL the route dispatches to
//   BENCH_UPSTREAM_MODEL  upstream model, with provider-sim directives (e.g. "sim-gpt;latency=20")
//   BENCH_ALIAS           model alias clients send (default "bench")
//   BENCH_WORKLOADS       comma-separated workload ids, one key each
//   BENCH_TAIL_UPSTREAM_MODEL  when set, the hedged phase's heavy-tailed route `bench-tail` and its
//                         two workloads, `bench-tail-plain` (no hedge policy) and `bench-tail-hedged`
//   BENCH_HEDGE_DELAY_MS  the hedged workload's fixed hedge delay (default 150)
//   BENCH_STREAM_UPSTREAM_MODEL  when set, the abandoned-streams mode's route `bench-stream` and its
//                         one workload, `bench-stream`
import { Database } from '@gateway/db';
import { hedgeSettings, Seeder } from '@gateway/testing';
import { required } from './bench-env';

const TAIL_ALIAS = 'bench-tail';
const TAIL_WORKLOADS = { plain: 'bench-tail-plain', hedged: 'bench-tail-hedged' } as const;
/** the abandoned-streams mode's route and its one workload */
const STREAM_ALIAS = 'bench-stream';

async function main(): Promise<void> {
  const url = required('DATABASE_URL');
  const simUrl = required('PROVIDER_SIM_URL');
  const upstreamModel = process.env.BENCH_UPSTREAM_MODEL || 'sim-gpt;latency=20';
  const alias = process.env.BENCH_ALIAS || 'bench';
  const workloads = (process.env.BENCH_WORKLOADS || 'bench')
    .split(',')
    .map((w) => w.trim())
    .filter(Boolean);

  const db = new Database(url);
  try {
    const seed = new Seeder(db);
    const keys: Record<string, string> = {};
    /** A route on the simulator, alias = route id. */
    const route = (id: string, model: string) =>
      seed.route({ routeId: id, alias: id, providerKind: 'openai-chat', upstreamBaseUrl: simUrl, upstreamModel: model });
    // Limits far above what the bench can reach: admission must never deny for budget or
    // concurrency, so every gateway response measures the full admit-dispatch-reply path.
    const workload = async (id: string, routeId: string) => {
      const { key } = await seed.workload({
        id,
        team: 'bench',
        allowedAliases: [routeId],
        maxInFlight: 10_000,
        budgetMicrousd: 10n ** 12n,
      });
      keys[id] = key;
    };
    await route(alias, upstreamModel);
    for (const id of workloads) await workload(id, alias);
    const tailModel = process.env.BENCH_TAIL_UPSTREAM_MODEL;
    if (tailModel) {
      await route(TAIL_ALIAS, tailModel);
      for (const id of Object.values(TAIL_WORKLOADS)) await workload(id, TAIL_ALIAS);
      // one hedge after a fixed delay; no retries, so the two workloads differ by the hedge alone
      const delayMs = Number(process.env.BENCH_HEDGE_DELAY_MS || 150);
      await seed.hedgePolicy(
        TAIL_WORKLOADS.hedged,
        hedgeSettings({
          delay: { kind: 'fixed', ms: delayMs },
          retry: { transient: [], max_retries: 0 },
          allowance: { max_attempts: 2, max_extra_spend_microusd: '1000000' },
        }),
      );
    }
    const streamModel = process.env.BENCH_STREAM_UPSTREAM_MODEL;
    if (streamModel) {
      await route(STREAM_ALIAS, streamModel);
      await workload(STREAM_ALIAS, STREAM_ALIAS);
    }
    process.stdout.write(JSON.stringify({ alias, upstreamModel, keys }) + '\n');
  } finally {
    await db.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
