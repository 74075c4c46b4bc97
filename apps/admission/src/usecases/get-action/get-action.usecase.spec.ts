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
    winnerAttemptId: null,
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

  it('shows each attempt of the tree: role, number, route, its own hold, winner and deadline outcome', async () => {
    const attempt = (n: number, role: string, winner: boolean, deadlineOutcome: string | null): ActionStatusView['attempts'][number] => ({
      attemptId: `att-${n}`,
      attemptNo: n,
      role,
      routeId: 'route-1',
      routeVersion: 1,
      holdMicrousd: 4_000n,
      winner,
      deadlineOutcome,
      policyRevisionId: 'hp-1',
      status: winner ? 'settled' : 'reconciliation_required',
      statusReason: 'x',
      providerRequestId: null,
      effectiveCandidates: 1,
      returnedCandidates: winner ? 1 : null,
      candidateOutcomes: [],
      promptBlockReason: null,
      inputTokens: null,
      outputTokensTotal: null,
      usageSource: null,
      costMicrousd: null,
      outcomes: { deliveryOutcome: null, acceptanceVerdict: null, acceptanceReason: null, financialState: null },
    });
    const out = await getAction(
      view({ winnerAttemptId: 'att-2', attempts: [attempt(1, 'primary', false, 'cancelled'), attempt(2, 'hedge', true, 'on_time')] }),
    ).execute('key', ACTION);
    expect(out.winner_attempt_id).toBe('att-2');
    expect(out.attempts).toEqual([
      expect.objectContaining({
        attempt_no: 1,
        role: 'primary',
        winner: false,
        deadline_outcome: 'cancelled',
        hold_microusd: '4000',
        policy_revision_id: 'hp-1',
      }),
      expect.objectContaining({ attempt_no: 2, role: 'hedge', winner: true, deadline_outcome: 'on_time', route_id: 'route-1' }),
    ]);
  });
});
