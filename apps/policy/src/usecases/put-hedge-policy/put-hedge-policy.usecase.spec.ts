import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { alice, ALLOWLIST, bob, olga, routeCommand, T0, workloadCommand } from '../../testing/fixtures';
import { fourEyes } from '../../testing/four-eyes';
import { CreateRoute } from '../create-route/create-route.usecase';
import { PendingChange } from '../change-requests';
import { parseBody } from '../input';
import { putHedgePolicyBody } from './put-hedge-policy.command';
import { hedgePolicyBody } from '@gateway/testing';

describe('PutHedgePolicy', () => {
  const setup = async () => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(store, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    const eyes = fourEyes(store, clock);
    await eyes.seedWorkload('wl', workloadCommand());
    return { eyes, put: eyes.putHedgePolicy };
  };
  const cmd = (over: Record<string, unknown> = {}) => parseBody(putHedgePolicyBody, hedgePolicyBody(over));

  it('a first policy allowing extra attempts is four-eyes; approved by another operator it is revision 1', async () => {
    const { put, eyes } = await setup();
    const pending = (await put.execute(olga, 'wl', cmd())) as PendingChange;
    expect(pending).toBeInstanceOf(PendingChange);
    expect(pending.body).toMatchObject({ kind: 'hedge_policy', target_id: 'wl', raises: ['first hedge policy allowing extra attempts'] });
    await expect(put.get('wl')).resolves.toMatchObject({ in_force: [], history: [] });
    await expect(eyes.decide.execute(olga, pending.body.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'self_approval' });
    await eyes.decide.execute(bob, pending.body.id, { decision: 'approve' });
    const view = await put.get('wl');
    expect(view.in_force).toEqual([
      expect.objectContaining({
        route_id: null,
        revision: 1,
        created_by: 'olga',
        allowance: { max_attempts: 3, max_extra_spend_microusd: '10000' },
        experiment_allowance: { budget_microusd: '5000000', period: 'month' },
      }),
    ]);
    expect(view.in_force[0].reason).toContain('approved by bob');
  });

  it('lowering applies at once as the next revision; raising again waits, and self-approval is refused', async () => {
    const { put, eyes } = await setup();
    await eyes.approved(await put.execute(olga, 'wl', cmd()));
    await expect(put.execute(olga, 'wl', cmd({ enabled: false, reason: 'incident' }))).resolves.toMatchObject({
      revision: 2,
      enabled: false,
      created_by: 'olga',
      reason: 'incident',
    });
    const pending = (await put.execute(alice, 'wl', cmd({ read_only_tools: ['lookup', 'search'] }))) as PendingChange;
    expect(pending.body.raises).toEqual(['hedging enabled', 'read-only tool search added']);
    await expect(eyes.decide.execute(alice, pending.body.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'self_approval' });
    expect((await put.get('wl')).history.map((r) => r.revision)).toEqual([2, 1]);
  });

  it('a route policy is compared with the workload-wide one in force and numbered in its own scope', async () => {
    const { put, eyes } = await setup();
    await eyes.approved(await put.execute(olga, 'wl', cmd()));
    const lower = cmd({ route_id: 'rt-openai', allowance: { max_attempts: 2, max_extra_spend_microusd: '5000' } });
    await expect(put.execute(olga, 'wl', lower)).resolves.toMatchObject({ route_id: 'rt-openai', revision: 1 });
    const view = await put.get('wl');
    expect(view.in_force.map((r) => [r.route_id, r.revision])).toEqual([
      [null, 1],
      ['rt-openai', 1],
    ]);
    await expect(eyes.hedging.hedgePolicyFor('wl', 'rt-openai')).resolves.toMatchObject({ allowance: { maxAttempts: 2 } });
    await expect(eyes.hedging.hedgePolicyFor('wl', 'rt-other')).resolves.toMatchObject({ routeId: null, allowance: { maxAttempts: 3 } });
  });

  it('PUT is idempotent: a retried raising PUT finds its pending request, the policy in force said again is no new revision', async () => {
    const { put, eyes } = await setup();
    const first = (await put.execute(olga, 'wl', cmd())) as PendingChange;
    const retried = (await put.execute(olga, 'wl', cmd())) as PendingChange;
    expect(retried).toBeInstanceOf(PendingChange);
    expect(retried.body.id).toBe(first.body.id);
    // another operator asking for the same files a request of their own; a different policy is a new request
    expect(((await put.execute(alice, 'wl', cmd())) as PendingChange).body.id).not.toBe(first.body.id);
    expect(((await put.execute(olga, 'wl', cmd({ owner: 'other-team' }))) as PendingChange).body.id).not.toBe(first.body.id);

    await eyes.approved(first);
    await expect(put.execute(olga, 'wl', cmd())).resolves.toMatchObject({ revision: 1, route_id: null });
    expect((await put.get('wl')).history).toHaveLength(1);
    // the same settings for one route are that route's own policy, not a repeat of the workload's
    await expect(put.execute(olga, 'wl', cmd({ route_id: 'rt-openai' }))).resolves.toMatchObject({ route_id: 'rt-openai', revision: 1 });
    await expect(put.execute(olga, 'wl', cmd({ route_id: 'rt-openai' }))).resolves.toMatchObject({ route_id: 'rt-openai', revision: 1 });
    expect((await put.get('wl')).history).toHaveLength(2);
  });

  it('refuses an unknown workload or route', async () => {
    const { put } = await setup();
    await expect(put.execute(olga, 'nobody', cmd())).rejects.toMatchObject({ code: 'not_found' });
    await expect(put.execute(olga, 'wl', cmd({ route_id: 'rt-none' }))).rejects.toMatchObject({ code: 'not_found', param: 'route_id' });
    await expect(put.get('nobody')).rejects.toMatchObject({ code: 'not_found' });
  });

  it.each<[Record<string, unknown>, string]>([
    [{ delay: { kind: 'quantile', quantile_per_mille: 1000, floor_ms: 0, ceiling_ms: 10, min_samples: 1 } }, 'delay.quantile_per_mille'],
    [{ delay: { kind: 'quantile', quantile_per_mille: 950, floor_ms: 20, ceiling_ms: 10, min_samples: 1 } }, 'delay.floor_ms'],
    [{ delay: { kind: 'fixed', ms: 60_001 } }, 'delay.ms'],
    [{ delay: { kind: 'never' } }, 'delay.kind'],
    [{ allowance: { max_attempts: 11, max_extra_spend_microusd: 0 } }, 'allowance.max_attempts'],
    [{ retry: { transient: [], max_retries: 3 } }, 'retry.max_retries'],
    [{ retry: { transient: ['cosmic_ray'], max_retries: 1 } }, 'retry.transient.0'],
    [{ allowance: { max_attempts: 3, max_extra_spend_microusd: 1.5 } }, 'allowance.max_extra_spend_microusd'],
    [{ read_only_tools: Array.from({ length: 65 }, (_, i) => `t${i}`) }, 'read_only_tools'],
    [{ read_only_tools: ['a', 'a'] }, 'read_only_tools.1'],
    [{ max_hedges: 2 }, 'max_hedges'],
    [{ bucket: { max_milli_tokens: 0, success_refill_milli_tokens: 1 } }, 'bucket.max_milli_tokens'],
    [{ surprise: true }, 'surprise'],
  ])('refuses %j on its field', (over, param) => {
    expect(() => cmd(over)).toThrow(expect.objectContaining({ code: 'invalid_request', param }));
  });
});
