import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { alice, bob, olga, routeCommand, T0, workloadCommand, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { parseBody } from '../input';
import { GetWorkload } from '../get-workload/get-workload.usecase';
import { putWorkloadBody } from './put-workload.command';
import { PendingChange } from '../change-requests';
import { fourEyes } from '../../testing/four-eyes';

describe('PutWorkload', () => {
  const setup = async () => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(store, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    const eyes = fourEyes(store, clock);
    return { store, clock, eyes, put: eyes.putWorkload };
  };

  it("a new workload is a change request; approved by someone else, it is written in the requester's name", async () => {
    const { put, clock, store, eyes } = await setup();
    const pending = await put.execute(olga, 'wl-search', workloadCommand({ allowed_aliases: ['approved-standard'] }));
    expect(pending).toBeInstanceOf(PendingChange);
    const request = (pending as PendingChange).body;
    expect(request).toMatchObject({
      kind: 'workload_policy',
      target_id: 'wl-search',
      status: 'pending',
      requested_by: 'olga',
      raises: ['new workload'],
      proposed: { budget_microusd: '5000000' },
    });
    expect(store.workloads.size).toBe(0);
    await expect(eyes.decide.execute(olga, request.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'self_approval' });
    await expect(eyes.decide.execute(alice, request.id, { decision: 'approve' })).resolves.toMatchObject({ status: 'approved' });
    expect(await new GetWorkload(store).execute('wl-search')).toMatchObject({
      budget_microusd: '5000000',
      allowed_aliases: ['approved-standard'],
      updated_by: 'olga',
    });
    await expect(eyes.decide.execute(bob, request.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'invalid_transition' });

    clock.advance(1000);
    const lowered = await put.execute(olga, 'wl-search', workloadCommand({ budget_microusd: 1_000_000n, reason: 'less budget' }));
    expect(lowered).toMatchObject({
      budget_microusd: '1000000',
      allowed_aliases: [],
      change_reason: 'less budget',
      created_at: T0.toISOString(),
    });
    expect(store.changes.filter((c) => c.entity === 'workload')).toHaveLength(2);
    expect(await new GetWorkload(store).execute('wl-search')).toEqual(lowered);
  });

  it.each([
    [{ default_max_candidates: 128 }, 'default_max_candidates up'],
    [{ budget_microusd: 7_000_000n }, 'budget up'],
    [{ per_candidate_output_ceiling: 100_000 }, 'per_candidate_output_ceiling up'],
    [{ max_in_flight: 1000 }, 'max_in_flight up'],
    [{ fallback_chain: ['approved-standard'] }, 'fallback chain additions'],
  ])('raising %j waits for approval; the requester cannot approve it; a rejection applies nothing', async (change, raise) => {
    const { put, eyes, store } = await setup();
    await eyes.seedWorkload('wl', workloadCommand());
    const before = structuredClone(store.workloads.get('wl'));
    const pending = (await put.execute(alice, 'wl', workloadCommand(change))) as PendingChange;
    expect(pending.body.raises).toEqual([raise]);
    await expect(eyes.decide.execute(alice, pending.body.id, { decision: 'approve' })).rejects.toMatchObject({ code: 'self_approval' });
    await eyes.decide.execute(bob, pending.body.id, { decision: 'reject', reason: 'no' });
    expect(store.workloads.get('wl')).toEqual(before);
    expect((await eyes.changes.findById(pending.body.id))?.status).toBe('rejected');
  });

  it.each([
    [{ max_calls_per_workflow: 6 }, 'max_calls_per_workflow up'],
    [{ max_calls_per_workflow: null }, 'max_calls_per_workflow removed'],
    [{ max_calls_per_workflow: 5, workflow_window_seconds: 30 }, 'workflow_window_seconds shortened'],
  ])('fan-out: %j waits for approval; a lower maximum applies at once', async (change, raise) => {
    const { put, eyes } = await setup();
    await eyes.seedWorkload('wl', workloadCommand({ max_calls_per_workflow: 5, workflow_id_field: 'metadata.run' }));
    const pending = (await put.execute(alice, 'wl', workloadCommand(change))) as PendingChange;
    expect(pending.body.raises).toEqual([raise]);
    await expect(put.execute(alice, 'wl', workloadCommand({ max_calls_per_workflow: 2 }))).resolves.toMatchObject({
      max_calls_per_workflow: 2,
      workflow_window_seconds: 60,
      workflow_id_field: null,
    });
  });

  it('refuses a workflow id field that is neither user nor metadata.<key>', () => {
    const base = { team: 't', environment: 'dev', per_candidate_output_ceiling: 1, budget_microusd: '1', budget_period: 'month' };
    for (const field of ['metadata.', 'headers.x', 'metadata.a b', 'user.name']) {
      expect(() => parseBody(putWorkloadBody, { ...base, workflow_id_field: field })).toThrow(
        expect.objectContaining({ code: 'invalid_request', param: 'workflow_id_field' }),
      );
    }
    expect(parseBody(putWorkloadBody, { ...base, workflow_id_field: 'metadata.run_id' }).workflow_id_field).toBe('metadata.run_id');
  });

  it('refuses aliases that name no route, naming the field', async () => {
    const { put } = await setup();
    await expect(put.execute(olga, 'wl', workloadCommand({ allowed_aliases: ['approved-standard', 'typo'] }))).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'allowed_aliases.1',
    });
    await expect(put.execute(olga, 'wl', workloadCommand({ fallback_chain: ['nope'] }))).rejects.toMatchObject({
      code: 'invalid_request',
      param: 'fallback_chain.0',
    });
  });

  it('refuses an id that is not URL-safe', async () => {
    const { put } = await setup();
    await expect(put.execute(olga, 'a b', workloadCommand())).rejects.toMatchObject({ code: 'invalid_request', param: 'id' });
  });

  it('applies defaults and validates the body strictly', () => {
    const parsed = parseBody(putWorkloadBody, {
      team: 't',
      environment: 'dev',
      per_candidate_output_ceiling: 256,
      budget_microusd: '5000000',
      budget_period: 'month',
    });
    expect(parsed).toMatchObject({
      default_max_candidates: 1,
      budget_microusd: 5_000_000n,
      allowed_aliases: [],
      allow_length: false,
      tokens_per_minute: null,
    });
    const bad: Array<[Record<string, unknown>, string]> = [
      [{ budget_microusd: 1.5 }, 'budget_microusd'],
      [{ budget_microusd: '5e6' }, 'budget_microusd'],
      [{ budget_microusd: -1 }, 'budget_microusd'],
      [{ budget_period: 'week' }, 'budget_period'],
      [{ default_max_candidates: 0 }, 'default_max_candidates'],
      [{ per_candidate_output_ceiling: 2 ** 31 }, 'per_candidate_output_ceiling'],
      [{ allowed_aliases: ['a', 'a'] }, 'allowed_aliases'],
      // issue 7 item 7: accepted before, then every request overflowed an integer column
      [{ per_candidate_output_ceiling: 2_147_483_647 }, 'per_candidate_output_ceiling'],
      [{ default_max_candidates: 128, per_candidate_output_ceiling: 16_646_144 }, 'per_candidate_output_ceiling'],
      [{ tokens_per_minute: 2 ** 30 }, 'tokens_per_minute'],
      [{ budget_microusd: '9223372036854775807' }, 'budget_microusd'],
      [{ surprise: true }, 'surprise'],
    ];
    for (const [change, param] of bad) {
      expect(() => parseBody(putWorkloadBody, { ...parsed, budget_microusd: '5000000', ...change })).toThrow(
        expect.objectContaining({ code: 'invalid_request', param }),
      );
    }
  });

  it('names the product, its bound and the largest ceiling that fits when count × ceiling cannot be reserved', () => {
    const base = { team: 't', environment: 'dev', budget_microusd: '5000000', budget_period: 'month' };
    expect(() => parseBody(putWorkloadBody, { ...base, default_max_candidates: 4, per_candidate_output_ceiling: 1_000_000_000 })).toThrow(
      expect.objectContaining({
        code: 'invalid_request',
        param: 'per_candidate_output_ceiling',
        message: expect.stringMatching(
          /default_max_candidates × per_candidate_output_ceiling = 4000000000 .*2130706431.* at most 532676607/,
        ),
      }),
    );
    // exactly at the bounds
    expect(parseBody(putWorkloadBody, { ...base, default_max_candidates: 128, per_candidate_output_ceiling: 16_646_143 })).toBeTruthy();
    expect(
      parseBody(putWorkloadBody, { ...base, per_candidate_output_ceiling: 2_130_706_431, tokens_per_minute: 2 ** 30 - 1 }),
    ).toBeTruthy();
    expect(parseBody(putWorkloadBody, { ...base, per_candidate_output_ceiling: 1, budget_microusd: '4611686018427387903' })).toBeTruthy();
  });
});
