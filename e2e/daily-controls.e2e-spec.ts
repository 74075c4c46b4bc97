import { Topics } from '@gateway/contracts';
import { addUtcDays, utcDayOf } from '@gateway/domain';
import { policyCall, reconciliationCall } from './policy-call';
import { eventually, openai, stack, TopicReader, uid, withSeeder } from './support';

/**
 * Issue 13 end to end: a workload whose callers sent n=1 (or nothing) for seven days — those
 * days' tallies seeded directly — switches to n=3 today under an approved exception (a simulated
 * client-library change), driven through the official openai SDK. Today's decisions reach
 * reconciliation through `gateway.admission.decisions.v1`; running the day raises exactly the
 * expected alert, `count_shift` naming category 3, on `gateway.controls.alerts.v1` (read by a
 * plain kafkajs consumer) and in the API; running it again adds none.
 */
describe('daily controls (openai SDK)', () => {
  const run = uid();
  const workloadId = `w-controls-${run}`;
  const routeId = `oa-controls-${run}`;
  const today = utcDayOf(new Date());
  const TODAY_REQUESTS = 30;
  let key: string;
  let operatorToken: string;
  let alerts: TopicReader;

  const recon = (method: string, path: string, body?: unknown) => reconciliationCall(method, path, operatorToken, body);

  beforeAll(async () => {
    await withSeeder(async (seed, db) => {
      await seed.route({
        routeId,
        alias: routeId,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt',
      });
      key = (await seed.workload({ id: workloadId, allowedAliases: [routeId], perCandidateOutputCeiling: 64 })).key;
      await seed.approvedException({
        workloadId,
        maxCandidates: 3,
        perCandidateOutputCeiling: 64,
        budgetMicrousd: 1_000_000_000n,
        expiresAt: new Date(Date.now() + 7 * 86_400_000),
      });
      operatorToken = await seed.operator(`ops-controls-${run}`, ['operator']);
      // the seven days before today: 10 requests a day, half with n omitted, half with n=1
      const rows = [];
      for (let back = 1; back <= 7; back++) {
        const day = new Date(`${addUtcDays(today, -back)}T00:00:00Z`);
        const base = { day, workloadId, routeId };
        rows.push(
          { ...base, metric: 'requested', key: 'omitted', n: 5n },
          { ...base, metric: 'requested', key: '1', n: 5n },
          { ...base, metric: 'effective', key: '1', n: 10n },
          { ...base, metric: 'decision', key: 'allow', n: 10n },
        );
      }
      await db.prisma.controlDayTally.createMany({ data: rows });
    });
    alerts = new TopicReader([Topics.controlAlerts.name]);
    await alerts.start();
  });

  afterAll(() => alerts.stop());

  it('a seeded day with a simulated client-library change triggers exactly the expected alert on the topic and in the API', async () => {
    // small workload: judge from 20 requests a side; output per request judged only far above the ceiling
    const put = await policyCall('PUT', `/workloads/${workloadId}/controls`, operatorToken, {
      shift: { min_sample: 20 },
      output_p95_max_tokens: 100_000,
      reason: 'small e2e workload',
    });
    expect(put.status).toBe(200);
    expect(put.body.thresholds).toMatchObject({ shift: { min_sample: 20 }, exception_budget_share: 0.8 });

    const client = openai(key);
    for (let i = 0; i < TODAY_REQUESTS; i++) {
      const { data, response } = await client.chat.completions
        .create({ model: routeId, n: 3, max_tokens: 16, messages: [{ role: 'user', content: `controls ${run} ${i}` }] })
        .withResponse();
      expect(data.choices).toHaveLength(3);
      expect(response.headers.get('x-gateway-requested-candidates')).toBe('3');
    }

    await eventually(
      async () => {
        const { body } = await recon('GET', `/controls/days/${today}?workload_id=${workloadId}`);
        const route = (body.routes as Array<Record<string, any>>).find((r) => r.route_id === routeId);
        return route?.requested_counts['3'] === TODAY_REQUESTS ? route : undefined;
      },
      { timeoutMs: 30_000, what: "today's tallies" },
    );

    const first = await recon('POST', '/controls/run', { day: today });
    expect(first.status).toBe(200);
    const mine = (first.body.added as Array<Record<string, any>>).filter((a) => a.workload_id === workloadId);
    expect(mine).toEqual([
      expect.objectContaining({ kind: 'count_shift', route_id: routeId, day: today, day_total: TODAY_REQUESTS, baseline_total: 70 }),
    ]);
    expect(mine[0].grew[0]).toMatchObject({ category: '3', day_share: 1, baseline_share: 0 });

    const published = await alerts.waitFor<Record<string, any>>((m) => m.workload_id === workloadId, 'the alert on the topic');
    expect(published).toMatchObject({ kind: 'count_shift', route_id: routeId, day: today, alert_id: mine[0].alert_id });

    const again = await recon('POST', '/controls/run', { day: today });
    expect((again.body.added as Array<Record<string, any>>).filter((a) => a.workload_id === workloadId)).toEqual([]);
    const listed = await recon('GET', `/controls/alerts?day=${today}&workload_id=${workloadId}`);
    expect((listed.body.alerts as Array<Record<string, any>>).map((a) => [a.kind, a.route_id])).toEqual([['count_shift', routeId]]);
    // nothing more reached the topic for this workload. A published outbox row is deleted, so wait until
    // nothing of this workload's is left to publish: whatever the second run might have enqueued is then
    // on the topic, and the topic holds the one alert
    await withSeeder(async (_seed, db) => {
      await eventually(
        async () =>
          (await db.prisma.outboxMessage.count({ where: { topic: Topics.controlAlerts.name, key: workloadId } })) === 0 ? true : undefined,
        { timeoutMs: 30_000, what: 'the outbox drained of this workload' },
      );
    });
    expect(alerts.json<Record<string, any>>().filter((m) => m.workload_id === workloadId)).toHaveLength(1);
  });
});
