/**
 * The daily controls against the real Postgres and Kafka (issue 13): admission decisions for eight
 * UTC days go through `gateway.admission.decisions.v1` into reconciliation's tallies (a
 * redelivered batch counts once); on day 8 the callers that sent n=1 send n=3 (under an
 * exception), and running the day raises exactly one `count_shift` alert, on
 * `gateway.controls.alerts.v1` and in the API; running it again adds none. An exception spent
 * past 80 % of its budget raises its own alert.
 */
import { randomUUID } from 'node:crypto';
import { Topics, type AdmissionDecisionV1, type ControlAlertV1 } from '@gateway/contracts';
import { budgetAccountId, Database, LedgerRepository, LedgerRow, OutboxRepository } from '@gateway/db';
import { KafkaBus } from '@gateway/messaging';
import { RunningService } from '@gateway/service-kit';
import { admissionDecisionEvent, eventually, insertAdmittedAction, ledgerRow, Seeder } from '@gateway/testing';
import { startTestReconciliation } from './test-service';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const DAYS = ['2026-10-01', '2026-10-02', '2026-10-03', '2026-10-04', '2026-10-05', '2026-10-06', '2026-10-07', '2026-10-08'];
const DAY8 = DAYS[7];

const suffix = randomUUID().slice(0, 8);
const routeId = `route-controls-${suffix}`;
const workloadId = `wl-controls-${suffix}`;
const spentWorkloadId = `wl-controls-ex-${suffix}`;
const wordyWorkloadId = `wl-controls-out-${suffix}`;
const db = new Database(url, { poolMax: 4 });
let bus: KafkaBus;
let service: RunningService;
let base: string;
let operatorToken: string;
const alerts: ControlAlertV1[] = [];

beforeAll(async () => {
  const seed = new Seeder(db);
  await seed.route({
    routeId,
    alias: `alias-${routeId}`,
    providerKind: 'openai-chat',
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamModel: 'gpt-test',
  });
  await seed.workload({ id: workloadId, allowedAliases: [`alias-${routeId}`] });
  await seed.workload({ id: spentWorkloadId, allowedAliases: [`alias-${routeId}`] });
  await seed.workload({ id: wordyWorkloadId, allowedAliases: [`alias-${routeId}`], perCandidateOutputCeiling: 256 });
  operatorToken = await seed.operator(`ops-controls-${suffix}`, ['operator']);

  bus = new KafkaBus({ brokers: BROKERS.split(','), clientId: `controls-int-${process.pid}`, logger: quiet });
  await bus.connect();
  await bus.ensureTopics();
  await bus.subscribe('controlAlerts', { groupId: `controls-int-${randomUUID()}`, fromBeginning: true }, async (e) => {
    if (e.workload_id === workloadId || e.workload_id === spentWorkloadId) alerts.push(e);
  });

  service = await startTestReconciliation(url, BROKERS);
  base = service.url;
});

afterAll(async () => {
  await service?.close();
  await bus?.disconnect();
  await db.close();
});

const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${operatorToken}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

/** `n` decisions of the workload on `day` (spread over the day), each a fresh event. */
function decisions(day: string, n: number, over: Partial<AdmissionDecisionV1>): AdmissionDecisionV1[] {
  return Array.from({ length: n }, (_, i) =>
    admissionDecisionEvent(workloadId, {
      timestamp: new Date(Date.parse(`${day}T00:00:00Z`) + (i * 86_399_000) / n).toISOString(),
      route_id: routeId,
      model_alias: `alias-${routeId}`,
      ...over,
    }),
  );
}

const refused = (day: string, n: number) =>
  decisions(day, n, {
    requested_candidate_count: 1,
    effective_candidate_count: null,
    policy_result: 'deny',
    policy_reason: 'budget_exhausted',
    reserved_microusd: null,
  });

describe('daily controls on Kafka and Postgres', () => {
  it('day 8’s n=1 → n=3 switch raises exactly one count_shift alert on the topic and in the API; a re-run adds none', async () => {
    const events: AdmissionDecisionV1[] = [];
    for (const day of DAYS.slice(0, 7))
      events.push(...decisions(day, 20, {}), ...decisions(day, 20, { requested_candidate_count: 1 }), ...refused(day, 2));
    events.push(
      ...decisions(DAY8, 100, {}),
      ...decisions(DAY8, 100, { requested_candidate_count: 3, effective_candidate_count: 3, policy_reason: 'within_exception' }),
      ...refused(DAY8, 10),
    );
    const publish = (batch: AdmissionDecisionV1[]) =>
      bus.publish(
        'admissionDecisions',
        batch.map((value) => ({ key: workloadId, value })),
      );
    await publish(events);
    await publish(events.slice(0, 100)); // redelivered: counted once

    const day8 = `/controls/days/${DAY8}?workload_id=${workloadId}`;
    await eventually(
      async () => {
        const { body } = await call('GET', day8);
        const routes = body.routes as Array<Record<string, unknown>>;
        expect(routes).toEqual([
          expect.objectContaining({
            workload_id: workloadId,
            route_id: routeId,
            requested_counts: { omitted: 100, '1': 10, '3': 100 },
            effective_counts: { '1': 100, '3': 100 },
            admitted: 200,
            refused: 10,
            refusals_by_code: { budget_exhausted: 10 },
            baseline_requested_counts: { omitted: 140, '1': 154 },
          }),
        ]);
        return true;
      },
      { timeoutMs: 30_000, what: 'the tallies of day 8' },
    );

    const first = await call('POST', '/controls/run', { day: DAY8 });
    expect(first.status).toBe(200);
    const mine = (first.body.added as ControlAlertV1[]).filter((a) => a.workload_id === workloadId);
    expect(mine).toEqual([
      expect.objectContaining({ kind: 'count_shift', route_id: routeId, day: DAY8, day_total: 210, baseline_total: 294 }),
    ]);
    expect(mine[0].grew?.[0]).toMatchObject({ category: '3' });

    await eventually(() => (alerts.some((a) => a.workload_id === workloadId) ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the alert on the topic',
    });
    expect(alerts.filter((a) => a.workload_id === workloadId)).toHaveLength(1);
    expect(alerts.find((a) => a.workload_id === workloadId)).toMatchObject({ kind: 'count_shift', route_id: routeId, day: DAY8 });

    const again = await call('POST', '/controls/run', { day: DAY8 });
    expect((again.body.added as ControlAlertV1[]).filter((a) => a.workload_id === workloadId)).toEqual([]);
    const listed = await call('GET', `/controls/alerts?day=${DAY8}&workload_id=${workloadId}`);
    expect((listed.body.alerts as ControlAlertV1[]).map((a) => a.kind)).toEqual(['count_shift']);
    // a published outbox row is deleted: once none of this workload's waits, whatever the second run
    // might have enqueued has been sent, and the topic still holds the one alert
    await eventually(
      async () =>
        (await db.prisma.outboxMessage.count({ where: { topic: Topics.controlAlerts.name, key: workloadId } })) === 0 ? true : undefined,
      { timeoutMs: 30_000, what: 'the outbox drained of this workload' },
    );
    expect(alerts.filter((a) => a.workload_id === workloadId)).toHaveLength(1);
    // a baseline day alone: too small a day to judge, no alert
    const day7 = await call('POST', '/controls/run', { day: DAYS[6] });
    expect((day7.body.added as ControlAlertV1[]).filter((a) => a.workload_id === workloadId)).toEqual([]);
  });

  it('an active exception spent past 80 % of its budget raises one exception_budget alert', async () => {
    const seed = new Seeder(db);
    const exceptionId = await seed.approvedException({
      workloadId: spentWorkloadId,
      maxCandidates: 3,
      perCandidateOutputCeiling: 256,
      budgetMicrousd: 1_000_000n,
      expiresAt: new Date('2030-01-01T00:00:00Z'),
    });
    const accountId = budgetAccountId('exception', exceptionId, new Date(0));
    await db.prisma.budgetAccount.upsert({
      where: { id: accountId },
      create: {
        id: accountId,
        scope: 'exception',
        scopeId: exceptionId,
        periodStart: new Date(0),
        budgetMicrousd: 1_000_000n,
        settledMicrousd: 850_000n,
      },
      update: { settledMicrousd: 850_000n },
    });
    const r = await call('POST', '/controls/run', { day: DAY8 });
    expect((r.body.added as ControlAlertV1[]).filter((a) => a.workload_id === spentWorkloadId)).toEqual([
      expect.objectContaining({
        kind: 'exception_budget',
        route_id: '*',
        exceptions: [
          expect.objectContaining({ exception_id: exceptionId, share: 0.85, spent_microusd: '850000', budget_microusd: '1000000' }),
        ],
      }),
    ]);
    await eventually(() => (alerts.some((a) => a.workload_id === spentWorkloadId) ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the exception alert',
    });
    expect(alerts.filter((a) => a.workload_id === spentWorkloadId).map((a) => a.kind)).toEqual(['exception_budget']);
  });

  it('output per request from the ledger: p95 above the ceiling alerts; an action of unknown output is left out, not zero', async () => {
    const ledger = new LedgerRepository(new OutboxRepository(db));
    const settledAt = new Date(`${DAY8}T12:00:00Z`);
    const rows: LedgerRow[] = [];
    for (const output of [100, 200, 900, null]) {
      const actionId = await insertAdmittedAction(db, { workloadId: wordyWorkloadId, deadline: settledAt });
      const base = ledgerRow({ workloadId: wordyWorkloadId, routeId: 'r', priceRevisionId: 'p', settledAt });
      rows.push({ ...base, actionId, outputTokensTotal: output, returnedCandidates: 1 });
    }
    await db.transaction((tx) =>
      ledger.recordMany(
        tx,
        rows.map((row) => ({ row, eventId: randomUUID() })),
      ),
    );

    const report = await call('GET', `/controls/days/${DAY8}?workload_id=${wordyWorkloadId}`);
    expect(report.body.routes).toEqual([
      expect.objectContaining({
        workload_id: wordyWorkloadId,
        route_id: 'r',
        requested_counts: {},
        returned_candidates_total: 3,
        output_tokens_per_request: { requests: 3, mean: 400, p50: 200, p95: 900 },
      }),
    ]);
    const r = await call('POST', '/controls/run', { day: DAY8 });
    expect((r.body.added as ControlAlertV1[]).filter((a) => a.workload_id === wordyWorkloadId)).toEqual([
      expect.objectContaining({
        kind: 'output_per_request',
        route_id: 'r',
        day_total: 3,
        p95_output_tokens: 900,
        threshold_output_tokens: 256,
      }),
    ]);
  });

  it('refuses a future day, a malformed day, and a caller without an operator token', async () => {
    expect((await call('POST', '/controls/run', { day: '2999-01-01' })).status).toBe(400);
    expect((await call('GET', '/controls/days/2026-02-30')).body).toMatchObject({ error: { code: 'invalid_request' } });
    const anon = await fetch(`${base}/controls/alerts`);
    expect(anon.status).toBe(401);
  });
});
