import { randomUUID } from 'node:crypto';
import { buildLedgerRow, LedgerRow, SettlementEvidence } from '@gateway/db';

/**
 * A ledger row of `workloadId` settled at `settledAt` (an operator-attested 10 micro-USD unless
 * `evidence` says otherwise), for tests that page or export the ledger.
 */
export function ledgerRow(opts: {
  workloadId: string;
  routeId: string;
  priceRevisionId: string;
  settledAt: Date;
  evidence?: SettlementEvidence;
}): LedgerRow {
  return buildLedgerRow({
    id: randomUUID(),
    facts: {
      attemptId: randomUUID(),
      actionId: randomUUID(),
      attemptRole: 'primary',
      requestId: null,
      workloadId: opts.workloadId,
      environment: 'test',
      routeId: opts.routeId,
      routeVersion: 1,
      modelAlias: 'm',
      providerRequestId: null,
      requestedCandidates: null,
      effectiveCandidates: 1,
      returnedCandidates: 1,
      streamMode: 'none',
    },
    evidence: opts.evidence ?? { kind: 'attested', amountMicrousd: 10n, caseId: 'c', attestedBy: 'ops', reason: 'test' },
    priceRevisionId: opts.priceRevisionId,
    settledAt: opts.settledAt,
  });
}
