import { FakeClock, InMemoryExceptionStore, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import {
  alice,
  bob,
  DAY_MS,
  exceptionCommand,
  olga,
  priceInput,
  routeCommand,
  T0,
  workloadCommand,
  ALLOWLIST,
} from '../../testing/fixtures';
import type { RequestExceptionCommand } from '../request-exception/request-exception.command';
import { CreateRoute } from '../create-route/create-route.usecase';
import { ListExceptions } from '../list-exceptions/list-exceptions.usecase';
import { fourEyes } from '../../testing/four-eyes';
import { RequestException } from '../request-exception/request-exception.usecase';
import { RevokeException } from '../revoke-exception/revoke-exception.usecase';
import { DecideException } from './decide-exception.usecase';

describe('exception lifecycle: DecideException, RevokeException, ListExceptions', () => {
  const setup = async (cmd: Partial<RequestExceptionCommand> = {}) => {
    const policy = new InMemoryPolicyStore();
    const exceptions = new InMemoryExceptionStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(policy, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    await policy.putPrice(priceInput(), T0);
    await fourEyes(policy, clock).seedWorkload('wl', workloadCommand());
    const requested = await new RequestException(exceptions, policy, clock, new SequentialIds('ex')).execute(alice, exceptionCommand(cmd));
    return {
      clock,
      policy,
      exceptions,
      id: requested.id,
      decide: new DecideException(exceptions, policy, clock),
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

  it('an approval within budget needs no override; the projection is recomputed and shown beside the one at request', async () => {
    const { decide, id, clock } = await setup();
    clock.advance(1000);
    const approved = await decide.execute(bob, id, { decision: 'approve' });
    expect(approved.projection).toEqual({
      budget_microusd: '2000000',
      at_request: expect.objectContaining({ cost_microusd: '1786000', price_revision_id: 'p0', at: T0.toISOString() }),
      at_approval: expect.objectContaining({
        cost_microusd: '1786000',
        exceeds_budget: false,
        price_revision_id: 'p0',
        at: new Date(T0.getTime() + 1000).toISOString(),
      }),
      override_reason: null,
    });
    expect(approved.events!.at(-1)).toMatchObject({ event: 'approve', override_reason: null });
  });

  it('prices that rose since the request push the projection over budget: refused without an override reason, approved with one', async () => {
    const { decide, id, clock, policy, exceptions } = await setup();
    // within budget when requested (1.786 USD); output doubles to $20/MTok before the approver looks
    await policy.putPrice(priceInput({ id: 'p1', effectiveFrom: new Date(T0.getTime() + 500), outputPerMTokMicrousd: 20_000_000n }), T0);
    clock.advance(1000);
    await expect(decide.execute(bob, id, { decision: 'approve', reason: 'fine' })).rejects.toMatchObject({
      code: 'projection_exceeds_budget',
      param: 'override_reason',
      message: expect.stringMatching(/3322000 micro-USD on route rt-openai, price revision p1\) exceeds its budget \(2000000 micro-USD\)/),
    });
    expect(exceptions.rows.get(id)).toMatchObject({ status: 'requested', approvalProjection: null, overrideReason: null });

    const approved = await decide.execute(bob, id, {
      decision: 'approve',
      reason: 'fine',
      override_reason: 'eval is capped by its budget anyway',
    });
    expect(approved).toMatchObject({
      status: 'active',
      projection: {
        at_request: { cost_microusd: '1786000', exceeds_budget: false, price_revision_id: 'p0' },
        at_approval: { cost_microusd: '3322000', exceeds_budget: true, price_revision_id: 'p1' },
        override_reason: 'eval is capped by its budget anyway',
      },
    });
    expect(approved.events!.at(-1)).toMatchObject({
      event: 'approve',
      actor: 'bob',
      reason: 'fine',
      override_reason: 'eval is capped by its budget anyway',
    });
  });

  it('a request projected over budget from the start needs the override too; the state is checked first', async () => {
    const { decide, id } = await setup({ expected_requests: 1_000 });
    await expect(decide.execute(bob, id, { decision: 'approve' })).rejects.toMatchObject({ code: 'projection_exceeds_budget' });
    await expect(decide.execute(alice, id, { decision: 'approve', override_reason: 'mine' })).rejects.toMatchObject({
      code: 'self_approval',
    });
    expect(await decide.execute(bob, id, { decision: 'approve', override_reason: 'worth it' })).toMatchObject({ status: 'active' });
    // approving again is the state machine's refusal, not the projection's
    await expect(decide.execute(bob, id, { decision: 'approve' })).rejects.toMatchObject({ code: 'invalid_transition' });
  });

  it('rejecting a request projected over budget needs no override', async () => {
    const { decide, id } = await setup({ expected_requests: 1_000 });
    expect(await decide.execute(bob, id, { decision: 'reject', reason: 'too dear' })).toMatchObject({ status: 'rejected' });
  });

  it('a request filed before exceptions carried evidence has no projection: approving it needs an override reason', async () => {
    const { decide, exceptions } = await setup();
    await exceptions.create(
      {
        id: 'legacy',
        workloadId: 'wl',
        routeId: 'rt-openai',
        owner: 'o',
        maxCandidates: 2,
        perCandidateOutputCeiling: 64,
        budgetMicrousd: 1_000_000n,
        allowsStreaming: false,
        allowsDeterministicSampling: false,
        expiresAt: new Date(T0.getTime() + DAY_MS),
        justification: 'old',
        requestedBy: 'alice',
        outcome: null,
        expectedRequests: null,
        typicalInputTokens: null,
        requestProjection: null,
      },
      T0,
    );
    await expect(decide.execute(bob, 'legacy', { decision: 'approve' })).rejects.toMatchObject({
      code: 'projection_exceeds_budget',
      message: expect.stringMatching(/cannot be projected \(it carries no expected volume\)/),
    });
    const approved = await decide.execute(bob, 'legacy', { decision: 'approve', override_reason: 'filed before evidence was required' });
    expect(approved).toMatchObject({
      status: 'active',
      outcome: null,
      projection: { at_request: null, at_approval: null, override_reason: 'filed before evidence was required' },
    });
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
