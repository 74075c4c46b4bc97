import type { ActionStatusView, CatalogRepository, ViewsRepository, WorkloadPolicy } from '@gateway/db';
import { GetAction } from './get-action.usecase';

const ACTION = '0d6f5b0e-8a57-4c4e-9c0f-6a1f2d3b4c5d';

function view(over: Partial<ActionStatusView> = {}): ActionStatusView {
  return {
    actionId: ACTION,
    workloadId: 'wl-1',
    status: 'answered',
    statusReason: 'answered (ok)',
    modelAlias: 'approved-standard',
    routeId: 'route-1',
    routeVersion: 1,
    streamMode: 'none',
    requestedCandidates: null,
    effectiveCandidates: 1,
    returnedCandidates: 1,
    outputCeiling: 256,
    createdAt: new Date('2026-12-01T00:00:00Z'),
    requestId: 'req-1',
    outcomes: { deliveryOutcome: 'answered', acceptanceVerdict: 'valid', acceptanceReason: 'ok', financialState: 'unresolved' },
    reservation: {
      status: 'unresolved',
      reservedOutputTokens: 256,
      reservedMicrousd: 10_000n,
      settledMicrousd: 0n,
      unresolvedMicrousd: 6_000n,
      releasedMicrousd: 0n,
      priceRevisionId: 'price-1',
    },
    attempts: [],
    openCases: [],
    ...over,
  };
}

function getAction(v: ActionStatusView) {
  const catalog: Pick<CatalogRepository, 'workloadByKeyHash'> = { workloadByKeyHash: async () => ({ id: 'wl-1' }) as WorkloadPolicy };
  const views: Pick<ViewsRepository, 'action'> = { action: async () => v };
  return new GetAction(catalog, views);
}

describe('GetAction', () => {
  it('shows delivery, acceptance and money as three separate outcomes, with the request id', async () => {
    const out = await getAction(view()).execute('key', ACTION);
    expect(out).toMatchObject({
      request_id: 'req-1',
      status: 'answered',
      delivery_outcome: 'answered',
      acceptance: { verdict: 'valid', reason: 'ok' },
      financial_state: 'unresolved',
    });
  });

  it('reports what is still pending with the domain rule, whatever the reservation state', async () => {
    const out = await getAction(view()).execute('key', ACTION);
    expect(out.money_microusd).toEqual({ reserved: '10000', settled: '0', unresolved: '6000', released: '0', pending: '4000' });
  });

  it('shows no verdict when there was no answer to judge', async () => {
    const out = await getAction(
      view({ outcomes: { deliveryOutcome: 'failed', acceptanceVerdict: null, acceptanceReason: null, financialState: 'settled' } }),
    ).execute('key', ACTION);
    expect(out).toMatchObject({ delivery_outcome: 'failed', acceptance: null, financial_state: 'settled' });
  });
});
