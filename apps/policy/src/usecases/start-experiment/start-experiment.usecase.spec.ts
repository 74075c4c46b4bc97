import { experimentBody, hedgePolicyBody } from '@gateway/testing';
import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { alice, ALLOWLIST, bob, olga, routeCommand, T0, workloadCommand } from '../../testing/fixtures';
import { fourEyes } from '../../testing/four-eyes';
import { CreateRoute } from '../create-route/create-route.usecase';
import { PendingChange } from '../change-requests';
import { parseBody } from '../input';
import { putHedgePolicyBody } from '../put-hedge-policy/put-hedge-policy.command';
import { StopExperiment } from '../stop-experiment/stop-experiment.usecase';
import { startExperimentBody } from './start-experiment.command';

describe('StartExperiment / StopExperiment', () => {
  const setup = async () => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(store, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    const eyes = fourEyes(store, clock);
    await eyes.seedWorkload('wl', workloadCommand());
    await eyes.seedWorkload('other', workloadCommand());
    await eyes.approved(await eyes.putHedgePolicy.execute(olga, 'wl', parseBody(putHedgePolicyBody, hedgePolicyBody())));
    await eyes.approved(await eyes.putHedgePolicy.execute(olga, 'other', parseBody(putHedgePolicyBody, hedgePolicyBody())));
    const [revision] = eyes.hedging.rows.filter((r) => r.workloadId === 'wl');
    const [otherRevision] = eyes.hedging.rows.filter((r) => r.workloadId === 'other');
    return { eyes, clock, start: eyes.startExperiment, stop: new StopExperiment(eyes.experiments, clock), revision, otherRevision };
  };
  const cmd = (revisionId: string, over: Record<string, unknown> = {}) => parseBody(startExperimentBody, experimentBody(revisionId, over));

  it('is always four-eyes: filed as a change request, refused to its requester, started by another approver with the premium copied', async () => {
    const { start, eyes, revision } = await setup();
    const pending = await start.execute(olga, 'wl', cmd(revision.revisionId));
    expect(pending).toBeInstanceOf(PendingChange);
    expect(pending.body).toMatchObject({ kind: 'experiment', target_id: 'wl', status: 'pending' });
    await expect(start.list('wl')).resolves.toEqual({ workload_id: 'wl', experiments: [] });
    await expect(eyes.decide.execute(olga, pending.body.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'self_approval' });
    await eyes.decide.execute(bob, pending.body.id, { decision: 'approve' });
    const { experiments } = await start.list('wl');
    expect(experiments).toEqual([
      expect.objectContaining({
        workload_id: 'wl',
        status: 'running',
        hedge_policy_revision_id: revision.revisionId,
        holdout_share_bps: 1000,
        approved_premium_microusd: '2000',
        overhead_microusd_per_attempt: '20',
        requested_by: 'olga',
        approved_by: 'bob',
        stopped_at: null,
      }),
    ]);
    // the record as GET /experiments/{id} shows it: the listed record and its pauses (none recorded)
    await expect(start.get(experiments[0].id)).resolves.toEqual({ ...experiments[0], pauses: [] });
  });

  it('refuses a second running experiment on the workload, when filed and again when approved', async () => {
    const { start, eyes, revision } = await setup();
    const first = await start.execute(olga, 'wl', cmd(revision.revisionId));
    const second = await start.execute(alice, 'wl', cmd(revision.revisionId, { holdout_share_bps: 2000 }));
    await eyes.decide.execute(bob, first.body.id, { decision: 'approve' });
    await expect(eyes.decide.execute(bob, second.body.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'experiment_running' });
    await expect(start.execute(olga, 'wl', cmd(revision.revisionId))).rejects.toMatchObject({ code: 'experiment_running' });
    expect((await start.list('wl')).experiments).toHaveLength(1);
  });

  it("refuses another workload's policy revision, an unknown workload and an unknown experiment (404)", async () => {
    const { start, stop, otherRevision } = await setup();
    await expect(start.execute(olga, 'wl', cmd(otherRevision.revisionId))).rejects.toMatchObject({
      code: 'not_found',
      param: 'hedge_policy_revision_id',
    });
    await expect(start.execute(olga, 'nope', cmd(otherRevision.revisionId))).rejects.toMatchObject({ code: 'not_found' });
    await expect(start.get('exp-nope')).rejects.toMatchObject({ code: 'not_found' });
    await expect(stop.execute(olga, 'exp-nope', { reason: 'x' })).rejects.toMatchObject({ code: 'not_found' });
  });

  it('stops at once (one operator), idempotently; a stopped experiment lets the next one start', async () => {
    const { start, stop, eyes, clock, revision } = await setup();
    await eyes.approved(await start.execute(olga, 'wl', cmd(revision.revisionId)));
    const [running] = (await start.list('wl')).experiments;
    clock.advance(60_000);
    const stopped = await stop.execute(olga, running.id, { reason: 'enough data' });
    expect(stopped).toMatchObject({ status: 'stopped', stopped_by: 'olga', stop_reason: 'enough data' });
    clock.advance(60_000);
    await expect(stop.execute(alice, running.id, { reason: 'again' })).resolves.toEqual(stopped);
    await eyes.approved(await start.execute(olga, 'wl', cmd(revision.revisionId, { seed: 12 })));
    expect((await start.list('wl')).experiments.map((e) => [e.status, e.seed])).toEqual([
      ['running', 12],
      ['stopped', 11],
    ]);
  });

  it('refuses designs outside the ranges on the snake_case field that broke them', () => {
    const bad = (over: Record<string, unknown>) => startExperimentBody.safeParse(experimentBody('rev', over));
    const pathOf = (over: Record<string, unknown>) => {
      const r = bad(over);
      return r.success ? null : r.error.issues.map((i) => i.path.join('.'));
    };
    expect(pathOf({ holdout_share_bps: 50 })).toEqual(['holdout_share_bps']);
    expect(pathOf({ holdout_share_bps: 5001 })).toEqual(['holdout_share_bps']);
    expect(pathOf({ useful_deadline_ms: 0 })).toEqual(['useful_deadline_ms']);
    expect(pathOf({ sample_plan: { min_actions_per_cohort: 10 } })).toEqual(['sample_plan.min_actions_per_cohort']);
    expect(pathOf({ acceptance: { allowed_finish_reasons: [] } })).toEqual(['acceptance.allowed_finish_reasons']);
    expect(pathOf({ acceptance: { allowed_finish_reasons: ['stop', 'stop'] } })).toEqual(['acceptance.allowed_finish_reasons.1']);
    expect(pathOf({ acceptance: { allowed_finish_reasons: ['st op'] } })).toEqual(['acceptance.allowed_finish_reasons.0']);
    expect(pathOf({ overhead_microusd_per_attempt: 1.5 })).toEqual(['overhead_microusd_per_attempt']);
    expect(pathOf({ overhead_microusd_per_attempt: '1000001' })).toEqual(['overhead_microusd_per_attempt']);
    expect(pathOf({ pause: { holdout_p95_above_ms: 100, route_error_per_mille_above: 1001 } })).toEqual([
      'pause.route_error_per_mille_above',
    ]);
    expect(pathOf({ seed: -1 })).toEqual(['seed']);
    expect(pathOf({ surprise: true })).toEqual(['']);
    // defaults: 10 % holdout, the one metric, nothing unresolved tolerated, a 200-action pause window
    const minimal = startExperimentBody.parse({
      owner: 'o',
      hedge_policy_revision_id: 'rev',
      useful_deadline_ms: 1000,
      acceptance: { allowed_finish_reasons: ['stop'] },
      sample_plan: { min_actions_per_cohort: 100 },
      overhead_microusd_per_attempt: 0,
      pause: { holdout_p95_above_ms: 2000, route_error_per_mille_above: 100 },
    });
    expect(minimal).toMatchObject({
      holdout_share_bps: 1000,
      sample_plan: { metric: 'incremental_cost_per_on_time_answer', max_unresolved_share_bps: 0 },
      pause: { window_actions: 200 },
      acceptance: { non_empty_content: true, refusals_invalid: true },
      seed: 1,
    });
  });
});
