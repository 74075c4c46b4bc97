import { Inject, Injectable } from '@nestjs/common';
import { AdmissionDecisionV1 } from '@gateway/contracts';
import { ControlsRepository, DecisionFact, ProcessedEventRepository } from '@gateway/db';
import { handleEachOnce } from '@gateway/messaging';

const CONSUMER = 'reconciliation.controls-decisions';

export interface RecordDecisionsPorts {
  processed: Pick<ProcessedEventRepository, 'transaction' | 'recordMany'>;
  controls: Pick<ControlsRepository, 'addDecisions'>;
}

/** A decision as the tallies count it; null when it names no workload (an unknown key: nobody to attribute it to). */
export function decisionFact(e: AdmissionDecisionV1): DecisionFact | null {
  if (!e.workload_id) return null;
  const admitted = e.policy_result === 'allow';
  return {
    at: new Date(e.timestamp),
    workloadId: e.workload_id,
    routeId: e.route_id ?? '',
    requested: e.requested_candidate_count,
    effective: e.effective_candidate_count,
    admitted,
    reason: admitted ? null : /^[a-z0-9_]{1,64}$/.test(e.policy_reason ?? '') ? (e.policy_reason as string) : 'unknown',
  };
}

/**
 * Adds a batch of admission decisions to the daily tallies in one transaction with their event
 * ids (a redelivered decision counts once).
 */
@Injectable()
export class RecordDecisions {
  constructor(
    @Inject(ProcessedEventRepository) private readonly processed: RecordDecisionsPorts['processed'],
    @Inject(ControlsRepository) private readonly controls: RecordDecisionsPorts['controls'],
  ) {}

  async execute(events: readonly AdmissionDecisionV1[]): Promise<number> {
    const results = await handleEachOnce(this.processed, CONSUMER, events, async (tx, fresh) => {
      const facts = fresh.map(decisionFact).filter((f): f is DecisionFact => f !== null);
      await this.controls.addDecisions(tx, facts);
      return fresh.map(() => true);
    });
    return results.filter((r) => !r.duplicate).length;
  }
}
