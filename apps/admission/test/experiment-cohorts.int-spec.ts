import { randomUUID } from 'node:crypto';
import { Topics } from '@gateway/contracts';
import { AdmissionRepository, Database, ExperimentRepository, LedgerRepository, OutboxRepository } from '@gateway/db';
import type { OutboxRow } from '@gateway/messaging';
import { assignCohort, Experiment, experimentReport, startedExperiment } from '@gateway/domain';
import { admitInput, experimentDesign, ledgerRow } from '@gateway/testing';

/**
 * The experiment's records on the real Postgres (issue 11): admission's statement (alone and in a
 * group) writes the action's experiment and cohort; every attempt and ledger row copies the
 * action's cohort (trigger), the settled event carries it; and the report's rows, read back by
 * `ExperimentRepository.reportRows`, give the figures computed by hand.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('experiment cohorts and the report rows', () => {
  const db = new Database(url, { poolMax: 10 });
  const outbox = new OutboxRepository(db);
  const alone = new AdmissionRepository(db, outbox, { groupCommit: false });
  const grouped = new AdmissionRepository(db, outbox);
  const ledger = new LedgerRepository(outbox);
  const sentAtOnce: OutboxRow[] = [];
  outbox.onCommittedAppend((rows) => sentAtOnce.push(...rows));
  const experiments = new ExperimentRepository(db, outbox);
  const periodStart = new Date('2026-11-01T00:00:00Z');

  afterAll(() => db.close());

  const experimentId = randomUUID();
  const workloadId = `xc-${experimentId}`;
  const experiment: Experiment = startedExperiment(
    {
      ...experimentDesign('hp', { holdout_share_bps: 5_000, useful_deadline_ms: 1_000, overhead_microusd_per_attempt: '5', seed: 3 }),
      id: experimentId,
      workloadId,
      requestedBy: 'a',
      approvedBy: 'b',
      reason: 'r',
    },
    1_000_000n,
    new Date(),
  );

  /** Admits `n` actions (half one at a time, half concurrently: the group statement) with their cohort, plus `ineligible` ones. */
  async function admitAll(n: number, ineligible: number): Promise<Map<string, string>> {
    const cohorts = new Map<string, string>();
    const one = (cohortFor: (actionId: string) => 'hedged' | 'holdout' | 'ineligible') => {
      const base = admitInput(workloadId, { workloadBudget: { budgetMicrousd: 10_000_000n, periodStart } });
      const cohort = cohortFor(base.action.id);
      cohorts.set(base.action.id, cohort);
      return { ...base, action: { ...base.action, experimentId, cohort } };
    };
    const assigned = (id: string) => assignCohort(experimentId, id, experiment.holdoutShareBps);
    for (let i = 0; i < n / 2; i++) expect(await alone.admit(one(assigned))).toEqual({ ok: true });
    const results = await Promise.all(Array.from({ length: n / 2 }, () => grouped.admit(one(assigned))));
    expect(results.every((r) => r.ok)).toBe(true);
    for (let i = 0; i < ineligible; i++) expect(await alone.admit(one(() => 'ineligible'))).toEqual({ ok: true });
    return cohorts;
  }

  it('records the cohort on the action, every attempt, the ledger row and the settled event; the report rows add up', async () => {
    const cohorts = await admitAll(40, 3);
    const actions = await db.prisma.action.findMany({
      where: { workloadId },
      select: { id: true, experimentId: true, cohort: true, createdAt: true },
    });
    expect(actions).toHaveLength(43);
    for (const a of actions) expect(a).toMatchObject({ experimentId, cohort: cohorts.get(a.id) });

    // each action: a primary answering on time (odd actions late), hedged ones a second attempt left unsettled
    const expected = { hedged: { n: 0, k: 0, cost: 0n, unresolved: 0n }, holdout: { n: 0, k: 0, cost: 0n, unresolved: 0n } };
    let i = 0;
    const answeredAtOf = new Map<string, Date>();
    for (const a of actions) {
      const cohort = cohorts.get(a.id)!;
      const primary = randomUUID();
      const answeredAt = new Date(a.createdAt.getTime() + (i++ % 2 === 0 ? 400 : 1_400));
      answeredAtOf.set(a.id, answeredAt);
      const now = new Date();
      const attempt = (id: string, no: number, role: string, hold: bigint) =>
        db.prisma.attempt.create({
          data: {
            id,
            actionId: a.id,
            attemptNo: no,
            role,
            routeId: 'r',
            routeVersion: 1,
            status: 'succeeded',
            statusReason: 'answered',
            effectiveCandidates: 1,
            holdMicrousd: hold,
            startedAt: a.createdAt,
            endedAt: answeredAt,
            updatedAt: now,
          },
        });
      await attempt(primary, 1, 'primary', 1_000n);
      if (cohort === 'hedged') await attempt(randomUUID(), 2, 'hedge', 700n);
      await db.prisma.action.update({ where: { id: a.id }, data: { winnerAttemptId: primary, acceptanceVerdict: 'valid' } });
      const row = {
        ...ledgerRow({ workloadId, routeId: 'r', priceRevisionId: 'p', settledAt: now }),
        attemptId: primary,
        actionId: a.id,
      };
      await db.transaction((tx) => ledger.record(tx, row, randomUUID()));
      if (cohort === 'ineligible') continue;
      const e = expected[cohort as 'hedged' | 'holdout'];
      e.n += 1;
      if (answeredAt.getTime() - a.createdAt.getTime() <= 1_000) e.k += 1;
      e.cost += row.costMicrousd + 5n * (cohort === 'hedged' ? 2n : 1n);
      if (cohort === 'hedged') e.unresolved += 700n;
    }

    const attempts = await db.prisma.attempt.findMany({
      where: { actionId: { in: actions.map((a) => a.id) } },
      select: { actionId: true, cohort: true },
    });
    for (const t of attempts) expect(t.cohort).toBe(cohorts.get(t.actionId));
    const rows = await db.prisma.ledgerEntry.findMany({ where: { workloadId }, select: { actionId: true, cohort: true } });
    expect(rows).toHaveLength(43);
    for (const r of rows) expect(r.cohort).toBe(cohorts.get(r.actionId));
    // as a sweep publishes them, built from the ledger rows; the same as the writer's relay sent at once
    const events = (await outbox.waitingMessages('usageSettled')).filter((m) => m.key === workloadId);
    expect(events).toHaveLength(43);
    expect(events.map((m) => JSON.parse(JSON.stringify(m.payload)))).toEqual(
      sentAtOnce.filter((m) => m.key === workloadId && m.topic === Topics.usageSettled.name).map((m) => JSON.parse(m.json as string)),
    );
    // ... and the experiment's facts (issue 11: the report rebuilt from the topic alone), copied by
    // the ledger insert from the action and the attempt: this writer said nothing of them
    const admittedAt = new Map(actions.map((a) => [a.id, a.createdAt.toISOString()]));
    for (const ev of events) {
      const p = Topics.usageSettled.schema.parse(ev.payload);
      expect(p.cohort).toBe(cohorts.get(p.action_id));
      expect(p).toMatchObject({
        experiment_id: experimentId,
        action_admitted_at: admittedAt.get(p.action_id),
        attempt_ended_at: answeredAtOf.get(p.action_id)!.toISOString(),
        action_acceptance_verdict: 'valid',
        // the writer did not say whether the attempt won: the action's winner does
        winner: true,
        attempt_candidates: null,
      });
    }

    const report = experimentReport(experiment, await experiments.reportRows(experimentId));
    expect(report.ineligibleActions).toBe(3);
    for (const c of ['hedged', 'holdout'] as const) {
      expect(report.comparison[c]).toMatchObject({
        actions: expected[c].n,
        onTimeValid: expected[c].k,
        settledMicrousd: expected[c].cost,
        unresolvedMicrousd: expected[c].unresolved,
      });
    }
    expect(expected.hedged.n + expected.holdout.n).toBe(40);
  });
});
