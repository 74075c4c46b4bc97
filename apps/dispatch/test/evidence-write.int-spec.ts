/**
 * Issue 7 item 6 (usage lost when the attempt write timed out): the write of an attempt's outcome
 * is retried until it lands, and a run after one that committed unseen is harmless. Real Postgres;
 * the completion's connection is terminated by a second client while it waits for a row lock.
 */
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import pino from 'pino';
import { InvalidTransitionError } from '@gateway/domain';
import { AttemptOutcome, Database, DispatchRepository, OutboxRepository } from '@gateway/db';
import { eventually, insertAdmittedAction, primaryClaim, succeededOutcome } from '@gateway/testing';
import { recordEvidence } from '../src/usecases/run-attempt/record-evidence';

const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';
const log = pino({ level: 'silent' });

describe('the attempt evidence write', () => {
  const db = new Database(url, { poolMax: 4 });
  const repo = new DispatchRepository(db, new OutboxRepository(db));
  const admin = new Client({ connectionString: url });

  beforeAll(() => admin.connect());
  afterAll(async () => {
    await admin.end();
    await db.close();
  });

  async function inFlightAttempt(): Promise<AttemptOutcome> {
    const workloadId = `evidence-${randomUUID()}`;
    const actionId = await insertAdmittedAction(db, { workloadId, deadline: new Date(Date.now() + 60_000) });
    const attemptId = randomUUID();
    const now = new Date();
    const claim = await repo.claim(primaryClaim(actionId, attemptId, now));
    expect(claim).toEqual({ ok: true });
    return succeededOutcome({ actionId, attemptId, workloadId, now });
  }

  async function recordedOnce(o: AttemptOutcome): Promise<void> {
    expect(await db.prisma.attempt.findUniqueOrThrow({ where: { id: o.attemptId } })).toMatchObject({
      status: 'succeeded',
      inputTokens: 5,
      outputTokensTotal: 7,
      usageSource: 'provider_response',
    });
    expect((await db.prisma.action.findUniqueOrThrow({ where: { id: o.actionId } })).status).toBe('answered');
    expect(await db.prisma.outboxMessage.count({ where: { key: o.event.workload_id ?? o.actionId } })).toBe(1);
  }

  it('lands exactly once although its connection is terminated four times (more than a transaction retries itself)', async () => {
    const o = await inFlightAttempt();
    const locker = new Client({ connectionString: url });
    await locker.connect();
    try {
      // Hold the attempt row so each completion run waits on it, where it can be terminated.
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM attempt WHERE id = $1 FOR UPDATE', [o.attemptId]);
      const stopping = new AbortController();
      const write = recordEvidence(repo, o, { baseMs: 10, capMs: 40, stopping: stopping.signal }, log);
      for (let i = 0; i < 4; i++) {
        await eventually(
          async () => {
            const r = await admin.query<{ n: number }>(
              `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
               WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%dispatch_complete_group%'
                 AND pid <> pg_backend_pid()`,
            );
            return r.rows[0].n > 0 ? true : undefined;
          },
          { intervalMs: 10, what: `completion run ${i + 1} waiting on the lock` },
        );
      }
      await locker.query('COMMIT');
      await expect(write).resolves.toBe('recorded');
    } finally {
      await locker.end();
    }
    await recordedOnce(o);
  });

  it('an attempt ends once: a different outcome is refused and writes nothing', async () => {
    const o = await inFlightAttempt();
    await repo.complete(o);
    const other = succeededOutcome({ actionId: o.actionId, attemptId: o.attemptId, workloadId: o.event.workload_id ?? '', now: o.now });
    await expect(repo.complete(other)).rejects.toBeInstanceOf(InvalidTransitionError);
    await recordedOnce(o);
  });

  it('an action that has already ended refuses the answer, and the attempt, the in-flight slot and the outbox stay as they were', async () => {
    const o = await inFlightAttempt();
    const workloadId = o.event.workload_id ?? '';
    await db.prisma.quotaCounter.create({ data: { scope: 'workload', scopeId: workloadId, windowStart: new Date(0), inFlight: 1 } });
    // The reconciliation sweeper expired the action while the attempt was still in flight.
    await db.prisma.action.update({ where: { id: o.actionId }, data: { status: 'expired' } });
    await expect(repo.complete(o)).rejects.toBeInstanceOf(InvalidTransitionError);
    expect((await db.prisma.attempt.findUniqueOrThrow({ where: { id: o.attemptId } })).status).toBe('in_flight');
    expect(await db.prisma.outboxMessage.count({ where: { eventId: o.event.event_id } })).toBe(0);
    const slot = await db.prisma.quotaCounter.findFirstOrThrow({ where: { scope: 'workload', scopeId: workloadId } });
    expect(slot.inFlight).toBe(1);
  });

  it('the completion of a winner that ends its action records it as the winner unless one is recorded; a non-winner records none', async () => {
    const winnerOf = async (actionId: string) => (await db.prisma.action.findUniqueOrThrow({ where: { id: actionId } })).winnerAttemptId;
    // an action without a hedge policy: no compare-and-set ran, the completion is the winner's record
    const single = await inFlightAttempt();
    await repo.complete({ ...single, event: { ...single.event, winner: true } });
    expect(await winnerOf(single.actionId)).toBe(single.attemptId);
    // the last failure (or an answer that failed acceptance) ends the action without a winner
    const loser = await inFlightAttempt();
    await repo.complete({ ...loser, event: { ...loser.event, winner: false } });
    expect(await winnerOf(loser.actionId)).toBeNull();
    // a winner chosen by the compare-and-set before is kept
    const raced = await inFlightAttempt();
    await db.prisma.action.update({ where: { id: raced.actionId }, data: { winnerAttemptId: 'chosen-before' } });
    await repo.complete({ ...raced, event: { ...raced.event, winner: true } });
    expect(await winnerOf(raced.actionId)).toBe('chosen-before');
  });

  it('a run after one that committed unseen (an ambiguous commit) is recognised as recorded and writes nothing', async () => {
    const o = await inFlightAttempt();
    await expect(repo.complete(o)).resolves.toBe('recorded');
    const stopping = new AbortController();
    await expect(recordEvidence(repo, o, { baseMs: 10, capMs: 40, stopping: stopping.signal }, log)).resolves.toBe('already_recorded');
    await recordedOnce(o);
  });
});
