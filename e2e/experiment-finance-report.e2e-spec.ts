import { apiReport, drive, experimentOn, moneyDecided } from './experiment-run';
import { Consumer, startConsumer } from './finance-consumer-process';
import { eventually, stack, uid, withSeeder } from './support';

/**
 * Issue 11: "the report computed from gateway.usage.settled.v1 alone (a finance consumer) equals
 * the API's". A seeded experiment on a heavy-tailed sim route through the stack (official `openai`
 * SDK), then reconciled the way an operator closes a day: the provider's usage export imported
 * (every aborted loser the provider billed gets its ledger row), and each case the export has no
 * line for released at 0 (the provider billed nothing). Then every attempt has a ledger row and one
 * settled event, and the finance consumer's report (examples/finance-consumer, its rows rebuilt
 * from the topic, the design read from GET /experiments/{id}) must equal the policy API's: cohort
 * rows, intervals, verdict. Before that the API's verdict is pending (losers' exposure unresolved)
 * and the topic cannot show that exposure: the reports are equal only once everything is settled.
 *
 * Size: E2E_FINANCE_REPORT_ACTIONS actions (default 400, about 30 s at 48 clients); the sample plan
 * asks 100 per cohort and tolerates no unresolved exposure (the default).
 */
const ACTIONS = Number(process.env.E2E_FINANCE_REPORT_ACTIONS ?? 400);
const TAIL = 'latency=10-50;latency-tail=300:4000-5000';

describe('the experiment report rebuilt from gateway.usage.settled.v1 alone (issue 11)', () => {
  const run = uid();
  const reconciliation = process.env.E2E_RECONCILIATION_URL!;
  const base = `sim-xfin-${run}`;
  let operator: string;
  let finance: string;
  let consumer: Consumer | undefined;
  let consumerOpts: Parameters<typeof startConsumer>[0];

  jest.setTimeout(240_000);

  beforeAll(async () => {
    [operator, finance] = await withSeeder(async (seed) => [
      await seed.operator(`xfin-ops-${run}`, ['operator']),
      await seed.operator(`xfin-fin-${run}`, ['finance']),
    ]);
    consumerOpts = {
      port: Number(new URL(stack.admission).port) + 23,
      group: `finance-xfin-${run}`,
      schema: `finance_xfin_${run.replace(/[^a-z0-9]/g, '')}`,
      env: { POLICY_URL: stack.policy, FINANCE_POLICY_TOKEN: finance },
    };
    consumer = await startConsumer(consumerOpts);
  });

  afterAll(async () => {
    await consumer?.stop();
  });

  const ops = (path: string, init: RequestInit = {}) =>
    fetch(`${reconciliation}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${operator}`, 'content-type': 'application/json', ...init.headers },
    });

  /** The sim's export of today for this suite's model, imported in calls of at most 5,000 lines. */
  async function importExport(): Promise<number> {
    const res = await fetch(`${stack.providerSim}/_sim/export?day=${new Date().toISOString().slice(0, 10)}&format=jsonl`);
    expect(res.status).toBe(200);
    const lines = (await res.text()).split('\n').filter((l) => l && (JSON.parse(l) as { model?: string }).model === base);
    for (let i = 0; i < lines.length; i += 5_000) {
      const imported = await ops('/usage-exports', {
        method: 'POST',
        body: JSON.stringify({ format: 'jsonl', content: lines.slice(i, i + 5_000).join('\n') + '\n' }),
      });
      expect(imported.status).toBe(200);
    }
    return lines.length;
  }

  /** Every case of the workload still open after the import: the export has no line for it, nothing was billed. */
  async function releaseTheRest(workloadId: string): Promise<string[]> {
    const res = await ops(`/cases?status=open&workload_id=${encodeURIComponent(workloadId)}&limit=1000`);
    expect(res.status).toBe(200);
    const { cases } = (await res.json()) as { cases: Array<{ case_id: string; reason: string }> };
    for (const c of cases) {
      const released = await ops(`/cases/${c.case_id}/release`, {
        method: 'POST',
        body: JSON.stringify({ reason: "the provider's export has no line for it: nothing billed", amount_microusd: '0' }),
      });
      expect(released.status).toBe(200);
    }
    return cases.map((c) => c.reason);
  }

  /** The experiment's attempts, how many have their money undecided, and how many have no ledger row yet. */
  const ledgerCoverage = (experimentId: string) =>
    withSeeder(async (_seed, db) => {
      const rows = await db.prisma.$queryRaw<Array<{ attempts: number; undecided: number; without_row: number }>>`
        SELECT count(*)::int AS attempts,
               count(*) FILTER (WHERE t.financial_state IS NULL)::int AS undecided,
               count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM ledger_entry l WHERE l.attempt_id = t.id))::int AS without_row
        FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.experiment_id = ${experimentId}`;
      return rows[0];
    });

  it(`after reconciliation the finance consumer's report equals the API's (${ACTIONS} actions)`, async () => {
    const x = await experimentOn({
      name: `fin-${run}`,
      upstreamModel: `${base};${TAIL}`,
      hedgeDelayMs: 200,
      usefulDeadlineMs: 2_500,
      plan: { min_actions_per_cohort: 100, max_unresolved_share_bps: 0 },
    });
    await drive(x, ACTIONS, 48, run);
    await moneyDecided(x.experimentId, ACTIONS);

    // aborted losers hold exposure the topic does not carry: the API waits (pending)
    const before = await apiReport(x.experimentId, operator);
    expect(before.unresolved_share_bps).toBeGreaterThan(0);
    expect(before.verdict).toBe('pending');

    // every attempt's money decided (settled, or unresolved in its case) before the export is read:
    // an attempt still settling would be neither resolved by its line nor have a case to release
    await eventually(async () => ((await ledgerCoverage(x.experimentId)).undecided === 0 ? true : undefined), {
      what: 'every attempt of the experiment settled or unresolved',
      timeoutMs: 60_000,
    });
    const lines = await importExport();
    const released = await releaseTheRest(x.workloadId);
    const coverage = await eventually(
      async () => {
        const c = await ledgerCoverage(x.experimentId);
        return c.without_row === 0 ? c : undefined;
      },
      { what: 'every attempt of the experiment with its ledger row', timeoutMs: 60_000 },
    );
    console.info(
      `${coverage.attempts} attempts; ${lines} export lines imported, ${released.length} cases released at 0 (${released.join(', ')})`,
    );

    const api = await apiReport(x.experimentId, operator);
    expect(api.cohorts.hedged.unresolved_exposure_microusd).toBe('0');
    expect(api.cohorts.holdout.unresolved_exposure_microusd).toBe('0');
    expect(api.cohorts.hedged.eligible_actions + api.cohorts.holdout.eligible_actions).toBe(ACTIONS);
    expect(api.verdict).not.toBe('pending');

    // the consumer has read every settled event of the experiment once it counts every attempt
    const got = await eventually(
      async () => {
        const res = await fetch(`${consumer!.url}/experiments/${x.experimentId}/report`);
        if (res.status !== 200) throw new Error(`finance GET /experiments/{id}/report → ${res.status}: ${await res.text()}`);
        const body = (await res.json()) as Record<string, any>;
        return body.topic_coverage.settled_attempts === coverage.attempts ? body : undefined;
      },
      { what: `the finance consumer to hold ${coverage.attempts} settled attempts`, timeoutMs: 60_000 },
    );
    const { topic_coverage, ...report } = got;
    expect(topic_coverage).toEqual({ actions: ACTIONS, settled_attempts: coverage.attempts, attempts_not_yet_settled: 0 });
    expect(report).toEqual(api);

    // a replay of the whole topic under a new consumer group into the same tables changes nothing
    await consumer!.stop();
    consumer = await startConsumer({ ...consumerOpts, port: consumerOpts.port + 1, group: `${consumerOpts.group}-replay` });
    const attemptIds = await withSeeder(
      (_seed, db) =>
        db.prisma.$queryRaw<Array<{ id: string }>>`
        SELECT t.id FROM attempt t JOIN action a ON a.id = t.action_id WHERE a.experiment_id = ${x.experimentId}`,
    );
    const replayed = consumer;
    await eventually(
      async () => (attemptIds.every(({ id }) => replayed.logs().includes(`already counted attempt:${id} `)) ? true : undefined),
      { what: 'the replay to reach every attempt of the experiment', timeoutMs: 60_000 },
    );
    const again = (await (await fetch(`${replayed.url}/experiments/${x.experimentId}/report`)).json()) as Record<string, any>;
    expect(again).toEqual(got);
    console.info(
      `finance = API: verdict ${api.verdict}, difference ${api.on_time_rate_difference.estimate} ${JSON.stringify(api.on_time_rate_difference.interval_95)}`,
    );
  });

  it('the finance consumer answers 404 for an experiment the policy API does not know', async () => {
    expect((await fetch(`${consumer!.url}/experiments/nope-${run}/report`)).status).toBe(404);
  });
});
