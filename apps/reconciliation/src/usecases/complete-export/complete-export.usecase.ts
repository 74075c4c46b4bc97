import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { usageOfReport } from '@gateway/contracts';
import { UsageExportRepository } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';
import { EXPORT_COMPLETE_CONFIG, ExportCompleteConfig } from '../../reconciliation.config';
import { ImportUsage } from '../import-usage/import-usage.usecase';

/** What the provider billed for a request it has no line for. */
const ZERO_USAGE = usageOfReport({ input_tokens: 0, cached_input_tokens: 0, output_tokens_total: 0, reasoning_tokens: 0 }, true);

export interface CompleteExportCommand {
  /** the UTC day the export is complete for (YYYY-MM-DD) */
  day: string;
  /** the routes whose traffic the export covers (the routes of that provider account) */
  routeIds: string[];
  /** `sha256:<hex>` of the whole export file */
  exportDigest: string;
  actor: string;
}

export interface CompletionReport {
  statement_id: string;
  day: string;
  route_ids: string[];
  export_digest: string;
  /** who stated it first, and when (stating it again keeps these) */
  stated_by: string;
  stated_at: string;
  /** attempts settled at zero on this statement by this call */
  settled_at_zero: Array<{ attempt_id: string; case_id: string; case_reason: string; released_microusd: string }>;
  /** unresolved attempts without a line whose case is younger than the grace period: state it again later */
  within_grace: number;
  /** attempts the rule chose whose case refused it (e.g. resolved meanwhile), with the reason */
  refused: Array<{ attempt_id: string; case_id: string; detail: string }>;
  grace_ms: number;
}

/**
 * "This export is complete for these routes and this UTC day" (issue 15): attempts the provider
 * billed nothing for have no export line, so no line resolves them. On the operator's statement,
 * every attempt of those routes that started that day, ended (its case is older than the grace
 * period; in-flight or not yet settled attempts are never taken), is unresolved on an open case and
 * was named by no imported export line is settled at zero usage with evidence `provider_export`,
 * through the single-case import (`ImportUsage.execute`, the one home of settling from evidence).
 * The statement is recorded once per (day, routes, digest) with who made it and when; stating it
 * again settles only what became eligible since. A later export line for an attempt settled this
 * way meets a zero ledger row and opens an `export_mismatch` case: never a silent correction.
 */
@Injectable()
export class CompleteUsageExport {
  constructor(
    @Inject(UsageExportRepository) private readonly exports: Pick<UsageExportRepository, 'stateCompletion' | 'unresolvedWithoutLine'>,
    @Inject(ImportUsage) private readonly importUsage: Pick<ImportUsage, 'execute'>,
    @Inject(EXPORT_COMPLETE_CONFIG) private readonly config: ExportCompleteConfig,
    @InjectIds() private readonly ids: IdGenerator,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {}

  async execute(cmd: CompleteExportCommand, now: Date): Promise<CompletionReport> {
    const statement = await this.exports.stateCompletion({
      id: this.ids.next(),
      day: cmd.day,
      routeIds: cmd.routeIds,
      exportDigest: cmd.exportDigest,
      statedBy: cmd.actor,
      statedAt: now,
    });
    const { eligible, withinGrace } = await this.exports.unresolvedWithoutLine({
      day: statement.day,
      routeIds: statement.routeIds,
      openedBefore: new Date(now.getTime() - this.config.graceMs),
    });
    const report: CompletionReport = {
      statement_id: statement.id,
      day: statement.day,
      route_ids: statement.routeIds,
      export_digest: statement.exportDigest,
      stated_by: statement.statedBy,
      stated_at: statement.statedAt.toISOString(),
      settled_at_zero: [],
      within_grace: withinGrace,
      refused: [],
      grace_ms: this.config.graceMs,
    };
    for (const a of eligible) {
      try {
        const r = await this.importUsage.execute(
          {
            caseId: a.caseId,
            providerRequestId: null,
            usage: ZERO_USAGE,
            actor: cmd.actor,
            completion: { statementId: statement.id, exportDigest: statement.exportDigest, day: statement.day },
          },
          now,
        );
        report.settled_at_zero.push({
          attempt_id: a.attemptId,
          case_id: a.caseId,
          case_reason: a.caseReason,
          released_microusd: r.released_microusd,
        });
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        report.refused.push({ attempt_id: a.attemptId, case_id: a.caseId, detail: `${err.code}: ${err.message}` });
      }
    }
    this.log.info(
      {
        statement_id: statement.id,
        day: statement.day,
        routes: statement.routeIds.length,
        settled_at_zero: report.settled_at_zero.length,
        within_grace: withinGrace,
      },
      'usage export stated complete',
    );
    return report;
  }
}
