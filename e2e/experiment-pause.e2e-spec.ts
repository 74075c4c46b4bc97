import { randomUUID } from 'node:crypto';
import { ExperimentRepository, OutboxRepository } from '@gateway/db';
import { eventually, experimentDesign, hedgeSettings, Seeder } from '@gateway/testing';
import { closeTheDay, financeReport } from './experiment-run';
import { Consumer, startConsumer } from './finance-consumer-process';
import { openai, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * The experiment's pause rule through the running stack (issue 11), with the official `openai` SDK:
 * a provider-sim route that is fast, then slow (a new route contract version naming a slower
 * script), then fast again. The holdout's primaries get slow → dispatch records a pause; hedged
 * actions dispatched while it is open run primary-only (one attempt, one upstream request, the
 * pause on the attempt); the route recovers → the pause ends; the report lists the pause and counts
 * the actions run paused per cohort. Then the day is closed (the sim's export imported, the rest
 * released at 0) and the finance consumer's report, rebuilt from gateway.usage.settled.v1 with the
 * pauses read from the experiment record, equals the API's: paused actions counted from the topic.
 * About 40 s.
 */
const FAST = 'latency=10-50';
const SLOW = 'latency=600-800';
const HEDGE_DELAY_MS = 200;
const CONCURRENCY = 8;

describe('experiment pauses through the stack (issue 11)', () => {
  const run = uid();
  const route = `xp-${run}`;
  const workloadId = `xp-wl-${run}`;
  // a sim model of this suite's own, so its export lines are told apart from the other suites'
  const simModel = `sim-xp-${run}`;
  let operator: string;
  let consumer: Consumer | undefined;
  let key: string;
  let experimentId: string;

  jest.setTimeout(150_000);

  const routeOn = (seed: Seeder, script: string) =>
    seed.route({
      routeId: route,
      alias: route,
      upstreamModel: `${simModel};${script}`,
      providerKind: 'openai-chat',
      upstreamBaseUrl: stack.providerSim,
    });

  beforeAll(async () => {
    await withSeeder(async (seed, db) => {
      operator = await seed.operator(`xpops-${run}`, ['operator']);
      const finance = await seed.operator(`xpfin-${run}`, ['finance']);
      consumer = await startConsumer({
        port: Number(new URL(stack.admission).port) + 25,
        group: `finance-xp-${run}`,
        schema: `finance_xp_${run.replace(/[^a-z0-9]/g, '')}`,
        env: { POLICY_URL: stack.policy, FINANCE_POLICY_TOKEN: finance },
      });
      await routeOn(seed, FAST);
      ({ key } = await seed.workload({ id: workloadId, allowedAliases: [route], maxInFlight: 64, budgetMicrousd: 10_000_000_000n }));
      const revisionId = await seed.hedgePolicy(
        workloadId,
        hedgeSettings({ delay: { kind: 'fixed', ms: HEDGE_DELAY_MS }, retry: { transient: [], max_retries: 0 } }),
      );
      experimentId = randomUUID();
      const started = await new ExperimentRepository(db, new OutboxRepository(db)).start(
        {
          ...experimentDesign(revisionId, {
            holdout_share_bps: 5_000,
            // the fast route's p95 is ~50 ms plus the stack; the slow one's above 600 ms. An error
            // rate "above 1,000 per mille" never trips: this run is about latency.
            pause: { holdout_p95_above_ms: 450, route_error_per_mille_above: 1_000, window_actions: 20 },
          }),
          id: experimentId,
          workloadId,
          requestedBy: 'ana',
          approvedBy: 'ben',
          reason: 'pause rules through the stack',
        },
        new Date(),
      );
      if (!started.ok) throw new Error(`experiment not started: ${started.reason}`);
    });
  });

  afterAll(async () => {
    await consumer?.stop();
  });

  async function drive(n: number): Promise<void> {
    const client = openai(key);
    let next = 0;
    const worker = async () => {
      while (next < n) {
        const i = next++;
        await client.chat.completions.create({ model: route, messages: [{ role: 'user', content: `q ${i} ${run}` }] }, { maxRetries: 0 });
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  }

  /** Switches the route to `script` (a new contract version) and waits out admission's catalog cache. */
  async function switchTo(script: string): Promise<void> {
    await withSeeder((seed) => routeOn(seed, script));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
  }

  const fetchReport = async (format: 'json' | 'csv') => {
    const res = await fetch(`${stack.policy}/experiments/${experimentId}/report?format=${format}`, {
      headers: { authorization: `Bearer ${operator}` },
    });
    expect(res.status).toBe(200);
    return res;
  };
  const report = async () => (await (await fetchReport('json')).json()) as Record<string, any>;

  /** Per hedged or holdout action: attempts, whether it ran paused, and its attempt ids. */
  const actionsOf = () =>
    withSeeder(
      (_seed, db) =>
        db.prisma.$queryRaw<Array<{ id: string; cohort: string; attempts: number; paused: boolean; attempt_ids: string[] }>>`
        SELECT a.id, a.cohort, count(t.id)::int AS attempts, bool_or(t.experiment_pause_id IS NOT NULL) AS paused,
          array_agg(t.id) AS attempt_ids
        FROM action a JOIN attempt t ON t.action_id = a.id
        WHERE a.experiment_id = ${experimentId} GROUP BY a.id, a.cohort`,
    );

  it('slow holdout primaries pause hedging; paused hedged actions send one request; recovery ends the pause; the report shows it', async () => {
    // fast: the window fills, nothing pauses
    await drive(60);
    expect((await report()).pauses).toEqual([]);

    // slow: the holdout's p95 passes the rule, a pause opens; then more slow traffic runs paused
    await switchTo(SLOW);
    const seqBefore = await simLastSeq();
    await drive(60);
    const opened = await eventually(
      async () => {
        const r = await report();
        return r.pauses.length === 1 ? r.pauses[0] : undefined;
      },
      { what: 'a pause recorded', timeoutMs: 20_000 },
    );
    expect(opened).toMatchObject({
      reason: 'holdout_p95_above_ms',
      ended_at: null,
      thresholds: { holdout_p95_above_ms: 450, route_error_per_mille_above: 1_000 },
      window_actions: 20,
    });
    expect(opened.at_start.holdout_p95_ms).toBeGreaterThan(450);
    expect(opened.at_start.samples).toBe(20);
    await drive(40);

    const rows = await actionsOf();
    const pausedHedged = rows.filter((r) => r.cohort === 'hedged' && r.paused);
    const pausedHoldout = rows.filter((r) => r.cohort === 'holdout' && r.paused);
    // the later slow traffic ran paused (after the ≤ 1 s pause-state cache), in both cohorts
    expect(pausedHedged.length).toBeGreaterThanOrEqual(10);
    expect(pausedHoldout.length).toBeGreaterThanOrEqual(10);
    // paused: primary-only, exactly one upstream request each (the sim logs the attempt id it was sent)
    expect(pausedHedged.every((r) => r.attempts === 1)).toBe(true);
    const sent = new Map<string, number>();
    for (const req of (await simRequestsSince(seqBefore)) as Array<{ clientRequestId?: string | null }>) {
      if (req.clientRequestId) sent.set(req.clientRequestId, (sent.get(req.clientRequestId) ?? 0) + 1);
    }
    for (const r of pausedHedged) expect(r.attempt_ids.map((id) => sent.get(id) ?? 0)).toEqual([1]);
    // before the pause the slow route was hedged (the hedge fires at 200 ms): hedging was on, the pause stopped it
    expect(rows.some((r) => r.cohort === 'hedged' && !r.paused && r.attempts > 1)).toBe(true);
    // the holdout never gets an extra attempt, paused or not
    expect(rows.filter((r) => r.cohort === 'holdout').every((r) => r.attempts === 1)).toBe(true);

    // fast again: the window recovers below 90 % of the threshold and the pause ends
    await switchTo(FAST);
    await drive(60);
    const ended = await eventually(
      async () => {
        const r = await report();
        return r.pauses[0].ended_at !== null ? r : undefined;
      },
      { what: 'the pause ended', timeoutMs: 20_000 },
    );
    expect(ended.pauses).toHaveLength(1);
    expect(ended.pauses[0].at_end.holdout_p95_ms).toBeLessThanOrEqual(405);
    const final = await actionsOf();
    const count = (cohort: string) => final.filter((r) => r.cohort === cohort && r.paused).length;
    expect(ended.paused_actions).toEqual({ hedged: count('hedged'), holdout: count('holdout') });
    // intention to treat: paused actions still count in their cohort
    expect(ended.cohorts.hedged.eligible_actions + ended.cohorts.holdout.eligible_actions).toBe(final.length);

    console.info(`pause ${JSON.stringify(ended.pauses[0])}; actions ${final.length}, run paused ${JSON.stringify(ended.paused_actions)}`);
    const csv = await (await fetchReport('csv')).text();
    expect(csv).toContain(`hedged,${count('hedged')}`);
    expect(csv).toContain(`${ended.pauses[0].id},${ended.pauses[0].started_at},${ended.pauses[0].ended_at},holdout_p95_above_ms,`);

    // finance: once every attempt is settled, the report from the topic alone equals the API's, pauses included
    const day = await closeTheDay({ experimentId, workloadId, simModel, operator });
    const api = await report();
    expect(api.paused_actions).toEqual(ended.paused_actions);
    const { topic_coverage, ...fromTopic } = await financeReport(consumer!.url, experimentId, day.attempts);
    expect(topic_coverage).toMatchObject({ actions: final.length, attempts_not_yet_settled: 0 });
    expect(fromTopic).toEqual(api);
    console.info(`finance = API with ${day.attempts} attempts (${day.lines} export lines, ${day.released.length} released at 0)`);
  });
});
