import { randomUUID } from 'node:crypto';
import {
  AdmissionRepository,
  Database,
  DispatchRepository,
  ExperimentPauseRepository,
  ExperimentRepository,
  OutboxRepository,
} from '@gateway/db';
import { admitInput, experimentDesign, hedgeSettings, Seeder } from '@gateway/testing';

/**
 * The experiment's pause rule on the real Postgres (issue 11): the window is the experiment's last
 * `window_actions` holdout actions whose primary ended, read with one query; slow holdout primaries
 * open one pause even when two dispatch instances (two pools) evaluate at once; hedged actions never
 * enter the window; fast primaries close it with the end figures; the claim records the open pause
 * on the attempt and the report rows say the action ran paused.
 */
const url = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/gateway_test';

describe('experiment pauses', () => {
  const db = new Database(url, { poolMax: 10 });
  const other = new Database(url, { poolMax: 10 });
  const outbox = new OutboxRepository(db);
  const admission = new AdmissionRepository(db, outbox, { groupCommit: false });
  const experiments = new ExperimentRepository(db, outbox);
  const pausesA = new ExperimentPauseRepository(db);
  const pausesB = new ExperimentPauseRepository(other);
  const seed = new Seeder(db);
  const periodStart = new Date('2026-11-01T00:00:00Z');

  afterAll(() => Promise.all([db.close(), other.close()]));

  async function startExperiment(): Promise<{ experimentId: string; workloadId: string }> {
    const experimentId = randomUUID();
    const workloadId = `xp-${experimentId}`;
    await seed.workload({ id: workloadId });
    const revisionId = await seed.hedgePolicy(workloadId, hedgeSettings());
    const started = await experiments.start(
      {
        ...experimentDesign(revisionId, {
          holdout_share_bps: 5_000,
          pause: { holdout_p95_above_ms: 500, route_error_per_mille_above: 200, window_actions: 20 },
        }),
        id: experimentId,
        workloadId,
        requestedBy: 'ana',
        approvedBy: 'ben',
        reason: 'pause test',
      },
      new Date(),
    );
    if (!started.ok) throw new Error(started.reason);
    return { experimentId, workloadId };
  }

  /** Admits `n` actions of the cohort one after another, each with an ended primary of `latencyMs`. */
  async function actions(
    ids: { experimentId: string; workloadId: string },
    cohort: 'hedged' | 'holdout',
    n: number,
    primary: { latencyMs: number; httpStatus?: number | null; status?: string },
  ): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const base = admitInput(ids.workloadId, { workloadBudget: { budgetMicrousd: 10_000_000n, periodStart } });
      expect(await admission.admit({ ...base, action: { ...base.action, experimentId: ids.experimentId, cohort } })).toEqual({ ok: true });
      const startedAt = new Date();
      await db.prisma.attempt.create({
        data: {
          id: randomUUID(),
          actionId: base.action.id,
          attemptNo: 1,
          role: 'primary',
          routeId: 'r',
          routeVersion: 1,
          status: primary.status ?? 'succeeded',
          statusReason: 'seeded',
          effectiveCandidates: 1,
          httpStatus: primary.httpStatus === undefined ? 200 : primary.httpStatus,
          startedAt,
          endedAt: new Date(startedAt.getTime() + primary.latencyMs),
          updatedAt: startedAt,
        },
      });
      out.push(base.action.id);
    }
    return out;
  }

  it('slow holdout primaries open one pause under two concurrent evaluators; fast ones close it', async () => {
    const ids = await startExperiment();
    const { experimentId } = ids;
    // 19 fast: below the minimum sample (20), nothing is judged
    await actions(ids, 'holdout', 19, { latencyMs: 100 });
    expect((await pausesA.evaluate(experimentId, new Date(), randomUUID)).decision).toMatchObject({ kind: 'none' });
    // 20 slow: the window (the last 20) is all slow
    await actions(ids, 'holdout', 20, { latencyMs: 1_200 });
    const window = await pausesA.windowOf(experimentId, 20);
    expect(window).toHaveLength(20);
    expect(window.every((w) => w.endedAt.getTime() - w.startedAt.getTime() === 1_200)).toBe(true);

    // two instances, eight evaluations at once
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? pausesA : pausesB).evaluate(experimentId, new Date(), randomUUID)),
    );
    const opened = results.filter((r) => r.decision?.kind === 'open');
    expect(opened).toHaveLength(1);
    const pauseId = opened[0].openPauseId!;
    expect(results.every((r) => r.openPauseId === pauseId)).toBe(true);
    expect(await pausesB.openPauseId(experimentId)).toBe(pauseId);
    expect(await db.prisma.experimentPause.count({ where: { experimentId } })).toBe(1);
    const [open] = await experiments.pausesOf(experimentId);
    expect(open).toMatchObject({
      id: pauseId,
      experimentId,
      rule: 'holdout_p95_above_ms',
      endedAt: null,
      atStart: { holdoutP95Ms: 1_200, routeErrorPerMille: 0, samples: 20 },
      atEnd: null,
      thresholds: { holdoutP95AboveMs: 500, routeErrorPerMilleAbove: 200 },
      windowActions: 20,
    });

    // a second open pause is impossible even past the lock: the open marker is unique
    await expect(
      db.prisma.experimentPause.create({
        data: {
          ...(await db.prisma.experimentPause.findUniqueOrThrow({ where: { id: pauseId } })),
          id: randomUUID(),
        },
      }),
    ).rejects.toThrow();

    // hedged actions never enter the window, however slow; 20 fast holdout primaries close it
    await actions(ids, 'holdout', 20, { latencyMs: 100 });
    await actions(ids, 'hedged', 20, { latencyMs: 5_000 });
    const closing = await Promise.all([pausesA, pausesB, pausesA].map((p) => p.evaluate(experimentId, new Date(), randomUUID)));
    expect(closing.filter((r) => r.decision?.kind === 'close')).toHaveLength(1);
    expect(closing.every((r) => r.openPauseId === null)).toBe(true);
    expect(await pausesA.openPauseId(experimentId)).toBeNull();
    const [closed] = await experiments.pausesOf(experimentId);
    expect(closed).toMatchObject({ id: pauseId, atEnd: { holdoutP95Ms: 100, routeErrorPerMille: 0, samples: 20 } });
    expect(closed.endedAt!.getTime()).toBeGreaterThanOrEqual(closed.startedAt.getTime());

    // route errors (503, no answer) open the next one on the error rule; a 4xx is the request's fault
    await actions(ids, 'holdout', 14, { latencyMs: 100 });
    await actions(ids, 'holdout', 4, { latencyMs: 100, httpStatus: 400, status: 'failed' });
    await actions(ids, 'holdout', 1, { latencyMs: 100, httpStatus: 503, status: 'failed' });
    await actions(ids, 'holdout', 1, { latencyMs: 100, httpStatus: null, status: 'usage_missing' });
    expect((await pausesA.evaluate(experimentId, new Date(), randomUUID)).decision).toMatchObject({
      kind: 'none',
      measure: { routeErrorPerMille: 100 },
    });
    await actions(ids, 'holdout', 4, { latencyMs: 100, httpStatus: 503, status: 'failed' });
    const errors = await pausesA.evaluate(experimentId, new Date(), randomUUID);
    expect(errors.decision).toMatchObject({
      kind: 'open',
      pause: { rule: 'route_error_per_mille_above', atStart: { routeErrorPerMille: 300 } },
    });
    expect((await experiments.pausesOf(experimentId)).map((p) => p.endedAt === null)).toEqual([false, true]);

    // a stopped experiment is not judged
    await experiments.stop(experimentId, 'ana', 'done', new Date());
    expect((await pausesA.evaluate(experimentId, new Date(), randomUUID)).decision).toBeNull();
  });

  it('the claim records the open pause on the attempt; the report rows say the action ran paused', async () => {
    const ids = await startExperiment();
    const dispatch = new DispatchRepository(db, outbox);
    const claimOf = (actionId: string, experimentPauseId: string | null) =>
      dispatch.claim({
        actionId,
        attemptId: randomUUID(),
        attemptNo: 1,
        role: 'primary',
        routeId: 'r',
        routeVersion: 1,
        effectiveCandidates: 1,
        holdMicrousd: null,
        policyRevisionId: null,
        experimentPauseId,
        claimedBy: 'test',
        now: new Date(),
      });
    const admitted: string[] = [];
    for (const cohort of ['hedged', 'holdout', 'hedged'] as const) {
      const base = admitInput(ids.workloadId, { workloadBudget: { budgetMicrousd: 10_000_000n, periodStart } });
      expect(await admission.admit({ ...base, action: { ...base.action, experimentId: ids.experimentId, cohort } })).toEqual({ ok: true });
      admitted.push(base.action.id);
    }
    const pauseId = randomUUID();
    expect(await claimOf(admitted[0], pauseId)).toEqual({ ok: true });
    expect(await claimOf(admitted[1], pauseId)).toEqual({ ok: true });
    expect(await claimOf(admitted[2], null)).toEqual({ ok: true });
    const rows = await experiments.reportRows(ids.experimentId);
    const paused = new Map(rows.map((r) => [r.actionId, r.ranPaused]));
    expect(admitted.map((id) => paused.get(id))).toEqual([true, true, false]);
    const attempts = await db.prisma.attempt.findMany({
      where: { actionId: { in: admitted } },
      select: { actionId: true, experimentPauseId: true },
    });
    expect(new Map(attempts.map((a) => [a.actionId, a.experimentPauseId])).get(admitted[0])).toBe(pauseId);
  });
});
