import { randomUUID } from 'node:crypto';
import { ExperimentRepository, OutboxRepository } from '@gateway/db';
import { experimentDesign, hedgeSettings } from '@gateway/testing';
import { reconciliationCall } from './policy-call';
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
          SELECT count(*)::int AS n FROM action a JOIN reservation r ON r.action_id = a.id
          WHERE a.experiment_id = ${experimentId} AND r.status IN ('settled', 'unresolved')`;
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

/** The experiment's attempts, how many have their money undecided, and how many have no ledger row yet. */
export const ledgerCoverage = (experimentId: string) =>
  withSeeder(async (_seed, db) => {
    const rows = await db.prisma.$queryRaw<Array<{ attempts: number; undecided: number; without_row: number }>>`
      SELECT count(*)::int AS attempts,
             count(*) FILTER (WHERE t.financial_state IS NULL)::int AS undecided,
             count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM ledger_entry l WHERE l.attempt_id = t.id))::int AS without_row
      FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.experiment_id = ${experimentId}`;
    return rows[0];
  });

/**
 * Reconciles the experiment's day the way an operator closes one, so every attempt gets its ledger
 * row (and its settled event): once every attempt's money is decided, the provider-sim's export of
 * today for the sim model `simModel` is imported (calls of at most 2,000 lines, as the CLI sends them: the body limit), and each case of
 * the workload the export has no line for is released at 0 (the provider billed nothing).
 */
export async function closeTheDay(opts: {
  experimentId: string;
  workloadId: string;
  simModel: string;
  operator: string;
}): Promise<{ attempts: number; lines: number; released: string[] }> {
  const ops = (method: string, p: string, body?: unknown) => reconciliationCall(method, p, opts.operator, body);
  // an attempt still settling would be neither resolved by its line nor have a case to release
  await eventually(async () => ((await ledgerCoverage(opts.experimentId)).undecided === 0 ? true : undefined), {
    what: 'every attempt of the experiment settled or unresolved',
    timeoutMs: 60_000,
  });
  const res = await fetch(`${stack.providerSim}/_sim/export?day=${new Date().toISOString().slice(0, 10)}&format=jsonl`);
  if (res.status !== 200) throw new Error(`GET /_sim/export → ${res.status}`);
  const lines = (await res.text()).split('\n').filter((l) => l && (JSON.parse(l) as { model?: string }).model === opts.simModel);
  for (let i = 0; i < lines.length; i += 2_000) {
    const imported = await ops('POST', '/usage-exports', { format: 'jsonl', content: lines.slice(i, i + 2_000).join('\n') + '\n' });
    if (imported.status !== 200) throw new Error(`POST /usage-exports → ${imported.status}: ${imported.text}`);
  }
  const open = await ops('GET', `/cases?status=open&workload_id=${encodeURIComponent(opts.workloadId)}&limit=1000`);
  if (open.status !== 200) throw new Error(`GET /cases → ${open.status}`);
  const cases = open.body.cases as Array<{ case_id: string; reason: string }>;
  for (const c of cases) {
    const released = await ops('POST', `/cases/${c.case_id}/release`, {
      reason: "the provider's export has no line for it: nothing billed",
      amount_microusd: '0',
    });
    if (released.status !== 200) throw new Error(`POST /cases/${c.case_id}/release → ${released.status}`);
  }
  const coverage = await eventually(
    async () => {
      const c = await ledgerCoverage(opts.experimentId);
      return c.without_row === 0 ? c : undefined;
    },
    { what: 'every attempt of the experiment with its ledger row', timeoutMs: 60_000 },
  );
  return { attempts: coverage.attempts, lines: lines.length, released: cases.map((c) => c.reason) };
}

/** The finance consumer's report of the experiment once it holds `attempts` settled attempts. */
export function financeReport(consumerUrl: string, experimentId: string, attempts: number): Promise<Record<string, any>> {
  return eventually(
    async () => {
      const res = await fetch(`${consumerUrl}/experiments/${experimentId}/report`);
      if (res.status !== 200) throw new Error(`finance GET /experiments/{id}/report → ${res.status}: ${await res.text()}`);
      const body = (await res.json()) as Record<string, any>;
      return body.topic_coverage.settled_attempts === attempts ? body : undefined;
    },
    { what: `the finance consumer to hold ${attempts} settled attempts`, timeoutMs: 60_000 },
  );
}
