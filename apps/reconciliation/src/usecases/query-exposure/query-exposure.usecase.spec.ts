import { InMemoryReconciliationStore } from '../../../test/in-memory-store';
import { QueryExposure } from './query-exposure.usecase';

describe('QueryExposure', () => {
  it('reports settled, unresolved and pending as separate labelled integer strings next to the budget, never a sum', async () => {
    const s = new InMemoryReconciliationStore();
    s.addAccount('acct-wl', 10_000_000n);
    Object.assign(s.s.accounts.get('acct-wl')!, {
      pendingMicrousd: 300n,
      unresolvedMicrousd: 200n,
      settledMicrousd: 9_007_199_254_740_993n,
    });
    s.addAccount('acct-other', 5n, 'workload', 'wl-other');

    const out = await new QueryExposure(s).execute({ workload_id: 'wl-1' });

    expect(out.workload_id).toBe('wl-1');
    expect(out.accounts).toEqual([
      {
        account_id: 'acct-wl',
        scope: 'workload',
        scope_id: 'wl-1',
        period_start: '2026-11-01T00:00:00.000Z',
        settled_microusd: '9007199254740993',
        unresolved_microusd: '200',
        pending_microusd: '300',
        budget_microusd: '10000000',
        updated_at: expect.any(String),
      },
    ]);
    expect(
      Object.keys(out.accounts[0])
        .filter((k) => k.endsWith('_microusd'))
        .sort(),
    ).toEqual(['budget_microusd', 'pending_microusd', 'settled_microusd', 'unresolved_microusd']);
  });
});
