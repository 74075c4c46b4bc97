import { DomainError } from '@gateway/domain';
import { InMemoryReconciliationStore } from '../../../test/in-memory-store';
import { ListCases } from './list-cases.usecase';

function store() {
  const s = new InMemoryReconciliationStore();
  s.addAccount('acct', 1000n);
  s.addAdmitted({ actionId: 'a1', reservedMicrousd: 10n, accountIds: ['acct'], deadlineAt: new Date(0), dispatchDeadlineAt: new Date(0) });
  s.addAdmitted({
    actionId: 'a2',
    workloadId: 'wl-2',
    reservedMicrousd: 10n,
    accountIds: ['acct'],
    deadlineAt: new Date(0),
    dispatchDeadlineAt: new Date(0),
  });
  const base = { attemptId: null, providerRequestId: null, openedAt: new Date('2026-11-30T10:00:00Z') };
  s.addCase({
    ...base,
    id: 'c1',
    actionId: 'a1',
    reason: 'usage_missing',
    exposureMicrousd: 12345678901234567n,
    details: { outcome: 'failed', http_status: 502, nested: { secret: 'x' }, list: [1] },
  });
  s.addCase({ ...base, id: 'c2', actionId: 'a2', reason: 'orphaned_attempt', exposureMicrousd: 5n, details: {} });
  return s;
}

describe('ListCases', () => {
  it('returns open cases with money as exact integer strings and only scalar details', async () => {
    const { cases } = await new ListCases(store().cases).execute({});
    expect(cases).toHaveLength(2);
    expect(cases[0]).toMatchObject({
      case_id: 'c1',
      workload_id: 'wl-1',
      status: 'open',
      exposure_microusd: '12345678901234567',
      details: { outcome: 'failed', http_status: 502 },
    });
    expect(cases[0].details).not.toHaveProperty('nested');
    expect(cases[0].details).not.toHaveProperty('list');
  });

  it('filters by workload', async () => {
    const { cases } = await new ListCases(store().cases).execute({ workload_id: 'wl-2' });
    expect(cases.map((c) => c.case_id)).toEqual(['c2']);
  });

  it.each([{ status: 'closed' }, { limit: '0' }, { limit: 'many' }, { limit: '1001' }])('rejects %o as invalid_request', async (q) => {
    await expect(new ListCases(store().cases).execute(q)).rejects.toBeInstanceOf(DomainError);
  });
});
