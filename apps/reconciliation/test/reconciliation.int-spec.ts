/**
 * Reconciliation against the real Postgres and Kafka: the sweeper (concurrent sweepers void a
 * reservation exactly once; an orphaned attempt becomes a case with unresolved exposure), usage
 * import, operator release and exposure through the HTTP API, events through outbox and Kafka.
 *
 * Runs in a throwaway database created on the server of DATABASE_URL and migrated here. Rows that
 * admission and dispatch would write are inserted directly, with ids unique to each test.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { LateEvidence, ReconciliationRequiredV1, UsageSettledV1 } from '@gateway/contracts';
import {
  AttemptRepository,
  budgetAccountId,
  CaseRepository,
  Database,
  DispatchRepository,
  migrate,
  OutboxRepository,
  ReconciliationRepository,
  ReservationHoldRepository,
} from '@gateway/db';
import { KafkaBus, OutboxRelay } from '@gateway/messaging';
import { randomIds, RunningService } from '@gateway/service-kit';
import { eventually, Seeder } from '@gateway/testing';
import { startReconciliation } from '../src/app';
import { LATE_EVIDENCE_ACTOR, SettleLateEvidence } from '../src/usecases/import-usage/settle-late-evidence.usecase';
import { SweepReservations } from '../src/usecases/sweep-reservations/sweep-reservations.usecase';

const SERVER_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const BROKERS = process.env.KAFKA_BROKERS ?? '127.0.0.1:9092';
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const SWEEP = { intervalMs: 0, orphanGraceMs: 60_000, dispatchClockSkewMs: 2_000, batchSize: 500 };
const PERIOD = new Date('2026-11-01T00:00:00Z');
const MIN = 60_000;

function urlFor(database: string): string {
  const url = new URL(SERVER_URL);
  url.pathname = `/${database}`;
  url.searchParams.delete('schema');
  return url.toString();
}

/** The server's maintenance connection: DATABASE_URL's own database when it exists, else `postgres`. */
async function adminClient(): Promise<Client> {
  for (const candidate of [SERVER_URL, urlFor('postgres')]) {
    const c = new Client({ connectionString: candidate });
    try {
      await c.connect();
      return c;
    } catch {
      await c.end().catch(() => undefined);
    }
  }
  throw new Error(`cannot reach the Postgres server of ${SERVER_URL}`);
}

const dbName = `recon_int_${process.pid}_${randomBytes(4).toString('hex')}`;
const url = urlFor(dbName);
let db: Database;
let service: RunningService;
let bus: KafkaBus;
let operatorToken: string;
let financeToken: string;
const routeId = `route-${randomBytes(4).toString('hex')}`;
const priceId = `price-${routeId}-v1`;
const required: ReconciliationRequiredV1[] = [];
const settled: UsageSettledV1[] = [];

beforeAll(async () => {
  const admin = await adminClient();
  try {
    await admin.query(`CREATE DATABASE "${dbName}"`);
  } finally {
    await admin.end();
  }
  await migrate(url);
  db = new Database(url);
  const seed = new Seeder(db);
  await seed.route({
    routeId,
    alias: `alias-${routeId}`,
    providerKind: 'openai-chat',
    upstreamBaseUrl: 'http://127.0.0.1:1',
    upstreamModel: 'gpt-test',
  });
  operatorToken = await seed.operator('ops-anna', ['operator']);
  financeToken = await seed.operator('fin-bob', ['finance']);

  bus = new KafkaBus({ brokers: BROKERS.split(','), clientId: `recon-int-${process.pid}`, logger: quiet });
  await bus.connect();
  await bus.ensureTopics();
  await bus.subscribe('reconciliationRequired', { groupId: `recon-int-${randomUUID()}`, fromBeginning: false }, async (e) => {
    required.push(e);
  });
  await bus.subscribe('usageSettled', { groupId: `recon-int-${randomUUID()}`, fromBeginning: false }, async (e) => {
    settled.push(e);
  });

  service = await startReconciliation({
    ...process.env,
    DATABASE_URL: url,
    KAFKA_BROKERS: BROKERS,
    RECONCILIATION_PORT: '0',
    RECONCILIATION_SWEEP_MS: '0',
    RECONCILIATION_EXPORT_COMPLETE_GRACE_MS: String(MIN),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
  });
});

afterAll(async () => {
  await service?.close();
  await bus?.disconnect();
  await db?.close();
  const admin = await adminClient();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
});

// ------------------------------------------------------------------------------ fixtures

interface Scenario {
  workloadId: string;
  actionId: string;
  accountId: string;
  routeId: string;
}

/** What admission's transaction leaves behind: budget account hold, in-flight slot, action, reservation. */
async function admitted(opts: {
  reservedMicrousd: bigint;
  deadlineAt: Date;
  dispatchDeadlineAt: Date;
  workloadId?: string;
  budgetMicrousd?: bigint;
  route?: string;
}): Promise<Scenario> {
  const route = opts.route ?? routeId;
  const workloadId = opts.workloadId ?? `wl-${randomUUID()}`;
  const actionId = randomUUID();
  const accountId = budgetAccountId('workload', workloadId, PERIOD);
  const now = new Date();
  await db.prisma.budgetAccount.upsert({
    where: { id: accountId },
    create: {
      id: accountId,
      scope: 'workload',
      scopeId: workloadId,
      periodStart: PERIOD,
      budgetMicrousd: opts.budgetMicrousd ?? 1_000_000n,
      pendingMicrousd: opts.reservedMicrousd,
    },
    update: { pendingMicrousd: { increment: opts.reservedMicrousd } },
  });
  await db.prisma.quotaCounter.upsert({
    where: { scope_scopeId_windowStart_instanceId: { scope: 'workload', scopeId: workloadId, windowStart: new Date(0), instanceId: '' } },
    create: { scope: 'workload', scopeId: workloadId, windowStart: new Date(0), inFlight: 1 },
    update: { inFlight: { increment: 1 } },
  });
  await db.prisma.action.create({
    data: {
      id: actionId,
      requestId: `req-${actionId}`,
      workloadId,
      environment: 'dev',
      routeId: route,
      routeVersion: 1,
      modelAlias: `alias-${route}`,
      apiKind: 'openai-chat',
      streamMode: 'none',
      requestedCandidates: null,
      effectiveCandidates: 1,
      outputCeiling: 256,
      inputTokensEstimate: 100,
      requestFingerprint: randomUUID(),
      status: 'admitted',
      statusReason: 'admitted',
      deadlineAt: opts.deadlineAt,
      dispatchDeadlineAt: opts.dispatchDeadlineAt,
      createdAt: now,
      updatedAt: now,
    },
  });
  await db.prisma.reservation.create({
    data: {
      id: randomUUID(),
      actionId,
      workloadAccountId: accountId,
      reservedOutputTokens: 256,
      reservedMicrousd: opts.reservedMicrousd,
      priceRevisionId: `price-${route}-v1`,
      status: 'pending',
      statusReason: 'reserved at admission',
      createdAt: now,
      updatedAt: now,
    },
  });
  return { workloadId, actionId, accountId, routeId: route };
}

/** What dispatch's claim leaves behind when its process dies mid-call. */
async function inFlightAttempt(s: Scenario): Promise<string> {
  const attemptId = randomUUID();
  const now = new Date();
  await db.prisma.dispatchClaim.create({ data: { actionId: s.actionId, attemptNo: 1, claimedBy: 'dispatch-dead', claimedAt: now } });
  await db.prisma.attempt.create({
    data: {
      id: attemptId,
      actionId: s.actionId,
      attemptNo: 1,
      role: 'primary',
      routeId: s.routeId,
      routeVersion: 1,
      status: 'in_flight',
      statusReason: 'sent upstream',
      effectiveCandidates: 1,
      startedAt: now,
      updatedAt: now,
    },
  });
  await db.prisma.action.update({ where: { id: s.actionId }, data: { status: 'dispatched' } });
  return attemptId;
}

async function orphanedCase(reservedMicrousd: bigint, route = routeId): Promise<Scenario & { attemptId: string; caseId: string }> {
  const s = await admitted({
    route,
    reservedMicrousd,
    deadlineAt: new Date(Date.now() - 2 * MIN),
    dispatchDeadlineAt: new Date(Date.now() - 3 * MIN),
  });
  const attemptId = await inFlightAttempt(s);
  await sweeper().execute(new Date());
  const c = await db.prisma.reconciliationCase.findFirstOrThrow({ where: { attemptId } });
  return { ...s, attemptId, caseId: c.id };
}

/**
 * A sweeper with its own connection pool and outbox relay, like a second reconciliation instance:
 * it publishes its cases' events right after their commit (other relays' sweeps leave them to it
 * for the outbox lease).
 */
function sweeper(): SweepReservations {
  const own = new Database(url, { poolMax: 4 });
  opened.push(own);
  const outbox = new OutboxRepository(own);
  const relay = new OutboxRelay(outbox, bus, quiet);
  outbox.onCommittedAppend((rows) => relay.publishCommitted(rows));
  relays.push(relay);
  return new SweepReservations(
    new ReconciliationRepository(own),
    new CaseRepository(own, outbox),
    new ReservationHoldRepository(),
    new AttemptRepository(),
    SWEEP,
    randomIds,
    quiet,
  );
}
const opened: Database[] = [];
const relays: OutboxRelay[] = [];
afterAll(async () => {
  await Promise.all(relays.map((r) => r.stop()));
  await Promise.all(opened.map((d) => d.close()));
});

const account = (id: string) => db.prisma.budgetAccount.findUniqueOrThrow({ where: { id } });
const inFlight = async (workloadId: string) =>
  (
    await db.prisma.quotaCounter.findUniqueOrThrow({
      where: { scope_scopeId_windowStart_instanceId: { scope: 'workload', scopeId: workloadId, windowStart: new Date(0), instanceId: '' } },
    })
  ).inFlight;

async function http(method: 'GET' | 'POST', path: string, token: string | null, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${service.url}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
}

// ------------------------------------------------------------------------------ tests

describe('sweeper: admitted actions past their dispatch deadline', () => {
  it('two concurrent sweeps void the reservation exactly once and budget pending returns to 0', async () => {
    const s = await admitted({
      reservedMicrousd: 5_000n,
      deadlineAt: new Date(Date.now() - MIN),
      dispatchDeadlineAt: new Date(Date.now() - MIN),
    });
    expect((await account(s.accountId)).pendingMicrousd).toBe(5_000n);

    const now = new Date();
    const reports = await Promise.all([sweeper().execute(now), sweeper().execute(now)]);

    expect(reports.flatMap((r) => r.voidedActionIds).filter((id) => id === s.actionId)).toEqual([s.actionId]);
    const acct = await account(s.accountId);
    expect({ pending: acct.pendingMicrousd, unresolved: acct.unresolvedMicrousd, settled: acct.settledMicrousd }).toEqual({
      pending: 0n,
      unresolved: 0n,
      settled: 0n,
    });
    const r = await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: s.actionId } });
    expect(r).toMatchObject({ status: 'voided', releasedMicrousd: 5_000n, settledMicrousd: 0n, unresolvedMicrousd: 0n });
    expect((await db.prisma.action.findUniqueOrThrow({ where: { id: s.actionId } })).status).toBe('expired');
    expect(await inFlight(s.workloadId)).toBe(0);
  });

  it('many actions on one budget, three sweepers at once: each voided once, nothing left pending', async () => {
    const workloadId = `wl-${randomUUID()}`;
    const past = new Date(Date.now() - MIN);
    const scenarios: Scenario[] = [];
    for (let i = 0; i < 15; i++)
      scenarios.push(await admitted({ workloadId, reservedMicrousd: 1_000n + BigInt(i), deadlineAt: past, dispatchDeadlineAt: past }));
    const now = new Date();
    const reports = await Promise.all([sweeper().execute(now), sweeper().execute(now), sweeper().execute(now)]);
    const voided = reports.flatMap((r) => r.voidedActionIds).filter((id) => scenarios.some((s) => s.actionId === id));
    expect(voided.sort()).toEqual(scenarios.map((s) => s.actionId).sort());
    expect((await account(scenarios[0].accountId)).pendingMicrousd).toBe(0n);
    expect(await inFlight(workloadId)).toBe(0);
  });

  it('leaves an action whose dispatch deadline has not passed', async () => {
    const s = await admitted({
      reservedMicrousd: 700n,
      deadlineAt: new Date(Date.now() + MIN),
      dispatchDeadlineAt: new Date(Date.now() + MIN),
    });
    await sweeper().execute(new Date());
    expect((await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: s.actionId } })).status).toBe('pending');
    expect((await account(s.accountId)).pendingMicrousd).toBe(700n);
  });
});

describe('sweeper: attempts orphaned in flight', () => {
  it('opens an orphaned_attempt case with the pending hold as unresolved exposure and publishes reconciliation.required', async () => {
    const s = await admitted({
      reservedMicrousd: 9_000n,
      deadlineAt: new Date(Date.now() - 2 * MIN),
      dispatchDeadlineAt: new Date(Date.now() - 3 * MIN),
    });
    const attemptId = await inFlightAttempt(s);

    const reports = await Promise.all([sweeper().execute(new Date()), sweeper().execute(new Date())]);

    expect(reports.flatMap((r) => r.orphans).filter((o) => o.attemptId === attemptId)).toHaveLength(1);
    const cases = await db.prisma.reconciliationCase.findMany({ where: { attemptId } });
    expect(cases).toHaveLength(1);
    expect(cases[0]).toMatchObject({ reason: 'orphaned_attempt', status: 'open', exposureMicrousd: 9_000n });
    const acct = await account(s.accountId);
    expect({ pending: acct.pendingMicrousd, unresolved: acct.unresolvedMicrousd, settled: acct.settledMicrousd }).toEqual({
      pending: 0n,
      unresolved: 9_000n,
      settled: 0n,
    });
    expect(await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: s.actionId } })).toMatchObject({
      status: 'unresolved',
      unresolvedMicrousd: 9_000n,
    });
    expect(await db.prisma.attempt.findUniqueOrThrow({ where: { id: attemptId } })).toMatchObject({
      status: 'reconciliation_required',
      inputTokens: null,
      outputTokensTotal: null,
    });
    expect((await db.prisma.action.findUniqueOrThrow({ where: { id: s.actionId } })).status).toBe('failed');
    expect(await inFlight(s.workloadId)).toBe(0);

    const event = await eventually(() => required.find((e) => e.case_id === cases[0].id), { what: 'reconciliation.required on Kafka' });
    expect(event).toMatchObject({
      reason: 'orphaned_attempt',
      exposure_microusd: '9000',
      workload_id: s.workloadId,
      attempt_id: attemptId,
      input_tokens: null,
      usage_source: null,
    });
  });

  it('leaves an in-flight attempt alone within the grace period after its deadline', async () => {
    const s = await admitted({
      reservedMicrousd: 900n,
      deadlineAt: new Date(Date.now() - 10_000),
      dispatchDeadlineAt: new Date(Date.now() - 20_000),
    });
    const attemptId = await inFlightAttempt(s);
    await sweeper().execute(new Date());
    expect((await db.prisma.attempt.findUniqueOrThrow({ where: { id: attemptId } })).status).toBe('in_flight');
    expect(await db.prisma.reconciliationCase.count({ where: { attemptId } })).toBe(0);
  });

  it('an attempt in flight cannot carry an end: the sweep reads the unended attempts only (check attempt_in_flight_unended)', async () => {
    const s = await admitted({
      reservedMicrousd: 900n,
      deadlineAt: new Date(Date.now() - 2 * MIN),
      dispatchDeadlineAt: new Date(Date.now() - 3 * MIN),
    });
    const attemptId = await inFlightAttempt(s);
    await expect(db.prisma.attempt.update({ where: { id: attemptId }, data: { endedAt: new Date() } })).rejects.toThrow(
      /attempt_in_flight_unended/,
    );
    await sweeper().execute(new Date());
    expect(await db.prisma.reconciliationCase.count({ where: { attemptId, reason: 'orphaned_attempt' } })).toBe(1);
  });
});

describe('late evidence: dispatch held the usage of an attempt the orphan sweep had cut', () => {
  // Gemini's shape: output counted without its reasoning
  const evidence = (over: Partial<LateEvidence> = {}): LateEvidence => ({
    provider_request_id: `resp-${randomUUID()}`,
    usage_source: 'provider_response',
    output_includes_reasoning: false,
    input_tokens: 1000,
    cached_input_tokens: 200,
    output_tokens_total: 200,
    reasoning_tokens: 100,
    offered_at: new Date().toISOString(),
    ...over,
  });
  const settleLate = () => service.app.get(SettleLateEvidence, { strict: false }).execute(new Date(), 10);

  it('is offered to the open orphan case once, and settles it as the import would, the response as its source', async () => {
    const o = await orphanedCase(20_000n);
    const dispatchSide = new DispatchRepository(db, new OutboxRepository(db));
    const ev = evidence();
    expect(await dispatchSide.offerLateEvidence(o.attemptId, ev)).toBe(o.caseId);
    expect(await dispatchSide.offerLateEvidence(o.attemptId, evidence())).toBeNull(); // the first offer stands
    expect(await dispatchSide.offerLateEvidence(randomUUID(), ev)).toBeNull(); // no case for that attempt

    expect(await settleLate()).toBe(1);
    expect(await settleLate()).toBe(0);

    // 800 input 2000 + 200 cached 250 + 200 output 2000 + 100 reasoning 1000 (reasoning added to the output it excluded)
    expect(await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: o.attemptId } })).toMatchObject({
      usageSource: 'provider_response',
      providerRequestId: ev.provider_request_id,
      costMicrousd: 5_250n,
      priceRevisionId: priceId,
    });
    expect(await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: o.caseId } })).toMatchObject({
      status: 'resolved',
      resolvedBy: LATE_EVIDENCE_ACTOR,
      resolution: expect.stringContaining('after the orphan sweep'),
    });
    expect(await db.prisma.attempt.findUniqueOrThrow({ where: { id: o.attemptId } })).toMatchObject({ status: 'settled' });
    const acct = await account(o.accountId);
    expect({ pending: acct.pendingMicrousd, unresolved: acct.unresolvedMicrousd, settled: acct.settledMicrousd }).toEqual({
      pending: 0n,
      unresolved: 0n,
      settled: 5_250n,
    });
    await eventually(() => settled.find((e) => e.attempt_id === o.attemptId), { what: 'usage.settled for the late evidence' });
  });

  it('evidence the case refuses (another provider request) is set aside on the case, which stays open with its exposure', async () => {
    const o = await orphanedCase(20_000n);
    await db.prisma.reconciliationCase.update({ where: { id: o.caseId }, data: { providerRequestId: 'req-known' } });
    expect(await new CaseRepository(db, new OutboxRepository(db)).offerLateEvidence(o.attemptId, evidence())).toBe(o.caseId);

    expect(await settleLate()).toBe(0);

    const c = await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: o.caseId } });
    expect(c).toMatchObject({ status: 'open', lateEvidence: null });
    expect(c.details).toMatchObject({ late_evidence_not_used: { why: expect.stringMatching(/^provider_request_mismatch/) } });
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: o.attemptId } })).toBe(0);
    expect((await account(o.accountId)).unresolvedMicrousd).toBe(20_000n);
  });

  it('counts the ledger cannot hold are set aside in the pass, and the next case still settles', async () => {
    const huge = await orphanedCase(20_000n);
    const fine = await orphanedCase(20_000n);
    const cases = new CaseRepository(db, new OutboxRepository(db));
    // a provider reporting more output than the ledger's integer column holds (2^31 − 1)
    expect(await cases.offerLateEvidence(huge.attemptId, evidence({ output_tokens_total: 3_000_000_000 }))).toBe(huge.caseId);
    expect(await cases.offerLateEvidence(fine.attemptId, evidence())).toBe(fine.caseId);

    expect(await settleLate()).toBe(1);

    const c = await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: huge.caseId } });
    expect(c).toMatchObject({ status: 'open', lateEvidence: null });
    expect(c.details).toMatchObject({ late_evidence_not_used: { why: expect.stringMatching(/^refused: /) } });
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: huge.attemptId } })).toBe(0);
    expect((await account(huge.accountId)).unresolvedMicrousd).toBe(20_000n); // no money moved
    expect(await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: fine.caseId } })).toMatchObject({ status: 'resolved' });
  });

  it('evidence that no longer parses is set aside, not met again on every sweep', async () => {
    const o = await orphanedCase(20_000n);
    await db.prisma.reconciliationCase.update({ where: { id: o.caseId }, data: { lateEvidence: { input_tokens: 'many' } } });

    expect(await settleLate()).toBe(0);

    const c = await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: o.caseId } });
    expect(c).toMatchObject({ status: 'open', lateEvidence: null });
    expect(c.details).toMatchObject({
      late_evidence_not_used: { evidence: { input_tokens: 'many' }, why: expect.stringMatching(/^unreadable/) },
    });
  });
});

describe('HTTP: cases, usage import, operator release, exposure', () => {
  it('lists open cases of a workload for finance; refuses without a token', async () => {
    const o = await orphanedCase(4_000n);
    expect((await http('GET', `/cases?status=open&workload_id=${o.workloadId}`, null)).status).toBe(401);
    const res = await http('GET', `/cases?status=open&workload_id=${o.workloadId}`, financeToken);
    expect(res.status).toBe(200);
    expect(res.body.cases).toEqual([
      expect.objectContaining({
        case_id: o.caseId,
        action_id: o.actionId,
        attempt_id: o.attemptId,
        workload_id: o.workloadId,
        reason: 'orphaned_attempt',
        status: 'open',
        exposure_microusd: '4000',
      }),
    ]);
    expect((await http('GET', '/cases?status=closed', financeToken)).body.error.code).toBe('invalid_request');
  });

  it('import-usage settles the attempt at the reservation price, releases the rest and publishes usage.settled', async () => {
    const o = await orphanedCase(20_000n);
    const evidence = {
      provider_request_id: `chatcmpl-${randomUUID()}`,
      input_tokens: 1000,
      cached_input_tokens: 200,
      output_tokens_total: 300,
      reasoning_tokens: 100,
    };

    const res = await http('POST', `/cases/${o.caseId}/import-usage`, financeToken, evidence);

    // $2.50/$1.25/$10/$10 per MTok: 800 input 2000 + 200 cached 250 + 200 output 2000 + 100 reasoning 1000
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      case_id: o.caseId,
      cost_microusd: '5250',
      settled_microusd: '5250',
      released_microusd: '14750',
      overrun_microusd: '0',
      price_revision: priceId,
      reservation_status: 'settled',
    });
    const acct = await account(o.accountId);
    expect({ pending: acct.pendingMicrousd, unresolved: acct.unresolvedMicrousd, settled: acct.settledMicrousd }).toEqual({
      pending: 0n,
      unresolved: 0n,
      settled: 5_250n,
    });
    expect(await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: o.attemptId } })).toMatchObject({
      usageSource: 'provider_export',
      costMicrousd: 5_250n,
      priceRevisionId: priceId,
      inputTokens: 1000,
      outputTokensTotal: 300,
    });
    expect(await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: o.actionId } })).toMatchObject({
      status: 'settled',
      settledMicrousd: 5_250n,
      unresolvedMicrousd: 0n,
      releasedMicrousd: 14_750n,
    });
    expect(await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: o.caseId } })).toMatchObject({
      status: 'resolved',
      resolvedBy: 'fin-bob',
    });
    expect(await db.prisma.attempt.findUniqueOrThrow({ where: { id: o.attemptId } })).toMatchObject({
      status: 'settled',
      usageSource: 'provider_export',
      inputTokens: 1000,
    });

    const event = await eventually(() => settled.find((e) => e.attempt_id === o.attemptId), { what: 'usage.settled on Kafka' });
    expect(event).toMatchObject({
      request_id: `req-${o.actionId}`,
      usage_source: 'provider_export',
      cost_microusd: '5250',
      provider_request_id: evidence.provider_request_id,
      total_tokens: 1300,
      workload_id: o.workloadId,
    });

    const again = await http('POST', `/cases/${o.caseId}/import-usage`, financeToken, evidence);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('case_already_resolved');
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: o.attemptId } })).toBe(1);
  });

  it('import-usage rejects incomplete evidence: a missing count is not zero', async () => {
    const o = await orphanedCase(1_000n);
    const res = await http('POST', `/cases/${o.caseId}/import-usage`, operatorToken, {
      provider_request_id: 'x',
      input_tokens: 10,
      cached_input_tokens: 0,
      output_tokens_total: 5,
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', param: 'reasoning_tokens' });
    expect(
      (
        await http('POST', `/cases/${randomUUID()}/import-usage`, operatorToken, {
          provider_request_id: 'x',
          input_tokens: 1,
          cached_input_tokens: 0,
          output_tokens_total: 1,
          reasoning_tokens: 0,
        })
      ).status,
    ).toBe(404);
  });

  it('operator release requires the operator role and a reason, then books the attested amount in the ledger', async () => {
    const o = await orphanedCase(6_000n);

    expect((await http('POST', `/cases/${o.caseId}/release`, financeToken, { reason: 'not billed' })).status).toBe(403);
    const noReason = await http('POST', `/cases/${o.caseId}/release`, operatorToken, {});
    expect(noReason.status).toBe(400);
    expect(noReason.body.error).toMatchObject({ code: 'invalid_request', param: 'reason' });
    expect((await http('POST', `/cases/${o.caseId}/release`, operatorToken, { reason: '' })).status).toBe(400);
    expect((await account(o.accountId)).unresolvedMicrousd).toBe(6_000n);

    const res = await http('POST', `/cases/${o.caseId}/release`, operatorToken, {
      reason: 'provider dashboard shows the request at 1500',
      amount_microusd: '1500',
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      case_id: o.caseId,
      usage_source: 'operator_release',
      settled_microusd: '1500',
      released_microusd: '4500',
      resolved_by: 'ops-anna',
      reservation_status: 'settled',
    });
    const acct = await account(o.accountId);
    expect({ pending: acct.pendingMicrousd, unresolved: acct.unresolvedMicrousd, settled: acct.settledMicrousd }).toEqual({
      pending: 0n,
      unresolved: 0n,
      settled: 1_500n,
    });
    expect(await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: o.caseId } })).toMatchObject({
      status: 'resolved',
      resolvedBy: 'ops-anna',
      resolution: 'provider dashboard shows the request at 1500',
    });
    expect(await db.prisma.attempt.findUniqueOrThrow({ where: { id: o.attemptId } })).toMatchObject({
      status: 'settled',
      usageSource: 'operator_release',
      financialState: 'settled',
      inputTokens: null,
    });
    expect(await db.prisma.reservation.findUniqueOrThrow({ where: { actionId: o.actionId } })).toMatchObject({ status: 'settled' });
    expect(await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: o.attemptId } })).toMatchObject({
      usageSource: 'operator_release',
      costMicrousd: 1_500n,
      inputTokens: null,
      inputMicrousd: null,
      caseId: o.caseId,
      attestedBy: 'ops-anna',
      attestationReason: 'provider dashboard shows the request at 1500',
      requestId: `req-${o.actionId}`,
    });
    const event = await eventually(() => settled.find((e) => e.attempt_id === o.attemptId), { what: 'usage.settled on Kafka' });
    expect(event).toMatchObject({
      request_id: `req-${o.actionId}`,
      usage_source: 'operator_release',
      cost_microusd: '1500',
      cost_microusd_by_category: null,
      input_tokens: null,
    });
    expect((await http('POST', `/cases/${o.caseId}/release`, operatorToken, { reason: 'twice' })).body.error.code).toBe(
      'case_already_resolved',
    );
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: o.attemptId } })).toBe(1);
  });

  it('exposure shows settled, unresolved and pending per account as separate integer strings', async () => {
    const workloadId = `wl-${randomUUID()}`;
    const open = await admitted({
      workloadId,
      reservedMicrousd: 3_000n,
      deadlineAt: new Date(Date.now() + MIN),
      dispatchDeadlineAt: new Date(Date.now() + MIN),
      budgetMicrousd: 50_000n,
    });
    const orphan = await admitted({
      workloadId,
      reservedMicrousd: 2_000n,
      deadlineAt: new Date(Date.now() - 2 * MIN),
      dispatchDeadlineAt: new Date(Date.now() - 3 * MIN),
    });
    await inFlightAttempt(orphan);
    await sweeper().execute(new Date());

    const res = await http('GET', `/exposure?workload_id=${workloadId}`, financeToken);

    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      workload_id: workloadId,
      accounts: [
        {
          account_id: open.accountId,
          scope: 'workload',
          scope_id: workloadId,
          period_start: PERIOD.toISOString(),
          settled_microusd: '0',
          unresolved_microusd: '2000',
          pending_microusd: '3000',
          budget_microusd: '50000',
          updated_at: expect.any(String),
        },
      ],
    });
  });

  it('publishes an OpenAPI document with the reconciliation operations', async () => {
    const paths = Object.keys(service.openapi.paths);
    expect(paths).toEqual(expect.arrayContaining(['/cases', '/cases/{id}/import-usage', '/cases/{id}/release', '/exposure']));
  });
});

describe('HTTP: bulk provider usage export (issue 15)', () => {
  const usage = (input: number, output: number) => ({
    input_tokens: input,
    cached_input_tokens: 0,
    output_tokens_total: output,
    reasoning_tokens: 0,
  });
  const counts = async (attemptIds: string[]) => ({
    ledger: await db.prisma.ledgerEntry.count({ where: { attemptId: { in: attemptIds } } }),
    cases: await db.prisma.reconciliationCase.count({ where: { attemptId: { in: attemptIds } } }),
  });

  it('resolves cases, lists what matches nothing, refuses bad lines; the same export again changes nothing; a disagreeing line opens one case', async () => {
    const a = await orphanedCase(20_000n);
    const b = await orphanedCase(20_000n);
    const ghost = `chatcmpl-ghost-${randomUUID()}`;
    const reqA = `chatcmpl-${randomUUID()}`;
    const reqB = `chatcmpl-${randomUUID()}`;
    const jsonl = [
      JSON.stringify({ provider_request_id: reqA, client_request_id: a.attemptId, ...usage(1000, 300), model: 'gpt-test' }),
      JSON.stringify({ provider_request_id: reqB, client_request_id: b.attemptId, ...usage(400, 100) }),
      JSON.stringify({ provider_request_id: ghost, ...usage(500, 120) }),
      JSON.stringify({ provider_request_id: `chatcmpl-${randomUUID()}`, input_tokens: 5, cached_input_tokens: 0, output_tokens_total: 1 }),
      '{not json',
    ].join('\n');

    const first = await http('POST', '/usage-exports', financeToken, { format: 'jsonl', content: jsonl });
    expect(first.status).toBe(200);
    // $2.50 / $10 per MTok: A = 2,500 + 3,000; B = 1,000 + 1,000
    expect(first.body).toMatchObject({
      lines: 5,
      counts: { resolved: 2, confirmed: 0, mismatch: 0, pending: 0, unmatched: 1, refused: 0, invalid: 2 },
      export_cost_microusd: '7500',
      ledger_cost_microusd: '7500',
      unmatched_tokens: { input: 500, output: 120 },
      invalid: [
        { line: 4, param: 'reasoning_tokens', message: expect.any(String) },
        { line: 5, param: '', message: expect.stringMatching(/not valid JSON/) },
      ],
    });
    expect(first.body.results.find((r: { provider_request_id: string }) => r.provider_request_id === ghost)).toMatchObject({
      outcome: 'unmatched',
      attempt_id: null,
    });
    expect(await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: a.attemptId } })).toMatchObject({
      usageSource: 'provider_export',
      providerRequestId: reqA,
      costMicrousd: 5_500n,
    });
    expect(await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: b.caseId } })).toMatchObject({ status: 'resolved' });
    const before = { ...(await counts([a.attemptId, b.attemptId])), account: await account(a.accountId) };

    const again = await http('POST', '/usage-exports', operatorToken, { format: 'jsonl', content: jsonl });
    expect(again.body.counts).toEqual({ resolved: 0, confirmed: 2, mismatch: 0, pending: 0, unmatched: 1, refused: 0, invalid: 2 });
    expect({ ...(await counts([a.attemptId, b.attemptId])), account: await account(a.accountId) }).toEqual(before);

    // The provider's CSV says A produced 50 more output tokens than the ledger holds: a case, not a correction.
    const csv = [
      'provider_request_id,input_tokens,cached_input_tokens,output_tokens_total,reasoning_tokens,model',
      `${reqA},1000,0,350,0,"gpt-test"`,
    ].join('\n');
    const disagree = await http('POST', '/usage-exports', financeToken, { format: 'csv', content: csv });
    expect(disagree.body.counts).toMatchObject({ mismatch: 1, confirmed: 0 });
    expect(disagree.body.results[0]).toMatchObject({ outcome: 'mismatch', export_cost_microusd: '6000', ledger_cost_microusd: '5500' });
    const mismatch = await db.prisma.reconciliationCase.findFirstOrThrow({ where: { attemptId: a.attemptId, reason: 'export_mismatch' } });
    expect(mismatch).toMatchObject({ status: 'open', exposureMicrousd: 500n, providerRequestId: reqA });
    expect(await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: a.attemptId } })).toMatchObject({ costMicrousd: 5_500n });
    const event = await eventually(() => required.find((e) => e.case_id === mismatch.id), {
      what: 'reconciliation.required for the mismatch',
    });
    expect(event).toMatchObject({ reason: 'export_mismatch', exposure_microusd: '500', attempt_id: a.attemptId });
    await http('POST', '/usage-exports', financeToken, { format: 'csv', content: csv });
    expect(await db.prisma.reconciliationCase.count({ where: { attemptId: a.attemptId, reason: 'export_mismatch' } })).toBe(1);
  });

  it("a line's client request id (the attempt id the gateway sent) decides its attempt over a provider id another attempt also has", async () => {
    const other = await orphanedCase(20_000n);
    const mine = await orphanedCase(20_000n);
    const shared = `req_sim_${randomUUID().slice(0, 4)}`;
    // another provider (or a second simulator process) handed out the same request id
    await db.prisma.attempt.update({ where: { id: other.attemptId }, data: { providerRequestId: shared } });
    const line = JSON.stringify({ provider_request_id: shared, client_request_id: mine.attemptId, ...usage(400, 100) });
    const res = await http('POST', '/usage-exports', financeToken, { format: 'jsonl', content: line });
    expect(res.status).toBe(200);
    expect(res.body.results[0]).toMatchObject({ outcome: 'resolved', attempt_id: mine.attemptId });
    expect(await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: mine.caseId } })).toMatchObject({ status: 'resolved' });
    expect(await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: other.caseId } })).toMatchObject({ status: 'open' });
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: other.attemptId } })).toBe(0);
  });

  it('refuses a body that is not an export (400 naming the field) and an unknown column on its line', async () => {
    const bad = await http('POST', '/usage-exports', financeToken, { format: 'xml', content: 'x' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', param: 'format' });
    const typo = await http('POST', '/usage-exports', financeToken, {
      format: 'csv',
      content: 'provider_request_id,input_tokens,cached_input_tokens,output_tokens,reasoning_tokens\nx,1,0,1,0',
    });
    expect(typo.status).toBe(200);
    expect(typo.body.counts.invalid).toBe(1);
    expect(typo.body.invalid[0]).toMatchObject({ line: 2 });
    expect((await http('POST', '/usage-exports', null, { format: 'csv', content: 'x' })).status).toBe(401);
    // hostile lines: 1e999, a NUL in an id, another spelling of a count, a 10k-deep value — each refused
    // on its line (nothing matched, nothing written), never a 500
    const good = {
      provider_request_id: `chatcmpl-hostile-${randomUUID()}`,
      input_tokens: 1,
      cached_input_tokens: 0,
      output_tokens_total: 1,
      reasoning_tokens: 0,
    };
    const lines = [
      JSON.stringify(good).replace('"input_tokens":1', '"input_tokens":1e999'),
      JSON.stringify({ ...good, provider_request_id: 'chatcmpl-\u0000x' }),
      JSON.stringify(good).replace('"output_tokens_total"', '"outputTokensTotal"'),
      JSON.stringify(good).replace('"reasoning_tokens":0', `"reasoning_tokens":${'['.repeat(10_000)}${']'.repeat(10_000)}`),
    ].join('\n');
    const casesBefore = await db.prisma.reconciliationCase.count();
    const hostile = await http('POST', '/usage-exports', financeToken, { format: 'jsonl', content: lines });
    expect(hostile.status).toBe(200);
    expect(hostile.body.counts).toMatchObject({ invalid: 4, unmatched: 0, resolved: 0, mismatch: 0 });
    expect(hostile.body.invalid.map((i: { line: number }) => i.line)).toEqual([1, 2, 3, 4]);
    expect(await db.prisma.reconciliationCase.count()).toBe(casesBefore);
    // a body that is itself 10k deep is refused before it is read
    const deepBody = await fetch(`${service.url}/usage-exports`, {
      method: 'POST',
      headers: { authorization: `Bearer ${financeToken}`, 'content-type': 'application/json' },
      body: `{"format":"jsonl","content":${'['.repeat(10_000)}${']'.repeat(10_000)}}`,
    });
    expect(deepBody.status).toBe(400);
  });

  it('an export stated complete settles at zero the ended unresolved attempts it has no line for, once; a later line opens a mismatch', async () => {
    // a route of its own, so the statement covers only this test's attempts
    const route = `route-done-${randomBytes(4).toString('hex')}`;
    await new Seeder(db).route({
      routeId: route,
      alias: `alias-${route}`,
      providerKind: 'openai-chat',
      upstreamBaseUrl: 'http://127.0.0.1:1',
      upstreamModel: 'gpt-test',
    });
    const billed = await orphanedCase(20_000n, route);
    const silent = await orphanedCase(30_000n, route);
    const fresh = await orphanedCase(10_000n, route);
    const elsewhere = await orphanedCase(10_000n);
    const stillFlying = await admitted({
      route,
      reservedMicrousd: 5_000n,
      deadlineAt: new Date(Date.now() + MIN),
      dispatchDeadlineAt: new Date(Date.now() + MIN),
    });
    const flying = await inFlightAttempt(stillFlying);
    // ended over a minute ago (the grace), apart from `fresh`
    const past = new Date(Date.now() - 2 * MIN);
    await db.prisma.reconciliationCase.updateMany({
      where: { id: { in: [billed.caseId, silent.caseId, elsewhere.caseId] } },
      data: { openedAt: past },
    });
    const day = new Date().toISOString().slice(0, 10);
    const reqBilled = `chatcmpl-${randomUUID()}`;
    const content = JSON.stringify({ provider_request_id: reqBilled, client_request_id: billed.attemptId, ...usage(1000, 300) });
    const digest = `sha256:${'ab'.repeat(32)}`;
    const complete = { day, routes: [route], export_digest: digest };

    const first = await http('POST', '/usage-exports', financeToken, { format: 'jsonl', content, complete });
    expect(first.status).toBe(200);
    expect(first.body.counts).toMatchObject({ resolved: 1 });
    expect(first.body.completion).toMatchObject({
      day,
      route_ids: [route],
      export_digest: digest,
      stated_by: 'fin-bob',
      within_grace: 1,
      refused: [],
      settled_at_zero: [
        { attempt_id: silent.attemptId, case_id: silent.caseId, case_reason: 'orphaned_attempt', released_microusd: '30000' },
      ],
    });
    // zero usage, evidence provider_export, the statement named on the resolved case; the hold released whole
    expect(await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: silent.attemptId } })).toMatchObject({
      usageSource: 'provider_export',
      inputTokens: 0,
      outputTokensTotal: 0,
      costMicrousd: 0n,
    });
    const resolved = await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: silent.caseId } });
    expect(resolved).toMatchObject({
      status: 'resolved',
      resolvedBy: 'fin-bob',
      resolution: expect.stringContaining(first.body.completion.statement_id),
    });
    expect(resolved.details).toMatchObject({
      export_completion_id: first.body.completion.statement_id,
      export_digest: digest,
      export_day: day,
      settled_microusd: '0',
    });
    expect(await account(silent.accountId)).toMatchObject({ unresolvedMicrousd: 0n, settledMicrousd: 0n, pendingMicrousd: 0n });
    const zeroEvent = await eventually(() => settled.find((e) => e.attempt_id === silent.attemptId), { what: 'usage.settled at zero' });
    expect(zeroEvent).toMatchObject({ cost_microusd: '0', usage_source: 'provider_export' });
    // not taken: within the grace, another route, still in flight
    for (const c of [fresh.caseId, elsewhere.caseId])
      expect((await db.prisma.reconciliationCase.findUniqueOrThrow({ where: { id: c } })).status).toBe('open');
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: { in: [fresh.attemptId, elsewhere.attemptId, flying] } } })).toBe(0);

    // the same statement again: recorded once (its first author kept), nothing settled again
    const again = await http('POST', '/usage-exports', operatorToken, { format: 'jsonl', content, complete });
    expect(again.body.completion).toMatchObject({
      statement_id: first.body.completion.statement_id,
      stated_by: 'fin-bob',
      settled_at_zero: [],
    });
    expect(await db.prisma.usageExportCompletion.count({ where: { routeIds: { equals: [route] } } })).toBe(1);
    expect(await db.prisma.ledgerEntry.count({ where: { attemptId: silent.attemptId } })).toBe(1);

    // a later line for the attempt settled at zero: a mismatch case, never a silent correction
    const late = JSON.stringify({
      provider_request_id: `chatcmpl-${randomUUID()}`,
      client_request_id: silent.attemptId,
      ...usage(400, 100),
    });
    const later = await http('POST', '/usage-exports', financeToken, { format: 'jsonl', content: late });
    expect(later.body.results[0]).toMatchObject({ outcome: 'mismatch', ledger_cost_microusd: '0', export_cost_microusd: '2000' });
    expect(
      await db.prisma.reconciliationCase.findFirstOrThrow({ where: { attemptId: silent.attemptId, reason: 'export_mismatch' } }),
    ).toMatchObject({
      status: 'open',
      exposureMicrousd: 2_000n,
    });
    expect(await db.prisma.ledgerEntry.findUniqueOrThrow({ where: { attemptId: silent.attemptId } })).toMatchObject({ costMicrousd: 0n });
  });

  it('refuses a statement for a day that has not begun, without routes, or with an unreadable line (400 naming the field)', async () => {
    const content = JSON.stringify({ provider_request_id: `chatcmpl-${randomUUID()}`, ...usage(1, 1) });
    const tomorrow = new Date(Date.now() + 26 * 3_600_000).toISOString().slice(0, 10);
    const future = await http('POST', '/usage-exports', financeToken, {
      format: 'jsonl',
      content,
      complete: { day: tomorrow, routes: [routeId] },
    });
    expect(future.status).toBe(400);
    expect(future.body.error).toMatchObject({ code: 'invalid_request', param: 'complete.day' });
    const none = await http('POST', '/usage-exports', financeToken, {
      format: 'jsonl',
      content,
      complete: { day: '2026-12-01', routes: [] },
    });
    expect(none.status).toBe(400);
    expect(none.body.error).toMatchObject({ code: 'invalid_request', param: 'complete.routes' });
    const withInvalid = await http('POST', '/usage-exports', financeToken, {
      format: 'jsonl',
      content: `${content}\n{not json`,
      complete: { day: '2026-12-01', routes: [routeId] },
    });
    expect(withInvalid.status).toBe(400);
    expect(withInvalid.body.error).toMatchObject({ code: 'invalid_request', param: 'complete' });
    const notADay = await http('POST', '/usage-exports', financeToken, {
      format: 'jsonl',
      content,
      complete: { day: '2026-13-01', routes: [routeId] },
    });
    expect(notADay.body.error).toMatchObject({ code: 'invalid_request', param: 'complete.day' });
  });
});
