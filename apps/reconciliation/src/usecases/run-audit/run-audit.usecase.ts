import { Inject, Injectable } from '@nestjs/common';
import { auditQuery } from '@gateway/contracts';
import { AuditPeriod, AuditRepository, ControlsRepository } from '@gateway/db';
import { addUtcDays, auditReport, AuditReportWire } from '@gateway/domain';
import { invalidRequest } from '../invalid-request';

/** The most items each difference list reads (comparisons, unmatched lines, unresolved reservations); more sets `differences_truncated`. */
export const AUDIT_DIFFERENCE_LIMIT = 5000;

export interface RunAuditPorts {
  audit: Pick<
    AuditRepository,
    | 'reservationTotals'
    | 'ledgerTotals'
    | 'topicTotals'
    | 'exportTotals'
    | 'comparisons'
    | 'unmatchedExportLines'
    | 'unresolvedReservations'
  >;
  controls: Pick<ControlsRepository, 'countTotals' | 'outputPerRequestBetween'>;
}

/**
 * `GET /audit` (issue 13, the weekly audit): the UTC days [from, to] as the period
 * [from 00:00, to + 1 00:00), per workload × route, side by side: reservations made in it by
 * their state now, the ledger rows settled in it, the settled events received for it, the
 * imported export lines of it, the requested / effective / returned counts and output per
 * request (the daily controls' figures over the period); and the disagreeing items, listed.
 */
@Injectable()
export class RunAudit {
  constructor(
    @Inject(AuditRepository) private readonly audit: RunAuditPorts['audit'],
    @Inject(ControlsRepository) private readonly controls: RunAuditPorts['controls'],
  ) {}

  async execute(query: unknown): Promise<{ report: AuditReportWire; format: 'json' | 'csv' }> {
    const parsed = auditQuery.safeParse(query ?? {});
    if (!parsed.success) throw invalidRequest(parsed.error);
    const q = parsed.data;
    const period: AuditPeriod = {
      from: new Date(`${q.from}T00:00:00.000Z`),
      to: new Date(`${addUtcDays(q.to, 1)}T00:00:00.000Z`),
      workloadId: q.workload_id,
      limit: AUDIT_DIFFERENCE_LIMIT,
    };
    const [reservations, ledger, topic, exports, comparisons, unmatched, unresolved, counts, output] = await Promise.all([
      this.audit.reservationTotals(period),
      this.audit.ledgerTotals(period),
      this.audit.topicTotals(period),
      this.audit.exportTotals(period),
      this.audit.comparisons(period),
      this.audit.unmatchedExportLines(period),
      this.audit.unresolvedReservations(period),
      this.controls.countTotals(q.from, q.to, q.workload_id),
      this.controls.outputPerRequestBetween(period.from, period.to, q.workload_id),
    ]);
    const report = auditReport({
      from: q.from,
      to: q.to,
      reservations,
      ledger,
      topic,
      exports,
      counts,
      output,
      attempts: comparisons.rows,
      unmatchedExportLines: unmatched.rows,
      unresolvedReservations: unresolved.rows,
      truncated: comparisons.truncated || unmatched.truncated || unresolved.truncated,
    });
    return { report, format: q.format ?? 'json' };
  }
}
