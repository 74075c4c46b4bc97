import { FakeClock, InMemoryPolicyStore } from '../../testing/in-memory-policy.store';
import { alice, bob, olga, T0 } from '../../testing/fixtures';
import { fourEyes } from '../../testing/four-eyes';
import { parseBody } from '../input';
import { PendingChange } from '../change-requests';
import { putScopeLimitBody } from './put-scope-limit.command';

describe('PutScopeLimit', () => {
  const setup = () => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    const eyes = fourEyes(store, clock);
    return { store, eyes, put: eyes.putScopeLimit };
  };
  const body = (over: Record<string, unknown> = {}) =>
    parseBody(putScopeLimitBody, { tokens_per_minute: 1000, budget_microusd: '5000000', ...over });

  it('a first limit applies at once (it only restricts); lowering applies at once', async () => {
    const { put } = setup();
    await expect(put.execute(olga, 'team', 'payments', body())).resolves.toMatchObject({
      scope: 'team',
      scope_id: 'payments',
      tokens_per_minute: 1000,
      token_rate_enforcement: 'organisation',
      budget_microusd: '5000000',
      budget_period: 'month',
      updated_by: 'olga',
    });
    await expect(put.execute(olga, 'team', 'payments', body({ budget_microusd: '1000' }))).resolves.toMatchObject({
      budget_microusd: '1000',
    });
    await expect(put.list()).resolves.toMatchObject({ scope_limits: [{ scope: 'team', scope_id: 'payments' }] });
  });

  it.each([
    [{ budget_microusd: '6000000' }, 'budget up'],
    [{ budget_microusd: null }, 'budget removed'],
    [{ tokens_per_minute: 2000 }, 'tokens_per_minute up'],
    [{ token_rate_enforcement: 'instance' }, 'token rate enforced per instance'],
    [{ budget_period: 'day' }, 'budget period shortened'],
  ])('raising %j is four-eyes: the requester cannot approve, another approver applies it', async (change, raise) => {
    const { put, eyes, store } = setup();
    await put.execute(olga, 'environment', 'prod', body());
    const pending = (await put.execute(alice, 'environment', 'prod', body(change))) as PendingChange;
    expect(pending).toBeInstanceOf(PendingChange);
    expect(pending.body).toMatchObject({ kind: 'scope_limit', target_id: 'environment/prod', raises: [raise] });
    expect((await store.scopeLimit('environment', 'prod'))?.budgetMicrousd).toBe(5_000_000n);
    await expect(eyes.decide.execute(alice, pending.body.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'self_approval' });
    await eyes.decide.execute(bob, pending.body.id, { decision: 'approve' });
    const applied = await put.get('environment', 'prod');
    expect(applied.updated_by).toBe('alice');
    expect(applied.change_reason).toContain('approved by bob');
  });

  it('refuses an unknown scope kind and a bad body, naming the field', async () => {
    const { put } = setup();
    await expect(put.execute(olga, 'galaxy', 'x', body())).rejects.toMatchObject({ code: 'invalid_request', param: 'scope' });
    expect(() => body({ budget_microusd: 1.5 })).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'budget_microusd' }));
    expect(() => body({ token_rate_enforcement: 'galaxy' })).toThrow(expect.objectContaining({ param: 'token_rate_enforcement' }));
    await expect(put.get('team', 'nobody')).rejects.toMatchObject({ code: 'not_found' });
  });
});
