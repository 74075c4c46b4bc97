import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { usageOfReport } from '@gateway/contracts';
import { CaseRepository, isTransientDatabaseError } from '@gateway/db';
import { InjectLogger } from '@gateway/service-kit';
import { ReconciliationError } from '../../reconciliation.errors';
import { ImportUsage } from './import-usage.usecase';

/** Who resolved a case settled from late evidence (the case's `resolved_by`). */
export const LATE_EVIDENCE_ACTOR = 'gateway:late-evidence';

export type LateEvidenceCases = Pick<CaseRepository, 'withLateEvidence' | 'setLateEvidenceAside'>;

/**
 * Settles the `orphaned_attempt` cases that dispatch offered late evidence to: the provider's usage
 * it held for an attempt the orphan sweep had already cut (docs/decisions.md, "Evidence that comes
 * after the orphan sweep"). Each goes through `ImportUsage`, the one path that settles a case from
 * usage (one ledger row at the reservation's price revision, the case resolved, its exposure moved
 * from unresolved to settled and the rest released), with the ledger row's usage source the
 * response's own. Evidence the case refuses (another provider request, an attempt settled since),
 * that the pricing refuses (counts that contradict each other) or the ledger cannot hold, or that no
 * longer parses, is set aside on the case, which stays open for an operator; only a database out of
 * service leaves it for the next sweep.
 */
@Injectable()
export class SettleLateEvidence {
  constructor(
    @Inject(CaseRepository) private readonly cases: LateEvidenceCases,
    private readonly importUsage: ImportUsage,
    @InjectLogger() private readonly log: Pick<Logger, 'error'>,
  ) {}

  /** Settles up to `limit` cases from the evidence they hold; how many it settled. */
  async execute(now: Date, limit: number): Promise<number> {
    let settled = 0;
    for (const { caseId, evidence } of await this.cases.withLateEvidence(limit)) {
      if ('unreadable' in evidence) {
        await this.setAside(caseId, `unreadable: ${evidence.unreadable}`);
        continue;
      }
      try {
        await this.importUsage.execute(
          {
            caseId,
            providerRequestId: evidence.provider_request_id,
            usage: usageOfReport(evidence, evidence.output_includes_reasoning),
            actor: LATE_EVIDENCE_ACTOR,
            late: { source: evidence.usage_source, offeredAt: evidence.offered_at },
          },
          now,
        );
        settled += 1;
      } catch (err) {
        // Only a database that is out of service is worth another pass; anything else (the case
        // refused it, counts the domain rejects, a count beyond the ledger's column) would fail
        // every pass alike and hold back the cases after it.
        if (isTransientDatabaseError(err)) throw err;
        const why = err instanceof ReconciliationError ? `${err.code}: ${err.message}` : `refused: ${(err as Error).message}`;
        await this.setAside(caseId, why.slice(0, 500));
      }
    }
    return settled;
  }

  private async setAside(caseId: string, why: string): Promise<void> {
    await this.cases.setLateEvidenceAside(caseId, why);
    this.log.error({ case_id: caseId, why }, 'late attempt evidence not used; the case stays open for an operator');
  }
}
