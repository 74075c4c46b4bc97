import { createHash } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { usageOfReport } from '@gateway/contracts';
import {
  AttemptRepository,
  AuditRepository,
  CaseRepository,
  CatalogRepository,
  EXPORT_MISMATCH,
  ExportMatch,
  ReconciliationRepository,
  ReconciliationStore,
} from '@gateway/db';
import { DomainError, priceUsage } from '@gateway/domain';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';
import { CompleteUsageExport, CompletionReport } from '../complete-export/complete-export.usecase';
import { ImportUsage } from '../import-usage/import-usage.usecase';
import type { AttemptPort, CasePort } from '../ports';
import { sanitisedFields } from '../sanitised-fields';
import { ExportFormat, ExportLine, ImportExportBody, InvalidLine, parseUsageExport } from './usage-export';

/** What became of one export line. */
export type ExportLineOutcome =
  /** the line settled an attempt whose case lacked evidence (through the single-case import) */
  | 'resolved'
  /** the attempt's ledger row already says exactly this */
  | 'confirmed'
  /** the ledger row says something else: a case was opened (or is open) — never a silent correction */
  | 'mismatch'
  /** the attempt has no ledger row and no case yet (still in flight or awaiting settlement): import again later */
  | 'pending'
  /** no attempt the gateway knows: spend the gateway never saw */
  | 'unmatched'
  /** a case the line should resolve refused it (e.g. another provider request id) */
  | 'refused';

export interface ExportLineReport {
  line: number;
  provider_request_id: string;
  outcome: ExportLineOutcome;
  attempt_id: string | null;
  case_id: string | null;
  /** the line's usage priced at the attempt's reservation price (null when unmatched) */
  export_cost_microusd: string | null;
  ledger_cost_microusd: string | null;
  detail: string | null;
}

export interface ExportImportReport {
  format: ExportFormat;
  lines: number;
  counts: Record<ExportLineOutcome | 'invalid', number>;
  /** matched lines only: what the export costs at the gateway's prices, and what the ledger says */
  export_cost_microusd: string;
  ledger_cost_microusd: string;
  /** tokens on lines that match no attempt (their cost is unknown: no route, no price) */
  unmatched_tokens: { input: number; output: number };
  invalid: InvalidLine[];
  results: ExportLineReport[];
  /** present when the call stated the export complete: what the statement settled at zero */
  completion?: CompletionReport;
}

/**
 * Bulk provider-usage import (issue 15): each export line is matched to an attempt by provider
 * request id (or by the gateway's attempt id, `client_request_id`) and then resolves its open case
 * (the single-case import, one home), confirms its ledger row, or opens an `export_mismatch` case
 * when the two disagree; lines that match nothing are listed first among what matters. Importing
 * the same export twice changes nothing: a resolved case's attempt is then settled and confirmed,
 * and a mismatch case is unique per attempt.
 */
@Injectable()
export class ImportUsageExport {
  constructor(
    @Inject(ReconciliationRepository)
    private readonly store: Pick<ReconciliationStore, 'transaction' | 'lockAction'> & Pick<ReconciliationRepository, 'attemptsForExport'>,
    @Inject(CaseRepository) private readonly cases: Pick<CasePort, 'open'>,
    @Inject(AttemptRepository) private readonly attempts: Pick<AttemptPort, 'byId'>,
    @Inject(CatalogRepository) private readonly catalog: Pick<CatalogRepository, 'priceById'>,
    private readonly importUsage: ImportUsage,
    @Inject(AuditRepository) private readonly audit: Pick<AuditRepository, 'recordExportLines'>,
    @Inject(CompleteUsageExport) private readonly completeExport: Pick<CompleteUsageExport, 'execute'>,
    @InjectIds() private readonly ids: IdGenerator,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {}

  async execute(cmd: ImportExportBody & { actor: string }, now: Date): Promise<ExportImportReport> {
    if (cmd.complete && cmd.complete.day > now.toISOString().slice(0, 10)) {
      throw new DomainError(
        'invalid_request',
        `complete.day: ${cmd.complete.day} has not begun (UTC); an export cannot be complete for it`,
        'complete.day',
      );
    }
    const parsed = parseUsageExport(cmd.format, cmd.content);
    // An unreadable line may be the one naming an attempt: "no line" would then settle billed usage at zero.
    if (cmd.complete && parsed.invalid.length > 0) {
      throw new DomainError(
        'invalid_request',
        `complete: the export has ${parsed.invalid.length} invalid line(s) (first: line ${parsed.invalid[0].line}); fix them before stating it complete`,
        'complete',
      );
    }
    const values = parsed.lines.map((l) => l.value);
    const matches = await this.store.attemptsForExport(
      values.map((v) => v.provider_request_id),
      values.flatMap((v) => (v.client_request_id ? [v.client_request_id] : [])),
    );
    const byRequest = new Map(matches.filter((m) => m.providerRequestId).map((m) => [m.providerRequestId as string, m]));
    const byAttempt = new Map(matches.map((m) => [m.attemptId, m]));
    // The attempt id the gateway sent (`x-client-request-id`) is its own and unique: it decides when
    // the line echoes one. A provider request id alone is unique only per provider (two providers,
    // or two simulator processes, may hand out the same one), so it matches only otherwise.
    const matchOf = (v: ExportLine) =>
      (v.client_request_id ? byAttempt.get(v.client_request_id) : undefined) ?? byRequest.get(v.provider_request_id);
    const results: ExportLineReport[] = [];
    let exportCost = 0n;
    let ledgerCost = 0n;
    const unmatchedTokens = { input: 0, output: 0 };
    for (const { line, value } of parsed.lines) {
      const match = matchOf(value);
      if (!match) {
        unmatchedTokens.input += value.input_tokens;
        unmatchedTokens.output += value.output_tokens_total;
        results.push(report(line, value, 'unmatched', null, null, null, null, 'no attempt of the gateway has this request id'));
        continue;
      }
      const r = await this.one(line, value, match, cmd.actor, now);
      if (r.export_cost_microusd !== null) exportCost += BigInt(r.export_cost_microusd);
      if (r.ledger_cost_microusd !== null) ledgerCost += BigInt(r.ledger_cost_microusd);
      results.push(r);
    }
    // each line's record (no text: ids, counts, the import's price of it): the weekly audit's export
    // side, and "an imported line named this attempt" for the export-complete rule below
    await this.audit.recordExportLines(
      parsed.lines.map(({ value }, i) => ({
        providerRequestId: value.provider_request_id,
        clientRequestId: value.client_request_id ?? null,
        attemptId: results[i].attempt_id,
        outcome: results[i].outcome,
        inputTokens: value.input_tokens,
        cachedInputTokens: value.cached_input_tokens,
        outputTokensTotal: value.output_tokens_total,
        reasoningTokens: value.reasoning_tokens,
        exportCostMicrousd: results[i].export_cost_microusd === null ? null : BigInt(results[i].export_cost_microusd as string),
        lineAt: value.timestamp ? new Date(value.timestamp) : null,
      })),
      now,
      cmd.actor,
    );
    const counts = { resolved: 0, confirmed: 0, mismatch: 0, pending: 0, unmatched: 0, refused: 0, invalid: parsed.invalid.length };
    for (const r of results) counts[r.outcome] += 1;
    this.log.info({ format: cmd.format, lines: parsed.lines.length + parsed.invalid.length, ...counts }, 'provider usage export imported');
    const completion = cmd.complete
      ? await this.completeExport.execute(
          {
            day: cmd.complete.day,
            routeIds: cmd.complete.routes,
            exportDigest: cmd.complete.export_digest ?? `sha256:${createHash('sha256').update(cmd.content).digest('hex')}`,
            actor: cmd.actor,
          },
          now,
        )
      : undefined;
    return {
      ...(completion ? { completion } : {}),
      format: cmd.format,
      lines: parsed.lines.length + parsed.invalid.length,
      counts,
      export_cost_microusd: exportCost.toString(),
      ledger_cost_microusd: ledgerCost.toString(),
      unmatched_tokens: unmatchedTokens,
      invalid: parsed.invalid,
      results,
    };
  }

  private async one(line: number, value: ExportLine, m: ExportMatch, actor: string, now: Date): Promise<ExportLineReport> {
    const usage = usageOfReport(value, true);
    const price = m.priceRevisionId ? await this.catalog.priceById(m.priceRevisionId) : null;
    const exportCost = price ? priceUsage(usage, price).total : null;
    const exportCostText = exportCost?.toString() ?? null;
    if (m.ledger) {
      const ledgerText = m.ledger.costMicrousd.toString();
      const same =
        m.ledger.inputTokens === value.input_tokens &&
        m.ledger.cachedInputTokens === value.cached_input_tokens &&
        m.ledger.outputTokensTotal === value.output_tokens_total &&
        m.ledger.reasoningTokens === value.reasoning_tokens &&
        (exportCost === null || exportCost === m.ledger.costMicrousd);
      if (same) return report(line, value, 'confirmed', m.attemptId, null, exportCostText, ledgerText, null);
      const caseId = await this.openMismatch(m, value, exportCost, now);
      return report(line, value, 'mismatch', m.attemptId, caseId, exportCostText, ledgerText, 'the export disagrees with the ledger row');
    }
    if (m.openCaseId) {
      try {
        const resolved = await this.importUsage.execute(
          {
            caseId: m.openCaseId,
            providerRequestId: value.provider_request_id,
            clientRequestId: value.client_request_id ?? null,
            usage,
            actor,
          },
          now,
        );
        return report(line, value, 'resolved', m.attemptId, m.openCaseId, resolved.cost_microusd, resolved.cost_microusd, null);
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        return report(line, value, 'refused', m.attemptId, m.openCaseId, exportCostText, null, `${err.code}: ${err.message}`);
      }
    }
    return report(line, value, 'pending', m.attemptId, null, exportCostText, null, `attempt is ${m.attemptStatus} without a case yet`);
  }

  /** Opens (once per attempt) the case of an export line that disagrees with the ledger; its exposure is what the export claims beyond the ledger. */
  private async openMismatch(m: ExportMatch, value: ExportLine, exportCost: bigint | null, now: Date): Promise<string | null> {
    const ledgerCost = m.ledger?.costMicrousd ?? 0n;
    const beyond = exportCost !== null && exportCost > ledgerCost ? exportCost - ledgerCost : 0n;
    return this.store.transaction(async (tx) => {
      const action = await this.store.lockAction(tx, m.actionId);
      const attempt = await this.attempts.byId(tx, m.attemptId);
      if (!action || !attempt) return null;
      const caseId = this.ids.next();
      const opened = await this.cases.open(
        tx,
        {
          id: caseId,
          actionId: m.actionId,
          attemptId: m.attemptId,
          reason: EXPORT_MISMATCH,
          providerRequestId: value.provider_request_id,
          exposureMicrousd: beyond,
          details: {
            ledger: {
              input_tokens: m.ledger?.inputTokens,
              cached_input_tokens: m.ledger?.cachedInputTokens,
              output_tokens_total: m.ledger?.outputTokensTotal,
              reasoning_tokens: m.ledger?.reasoningTokens,
              cost_microusd: ledgerCost.toString(),
            },
            export: {
              input_tokens: value.input_tokens,
              cached_input_tokens: value.cached_input_tokens,
              output_tokens_total: value.output_tokens_total,
              reasoning_tokens: value.reasoning_tokens,
              cost_microusd: exportCost?.toString() ?? null,
            },
          },
          openedAt: now,
        },
        { eventId: this.ids.next(), fields: sanitisedFields(action, attempt, now) },
      );
      return opened ? caseId : null;
    });
  }
}

function report(
  line: number,
  value: ExportLine,
  outcome: ExportLineOutcome,
  attemptId: string | null,
  caseId: string | null,
  exportCost: string | null,
  ledgerCost: string | null,
  detail: string | null,
): ExportLineReport {
  return {
    line,
    provider_request_id: value.provider_request_id,
    outcome,
    attempt_id: attemptId,
    case_id: caseId,
    export_cost_microusd: exportCost,
    ledger_cost_microusd: ledgerCost,
    detail,
  };
}
