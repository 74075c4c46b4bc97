/**
 * The weekly audit against the real Postgres and Kafka (issue 13): ledger rows written without
 * their events, settled events published on `gateway.usage.settled.v1` by hand (one redelivered,
 * two that are off by +5 and −5, one for an attempt with no ledger row), export lines recorded
 * twice, an unresolved reservation and a day's decisions; `GET /audit` shows each source's totals
 * and lists every disagreement, the opposite pair both, and refuses bad periods with stable codes.
 */
import { randomUUID } from 'node:crypto';
import type { UsageSettledV1 } from '@gateway/contracts';
import {
  AuditRepository,
  ControlsRepository,
  Database,
  LedgerRepository,
  LedgerRow,
  OutboxRepository,
  usageSettledEvent,
} from '@gateway/db';
import type { AuditReportWire } from '@gateway/domain';
import { KafkaBus } from '@gateway/messaging';
import { RunningService } from '@gateway/service-kit';
import { eventually, ledgerRow, seedHeldAttempt, Seeder } from '@gateway/testing';
import { startTestReconciliation } from './test-service';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };

const suffix = randomUUID().slice(0, 8);
const routeId = `route-audit-${suffix}`;
const workloadId = `wl-audit-${suffix}`;
const db = new Database(url, { poolMax: 4 });
const audit = new AuditRepository(db);
let bus: KafkaBus;
let service: RunningService;
let base: string;
let financeToken: string;
const today = new Date().toISOString().slice(0, 10);

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
  financeToken = await seed.operator(`fin-audit-${suffix}`, ['finance']);
  bus = new KafkaBus({ brokers: BROKERS.split(','), clientId: `audit-int-${process.pid}`, logger: quiet });
  await bus.connect();
  await bus.ensureTopics();
  service = await startTestReconciliation(url, BROKERS);
  base = service.url;
});

afterAll(async () => {
  await service?.close();
  await bus?.disconnect();
  await db.close();
});

const get = async (path: string, token = financeToken) => {
  const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type') ?? '', text, json: () => JSON.parse(text) as Record<string, unknown> };
};

/** One attempt of the workload (action, reservation, attempt) and its ledger row of `cost`, written without a settled event. */
async function settledAttempt(cost: bigint, output: number): Promise<LedgerRow> {
  const held = await seedHeldAttempt(db, {
    routeId,
    priceRevisionId: `price-${routeId}-v1`,
    reservedMicrousd: 1000n,
    periodStart: new Date(0),
    workloadId,
  });
  await db.prisma.reservation.update({
    where: { actionId: held.actionId },
    data: { status: 'settled', settledMicrousd: cost, releasedMicrousd: 1000n - cost },
  });
  const row: LedgerRow = {
    ...ledgerRow({
      workloadId,
      routeId,
      priceRevisionId: `price-${routeId}-v1`,
      settledAt: new Date(),
      evidence: { kind: 'attested', amountMicrousd: cost, caseId: 'c', attestedBy: 'ops', reason: 'test' },
    }),
    attemptId: held.attemptId,
    actionId: held.actionId,
    outputTokensTotal: output,
    returnedCandidates: 1,
  };
  // no outbox: the test publishes (or withholds) each row's event itself
  await db.transaction((tx) =>
    new LedgerRepository({ appendLedgerSettled: async () => undefined }).recordMany(tx, [{ row, eventId: randomUUID() }]),
  );
  return row;
}

const eventOf = (row: LedgerRow, cost?: bigint): UsageSettledV1 => ({
  ...usageSettledEvent(row, randomUUID()),
  ...(cost === undefined ? {} : { cost_microusd: cost.toString(), cost_microusd_by_category: null }),
});

describe('weekly audit on Kafka and Postgres', () => {
  let rows: LedgerRow[];
  let orphan: UsageSettledV1;
  let unresolvedReservationId: string;

  it('keeps each settled event once however often it is delivered, and lists every disagreement without netting', async () => {
    rows = [
      await settledAttempt(10n, 100),
      await settledAttempt(100n, 200),
      await settledAttempt(200n, 300),
      await settledAttempt(10n, 400),
    ];
    const agreeing = eventOf(rows[0]);
    orphan = { ...eventOf(rows[0], 7n), event_id: randomUUID(), attempt_id: randomUUID(), action_id: randomUUID() };
    const events = [agreeing, eventOf(rows[1], 105n), eventOf(rows[2], 195n), orphan];
    const publish = (batch: UsageSettledV1[]) =>
      bus.publish(
        'usageSettled',
        batch.map((value) => ({ key: workloadId, value })),
      );
    await publish(events);
    await publish([agreeing, agreeing]); // redelivered: kept once

    // an unresolved reservation of the period
    const held = await seedHeldAttempt(db, {
      routeId,
      priceRevisionId: `price-${routeId}-v1`,
      reservedMicrousd: 800n,
      periodStart: new Date(0),
      workloadId,
    });
    const r = await db.prisma.reservation.update({
      where: { actionId: held.actionId },
      data: { status: 'unresolved', unresolvedMicrousd: 800n },
    });
    unresolvedReservationId = r.id;

    // export lines: one agrees with row 1, one prices row 2 otherwise; recorded twice (one row each)
    const lines = [
      { providerRequestId: `req-${suffix}-1`, attemptId: rows[1].attemptId, exportCostMicrousd: 100n },
      { providerRequestId: `req-${suffix}-2`, attemptId: rows[2].attemptId, exportCostMicrousd: 250n },
      { providerRequestId: `req-${suffix}-x`, attemptId: null, exportCostMicrousd: null },
    ].map((l) => ({
      ...l,
      clientRequestId: null,
      outcome: 'confirmed',
      inputTokens: 1,
      cachedInputTokens: 0,
      outputTokensTotal: 1,
      reasoningTokens: 0,
      lineAt: null,
    }));
    await audit.recordExportLines(lines, new Date(), 'fin');
    await audit.recordExportLines(lines, new Date(), 'fin');
    expect(await db.prisma.usageExportLine.count({ where: { providerRequestId: { startsWith: `req-${suffix}-` } } })).toBe(3);

    // the day's decisions, as the daily tallies hold them
    const controls = new ControlsRepository(db, new OutboxRepository(db));
    const decision = (requested: number | null, admitted: boolean) => ({
      at: new Date(),
      workloadId,
      routeId,
      requested,
      effective: admitted ? (requested ?? 1) : null,
      admitted,
      reason: admitted ? null : 'budget_exhausted',
    });
    await db.transaction((tx) =>
      controls.addDecisions(tx, [decision(null, true), decision(null, true), decision(3, true), decision(1, true), decision(2, false)]),
    );

    const path = `/audit?from=${today}&to=${today}&workload_id=${workloadId}`;
    const report = await eventually(
      async () => {
        const r = (await get(path)).json() as unknown as AuditReportWire;
        return r.rows[0]?.topic.events === 4 ? r : undefined;
      },
      { timeoutMs: 30_000, what: 'the four settled events in the audit' },
    );
    expect(await db.prisma.auditSettledEvent.count({ where: { eventId: agreeing.event_id } })).toBe(1);
    expect(report.rows).toEqual([
      {
        workload_id: workloadId,
        route_id: routeId,
        reservations: {
          made: 5,
          pending: 0,
          settled: 4,
          released: 0,
          unresolved: 1,
          voided: 0,
          reserved_microusd: '4800',
          settled_microusd: '320',
          released_microusd: '3680',
          unresolved_microusd: '800',
        },
        ledger: { entries: 4, cost_microusd: '320' },
        // 10 + 105 + 195 + 7: the topic's total equals the ledger's only by netting; the differences say why not
        topic: { events: 4, cost_microusd: '317' },
        export: { lines: 2, cost_microusd: '350' },
        counts: { requested: { omitted: 2, '1': 1, '2': 1, '3': 1 }, admitted: 4, refused: 1, effective_total: 6, returned_total: 4 },
        output_per_request: { requests: 4, mean: 250, p50: 200, p95: 400 },
        differences: 6,
      },
    ]);
    const d = report.differences.map((x) => [
      x.kind,
      x.attempt_id,
      x.event_id ?? x.provider_request_id ?? x.reservation_id,
      x.ledger_microusd,
      x.topic_microusd ?? x.export_microusd ?? x.unresolved_microusd,
    ]);
    expect(d).toEqual(
      expect.arrayContaining([
        ['event_without_ledger_row', orphan.attempt_id, orphan.event_id, null, '7'],
        ['ledger_row_without_event', rows[3].attemptId, null, '10', null],
        ['event_cost_differs', rows[1].attemptId, expect.any(String), '100', '105'],
        ['event_cost_differs', rows[2].attemptId, expect.any(String), '200', '195'],
        ['export_cost_differs', rows[2].attemptId, `req-${suffix}-2`, '200', '250'],
        ['reservation_unresolved', null, unresolvedReservationId, null, '800'],
      ]),
    );
    expect(d).toHaveLength(6);
    expect(report.differences_truncated).toBe(false);

    // the unmatched line is listed when no workload is asked for
    const all = (await get(`/audit?from=${today}&to=${today}`)).json() as unknown as AuditReportWire;
    expect(all.differences).toEqual(
      expect.arrayContaining([expect.objectContaining({ kind: 'export_line_unmatched', provider_request_id: `req-${suffix}-x` })]),
    );
  });

  it('answers CSV with the same figures', async () => {
    const r = await get(`/audit?from=${today}&to=${today}&workload_id=${workloadId}&format=csv`);
    expect(r.status).toBe(200);
    expect(r.type).toContain('text/csv');
    const [head, line] = r.text.split('\r\n');
    const cells = Object.fromEntries(head.split(',').map((k, i) => [k, line.split(',')[i]]));
    expect(cells).toMatchObject({
      workload_id: workloadId,
      ledger_microusd: '320',
      topic_microusd: '317',
      export_microusd: '350',
      differences: '6',
    });
    expect(r.text).toContain(`event_without_ledger_row,${workloadId},${routeId}`);
  });

  it.each([
    ['a missing period', '', 'from'],
    ['to before from', '?from=2026-10-02&to=2026-10-01', 'to'],
    ['more than 31 days', '?from=2026-10-01&to=2026-11-01', 'to'],
    ['a day that does not exist', '?from=2026-02-30&to=2026-03-01', 'from'],
    ['an unknown parameter', `?from=${today}&to=${today}&workload=x`, undefined],
    ['an unknown format', `?from=${today}&to=${today}&format=xml`, 'format'],
  ])('refuses %s with 400 invalid_request', async (_what, query, param) => {
    const r = await get(`/audit${query}`);
    expect(r.status).toBe(400);
    expect(r.json()).toMatchObject({ error: { code: 'invalid_request', ...(param ? { param } : {}) } });
  });

  it('refuses a caller without an operator or finance token', async () => {
    expect((await get(`/audit?from=${today}&to=${today}`, 'op_nobody')).status).toBe(401);
  });
});
