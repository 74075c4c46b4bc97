/**
 * Issue 6 defect 2: one bad `attempt.completed` event must not block its partition. A poison event
 * (cached tokens above input tokens: pricing throws RangeError) followed by a good one with the
 * same key (same partition): the good one settles, the poison one is on the dead-letter topic with
 * ids only, has a `settlement_failed` case holding its exposure, and the metric counted it.
 * Real Kafka and Postgres; settlement runs in-process.
 */
import { randomUUID } from 'node:crypto';
import { AttemptCompletedV1, DeadLetterV1, ReconciliationRequiredV1, Topics } from '@gateway/contracts';
import { Database } from '@gateway/db';
import { KafkaBus } from '@gateway/messaging';
import type { RunningService } from '@gateway/service-kit';
import { eventually, seedHeldAttempt, Seeder } from '@gateway/testing';
import { startSettlement } from '../src/app';

const DB_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const PERIOD = new Date('2026-12-01T00:00:00Z');
const routeId = `route-poison-${randomUUID().slice(0, 8)}`;
const priceId = `price-${routeId}-v1`;

let db: Database;
let bus: KafkaBus;
let settlement: RunningService;
const deadLetters: DeadLetterV1[] = [];
const required: ReconciliationRequiredV1[] = [];

beforeAll(async () => {
  db = new Database(DB_URL);
  await new Seeder(db).route({
    routeId,
    alias: `alias-${routeId}`,
    providerKind: 'openai-chat',
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamModel: 'gpt-test',
  });
  bus = new KafkaBus({ brokers: BROKERS.split(','), clientId: `poison-int-${process.pid}`, logger: quiet });
  await bus.connect();
  await bus.ensureTopics();
  await bus.subscribe('deadLetters', { groupId: `poison-int-${randomUUID()}`, fromBeginning: false }, async (d) => {
    deadLetters.push(d);
  });
  await bus.subscribe('reconciliationRequired', { groupId: `poison-int-${randomUUID()}`, fromBeginning: false }, async (e) => {
    required.push(e);
  });
  settlement = await startSettlement({
    ...process.env,
    DATABASE_URL: DB_URL,
    KAFKA_BROKERS: BROKERS,
    SETTLEMENT_PORT: '0',
    LOG_LEVEL: 'silent',
  });
});

afterAll(async () => {
  await settlement?.close();
  await bus?.disconnect();
  await db?.close();
});

/** What admission and dispatch leave behind for one attempt that succeeded upstream. */
const succeededAttempt = (workloadId: string, reservedMicrousd: bigint) =>
  seedHeldAttempt(db, { routeId, priceRevisionId: priceId, reservedMicrousd, periodStart: PERIOD, workloadId, actionStatus: 'dispatched' });

function completed(
  workloadId: string,
  a: { actionId: string; attemptId: string },
  usage: { input: number; cached: number; output: number },
): AttemptCompletedV1 {
  return {
    event_id: randomUUID(),
    timestamp: new Date().toISOString(),
    request_id: randomUUID(),
    action_id: a.actionId,
    attempt_id: a.attemptId,
    attempt_role: 'primary',
    workload_id: workloadId,
    environment: 'dev',
    route_id: routeId,
    route_version: 1,
    model_alias: `alias-${routeId}`,
    provider_request_id: `chatcmpl-${randomUUID()}`,
    requested_candidate_count: null,
    effective_candidate_count: 1,
    returned_candidate_count: 1,
    input_tokens: usage.input,
    output_tokens_total: usage.output,
    total_tokens: usage.input + usage.output,
    stream_mode: 'none',
    usage_source: 'provider_response',
    quota_scope: null,
    policy_result: 'allow',
    policy_reason: null,
    attempt_no: 1,
    outcome: 'succeeded',
    http_status: 200,
    cached_input_tokens: usage.cached,
    reasoning_tokens: 0,
    output_includes_reasoning: false,
    candidates: [{ index: 0, finish_reason: 'stop', outcome: 'ok' }],
    prompt_block_reason: null,
    attempts_total: 1,
    action_final: true,
  };
}

describe('settlement: a poison attempt.completed event', () => {
  it('is parked with a case for its exposure while the next event on its partition settles', async () => {
    const workloadId = `wl-${randomUUID()}`;
    const poison = await succeededAttempt(workloadId, 7_000n);
    const good = await succeededAttempt(workloadId, 9_000n);

    // Same key, so the same partition: the good event comes after the poison one.
    await bus.publish('attemptCompleted', [
      { key: workloadId, value: completed(workloadId, poison, { input: 10, cached: 900, output: 5 }) },
      { key: workloadId, value: completed(workloadId, good, { input: 100, cached: 0, output: 50 }) },
    ]);

    const ledger = await eventually(
      () => db.prisma.ledgerEntry.findUnique({ where: { attemptId: good.attemptId } }).then((r) => r ?? undefined),
      {
        timeoutMs: 30_000,
        what: 'the good event to settle',
      },
    );
    expect(ledger.costMicrousd).toBeGreaterThan(0n);

    const parked = await eventually(() => deadLetters.find((d) => d.attempt_id === poison.attemptId), {
      what: 'the poison event on the dead-letter topic',
    });
    expect(parked).toMatchObject({
      topic: Topics.attemptCompleted.name,
      key: workloadId,
      consumer_group: 'gateway-settlement',
      action_id: poison.actionId,
      reason_class: 'deterministic_error',
      error_class: 'RangeError',
      attempts: 1,
    });
    expect(Object.keys(parked).sort()).toEqual(
      [
        'event_id',
        'topic',
        'partition',
        'offset',
        'key',
        'consumer_group',
        'source_event_id',
        'action_id',
        'attempt_id',
        'reason_class',
        'error_class',
        'reason',
        'attempts',
        'first_seen_at',
        'parked_at',
      ].sort(),
    );

    const cases = await db.prisma.reconciliationCase.findMany({ where: { attemptId: poison.attemptId } });
    expect(cases).toEqual([expect.objectContaining({ reason: 'settlement_failed', status: 'open', exposureMicrousd: 7_000n })]);
    await eventually(() => required.find((e) => e.case_id === cases[0].id), { what: 'reconciliation.required for the case' });
    // The exposure is still held, not released: nothing settled it.
    expect(await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: poison.actionId } })).toMatchObject({
      status: 'pending',
      releasedMicrousd: 0n,
    });
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: poison.attemptId } })).toBe(0);

    const metrics = await (await fetch(`${settlement.url}/metrics`)).text();
    const counted = metrics
      .split('\n')
      .find(
        (l) =>
          l.startsWith('gateway_consumer_dead_lettered_total{') &&
          l.includes(`topic="${Topics.attemptCompleted.name}"`) &&
          l.includes('consumer="gateway-settlement"') &&
          l.includes('reason_class="deterministic_error"'),
      );
    expect(Number(counted?.split(' ').pop())).toBeGreaterThanOrEqual(1);
  });

  it('parks a message that does not match the topic schema instead of skipping it silently', async () => {
    const key = `wl-${randomUUID()}`;
    const eventId = randomUUID();
    await bus.publishRaw(Topics.attemptCompleted.name, [
      { key, value: JSON.stringify({ event_id: eventId, action_id: 'a', prompt: 'CANARY' }) },
    ]);
    const parked = await eventually(() => deadLetters.find((d) => d.source_event_id === eventId), {
      what: 'the invalid message on the dead-letter topic',
    });
    expect(parked).toMatchObject({ reason_class: 'schema_invalid', error_class: 'ZodError', key, consumer_group: 'gateway-settlement' });
    expect(JSON.stringify(parked)).not.toContain('CANARY');
  });
});
