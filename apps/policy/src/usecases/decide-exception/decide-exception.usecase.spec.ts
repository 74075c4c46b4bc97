import { FakeClock, InMemoryExceptionStore, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { alice, bob, DAY_MS, exceptionCommand, olga, routeCommand, T0, workloadCommand, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { ListExceptions } from '../list-exceptions/list-exceptions.usecase';
import { fourEyes } from '../../testing/four-eyes';
import { RequestException } from '../request-exception/request-exception.usecase';
import { RevokeException } from '../revoke-exception/revoke-exception.usecase';
import { DecideException } from './decide-exception.usecase';

describe('exception lifecycle: DecideException, RevokeException, ListExceptions', () => {
  const setup = async () => {
    const policy = new InMemoryPolicyStore();
    const exceptions = new InMemoryExceptionStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(policy, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    await fourEyes(policy, clock).seedWorkload('wl', workloadCommand());
    const requested = await new RequestException(exceptions, policy, clock, new SequentialIds('ex')).execute(alice, exceptionCommand());
    return {
      clock,
      exceptions,
      id: requested.id,
      decide: new DecideException(exceptions, clock),
      revoke: new RevokeException(exceptions, clock),
      list: new ListExceptions(exceptions, clock),
    };
  };

  it('refuses self-approval and self-rejection with 403 self_approval, even for an approver', async () => {
    const { decide, id, exceptions } = await setup();
    await expect(decide.execute(alice, id, { decision: 'approve' })).rejects.toMatchObject({ code: 'self_approval' });
    await expect(decide.execute(alice, id, { decision: 'reject', reason: 'mine' })).rejects.toMatchObject({ code: 'self_approval' });
    expect(exceptions.rows.get(id)!.status).toBe('requested');
  });

  it('another approver approves (requested → active); then it can only be revoked, with a reason', async () => {
    const { decide, revoke, id, exceptions, clock } = await setup();
    clock.advance(1000);
    const approved = await decide.execute(bob, id, { decision: 'approve', reason: 'bounded test' });
    expect(approved).toMatchObject({ status: 'active', stored_status: 'active' });
    await expect(decide.execute(bob, id, { decision: 'approve' })).rejects.toMatchObject({ code: 'invalid_transition' });
    await expect(decide.execute(bob, id, { decision: 'reject', reason: 'late' })).rejects.toMatchObject({ code: 'invalid_transition' });
    clock.advance(1000);
    const revoked = await revoke.execute(olga, id, { reason: 'test finished early' });
    expect(revoked.status).toBe('revoked');
    expect(revoked.events!.map((e) => [e.event, e.from_status, e.to_status, e.actor, e.reason])).toEqual([
      ['request', null, 'requested', 'alice', 'A/B test of reranking three drafts'],
      ['approve', 'requested', 'active', 'bob', 'bounded test'],
      ['revoke', 'active', 'revoked', 'olga', 'test finished early'],
    ]);
    expect(exceptions.changes.map((c) => c.change)).toEqual([
      'request: none -> requested',
      'approve: requested -> active',
      'revoke: active -> revoked',
    ]);
    await expect(revoke.execute(olga, id, { reason: 'again' })).rejects.toMatchObject({ code: 'invalid_transition' });
  });

  it('rejection is final', async () => {
    const { decide, revoke, id } = await setup();
    expect(await decide.execute(bob, id, { decision: 'reject', reason: 'no budget owner' })).toMatchObject({ status: 'rejected' });
    await expect(decide.execute(bob, id, { decision: 'approve' })).rejects.toMatchObject({ code: 'invalid_transition' });
    await expect(revoke.execute(olga, id, { reason: 'x' })).rejects.toMatchObject({ code: 'invalid_transition' });
  });

  it('a pending request is rejected, not revoked', async () => {
    const { revoke, id } = await setup();
    await expect(revoke.execute(olga, id, { reason: 'x' })).rejects.toMatchObject({
      code: 'invalid_transition',
      message: expect.stringMatching(/rejected, not revoked/),
    });
  });

  it('past its expiry an exception reads expired and can be neither approved nor revoked', async () => {
    const { decide, revoke, list, id, clock } = await setup();
    await decide.execute(bob, id, { decision: 'approve' });
    clock.advance(7 * DAY_MS);
    const [row] = (await list.execute({ workloadId: 'wl', limit: 100 })).exceptions;
    expect(row).toMatchObject({ id, status: 'expired', stored_status: 'active' });
    await expect(revoke.execute(olga, id, { reason: 'x' })).rejects.toMatchObject({ code: 'exception_expired' });
  });

  it('a request left pending past its expiry can no longer be approved', async () => {
    const { decide, id, clock } = await setup();
    clock.advance(7 * DAY_MS + 1);
    await expect(decide.execute(bob, id, { decision: 'approve' })).rejects.toMatchObject({ code: 'exception_expired' });
  });

  it('a lost race is a 409 concurrent_change, and nothing is written', async () => {
    const { decide, id, exceptions } = await setup();
    exceptions.loseNextRace = true;
    await expect(decide.execute(bob, id, { decision: 'approve' })).rejects.toMatchObject({ code: 'concurrent_change' });
    expect(exceptions.events).toHaveLength(1);
  });

  it('404 for an unknown exception; list filters by workload and checks its limit', async () => {
    const { decide, list } = await setup();
    await expect(decide.execute(bob, 'nope', { decision: 'approve' })).rejects.toMatchObject({ code: 'not_found' });
    expect((await list.execute({ workloadId: 'other', limit: 10 })).exceptions).toEqual([]);
    expect((await list.execute({ workloadId: null, limit: 10 })).exceptions).toHaveLength(1);
    await expect(list.execute({ workloadId: null, limit: 0 })).rejects.toMatchObject({ code: 'invalid_request', param: 'limit' });
  });
});
