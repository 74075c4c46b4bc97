import { randomUUID } from 'node:crypto';
import { ExperimentRepository, OutboxRepository } from '@gateway/db';
import { experimentDesign, hedgeSettings } from '@gateway/testing';
import { eventually, openai, stack, withSeeder } from './support';

/** A seeded hedging experiment on a provider-sim route (issue 11), for the suites that run one through the stack. */
export interface ExperimentRun {
  key: string;
  experimentId: string;
  workloadId: string;
  /** the route alias the clients call */
  model: string;
}

/**
 * A workload on the sim route `upstreamModel` (base name and directives) with a hedge policy
 * (hedge after `hedgeDelayMs`, no retries, premium 1 USD) and a running 50 % holdout experiment
 * with the given useful deadline; `plan` overrides the sample plan.
 */
export async function experimentOn(opts: {
  name: string;
  upstreamModel: string;
  hedgeDelayMs: number;
  usefulDeadlineMs: number;
  plan?: { min_actions_per_cohort: number; max_unresolved_share_bps: number };
}): Promise<ExperimentRun> {
  return withSeeder(async (seed, db) => {
    const model = `x-${opts.name}`;
    const workloadId = `x-wl-${opts.name}`;
    await seed.route({
      routeId: model,
      alias: model,
      upstreamModel: opts.upstreamModel,
      providerKind: 'openai-chat',
      upstreamBaseUrl: stack.providerSim,
    });
    const { key } = await seed.workload({ id: workloadId, allowedAliases: [model], maxInFlight: 256, budgetMicrousd: 10_000_000_000n });
    const revisionId = await seed.hedgePolicy(
      workloadId,
      hedgeSettings({
        delay: { kind: 'fixed', ms: opts.hedgeDelayMs },
        retry: { transient: [], max_retries: 0 },
        approved_premium_microusd: '1000000',
      }),
    );
    const experimentId = randomUUID();
    const started = await new ExperimentRepository(db, new OutboxRepository(db)).start(
      {
        ...experimentDesign(revisionId, {
          holdout_share_bps: 5_000,
          useful_deadline_ms: opts.usefulDeadlineMs,
          sample_plan: opts.plan ?? { min_actions_per_cohort: 100, max_unresolved_share_bps: 10_000 },
          pause: { holdout_p95_above_ms: 600_000, route_error_per_mille_above: 1_000, window_actions: 100 },
        }),
        id: experimentId,
        workloadId,
        requestedBy: 'ana',
        approvedBy: 'ben',
        reason: 'does the hedge buy on-time answers?',
      },
      new Date(),
    );
    if (!started.ok) throw new Error(`experiment not started: ${started.reason}`);
    return { key, experimentId, workloadId, model };
  });
}

/** `n` chat completions through the official `openai` SDK at `concurrency` clients, no SDK retries. */
export async function drive(run: ExperimentRun, n: number, concurrency: number, tag: string): Promise<void> {
  const client = openai(run.key);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      await client.chat.completions.create(
        { model: run.model, messages: [{ role: 'user', content: `question ${i} ${tag}` }] },
        { maxRetries: 0 },
      );
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Until every one of the experiment's `n` actions has its money decided (settled, or unresolved in a case). */
export async function moneyDecided(experimentId: string, n: number): Promise<void> {
  await eventually(
    () =>
      withSeeder(async (_seed, db) => {
        const rows = await db.prisma.$queryRaw<Array<{ n: number }>>`
          SELECT count(*)::int AS n FROM action WHERE experiment_id = ${experimentId} AND financial_state IN ('settled', 'unresolved')`;
        return rows[0].n === n ? true : undefined;
      }),
    { what: `${n} actions settled or unresolved`, timeoutMs: 120_000 },
  );
}

/** The policy API's report of the experiment (JSON). */
export async function apiReport(experimentId: string, token: string): Promise<Record<string, any>> {
  const res = await fetch(`${stack.policy}/experiments/${experimentId}/report`, { headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`GET /experiments/${experimentId}/report → ${res.status}`);
  return (await res.json()) as Record<string, any>;
}
