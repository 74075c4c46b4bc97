import { FakeClock, InMemoryPolicyStore, SequentialIds } from '../../testing/in-memory-policy.store';
import { olga, routeCommand, T0, workloadCommand, ALLOWLIST } from '../../testing/fixtures';
import { CreateRoute } from '../create-route/create-route.usecase';
import { parseBody } from '../input';
import { GetWorkload } from '../get-workload/get-workload.usecase';
import { putWorkloadBody } from './put-workload.command';
import { PutWorkload } from './put-workload.usecase';

describe('PutWorkload', () => {
  const setup = async () => {
    const store = new InMemoryPolicyStore();
    const clock = new FakeClock(T0);
    await new CreateRoute(store, clock, new SequentialIds('rt'), ALLOWLIST).execute(olga, routeCommand());
    return { store, clock, put: new PutWorkload(store, clock) };
  };

  it('creates, then replaces, a workload policy; money comes back as an integer string', async () => {
    const { put, clock, store } = await setup();
    const created = await put.execute(olga, 'wl-search', workloadCommand({ allowed_aliases: ['approved-standard'] }));
    expect(created).toMatchObject({
      id: 'wl-search',
      budget_microusd: '5000000',
      default_max_candidates: 1,
      allowed_aliases: ['approved-standard'],
      updated_by: 'olga',
      keys: [],
    });
    clock.advance(1000);
    const replaced = await put.execute(
      olga,
      'wl-search',
      workloadCommand({ budget_microusd: 7_000_000n, budget_period: 'day', reason: 'more budget' }),
    );
    expect(replaced).toMatchObject({
      budget_microusd: '7000000',
      budget_period: 'day',
      allowed_aliases: [],
      change_reason: 'more budget',
      created_at: T0.toISOString(),
    });
    expect(store.changes.filter((c) => c.entity === 'workload')).toHaveLength(2);
    expect(await new GetWorkload(store).execute('wl-search')).toEqual(replaced);
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
      [{ surprise: true }, 'surprise'],
    ];
    for (const [change, param] of bad) {
      expect(() => parseBody(putWorkloadBody, { ...parsed, budget_microusd: '5000000', ...change })).toThrow(
        expect.objectContaining({ code: 'invalid_request', param }),
      );
    }
  });
});
