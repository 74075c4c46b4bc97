import { apiReport, closeTheDay, drive, experimentOn, financeReport, moneyDecided } from './experiment-run';
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

    const coverage = await closeTheDay({ experimentId: x.experimentId, workloadId: x.workloadId, simModel: base, operator });
    console.info(
      `${coverage.attempts} attempts; ${coverage.lines} export lines imported, ${coverage.released.length} cases released at 0 (${coverage.released.join(', ')})`,
    );

    const api = await apiReport(x.experimentId, operator);
    expect(api.cohorts.hedged.unresolved_exposure_microusd).toBe('0');
    expect(api.cohorts.holdout.unresolved_exposure_microusd).toBe('0');
    expect(api.cohorts.hedged.eligible_actions + api.cohorts.holdout.eligible_actions).toBe(ACTIONS);
    expect(api.verdict).not.toBe('pending');

    // the consumer has read every settled event of the experiment once it counts every attempt
    const got = await financeReport(consumer!.url, x.experimentId, coverage.attempts);
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
