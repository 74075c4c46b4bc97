import { Inject, Injectable } from '@nestjs/common';
import { settledCostFields, SettledCostFields } from '@gateway/contracts';
import type { Logger } from 'pino';
import {
  AttemptRepository,
  buildLedgerRow,
  CaseRepository,
  CatalogRepository,
  LedgerRepository,
  priceRevisionOf,
  ReconciliationRepository,
  ReconciliationStore,
  ReservationHoldRepository,
} from '@gateway/db';
import { attemptMachine, priceUsage } from '@gateway/domain';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';
import { ReconciliationError } from '../../reconciliation.errors';
import { lockOpenCase, resolveHold } from '../case-resolution';
import { AttemptPort, CasePort, HoldPort, LedgerPort, MoneyPorts } from '../ports';
import { attemptFacts } from '../sanitised-fields';
import { ImportUsageCommand } from './import-usage.command';

export interface ImportUsageResult {
  case_id: string;
  status: 'resolved';
  action_id: string;
  attempt_id: string;
  ledger_entry_id: string;
  usage_source: 'provider_export' | 'provider_response' | 'stream_final_chunk';
  price_revision: string;
  cost_microusd: string;
  cost_microusd_by_category: SettledCostFields['cost_microusd_by_category'];
  /** what the evidence reports that the price revision does not price (settled at the priced amount) */
  unpriced: string[];
  /** how the case's exposure ended: settled from evidence, released, and cost beyond what was held */
  settled_microusd: string;
  released_microusd: string;
  overrun_microusd: string;
  reservation_status: string | null;
}

/**
 * Settles a case's attempt from provider usage evidence (DESIGN §7 Settlement): one ledger row
 * priced with the reservation's price revision, usage_source `provider_export`, written with its
 * `usage.settled` event by the one ledger writer; the case's exposure moves from unresolved to
 * settled with the rest released; the case resolves — one transaction.
 */
@Injectable()
export class ImportUsage {
  private readonly p: MoneyPorts;

  constructor(
    @Inject(ReconciliationRepository) store: ReconciliationStore,
    @Inject(CaseRepository) cases: CasePort,
    @Inject(ReservationHoldRepository) holds: HoldPort,
    @Inject(AttemptRepository) attempts: AttemptPort,
    @Inject(LedgerRepository) private readonly ledger: LedgerPort,
    @Inject(CatalogRepository) private readonly catalog: Pick<CatalogRepository, 'priceById'>,
    @InjectIds() private readonly ids: IdGenerator,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {
    this.p = { store, cases, holds, attempts };
  }

  async execute(cmd: ImportUsageCommand, now: Date): Promise<ImportUsageResult> {
    const result = await this.p.store.transaction(async (tx) => {
      const open = await lockOpenCase(this.p, tx, cmd.caseId);
      const { c, action, attempt, reservation } = open;
      if (!attempt) throw new ReconciliationError('case_not_resolvable', `case ${c.id} is not about one attempt; release it instead`);
      if (attempt.status === 'settled') {
        throw new ReconciliationError(
          'attempt_already_settled',
          `attempt ${attempt.id} already has its ledger row; release the case instead`,
        );
      }
      if (!attemptMachine.can(attempt.status, 'settle')) {
        throw new ReconciliationError('case_not_resolvable', `attempt ${attempt.id} is ${attempt.status} and cannot be settled yet`);
      }
      if (!reservation) throw new ReconciliationError('case_not_resolvable', `action ${action.id} has no reservation to price against`);
      // Evidence for another provider request would settle the wrong call, unless the provider
      // echoes the attempt's own id (then the request ids are two names of one call).
      const knownRequestId = c.providerRequestId ?? attempt.providerRequestId;
      if (cmd.providerRequestId === null && !cmd.completion && !cmd.late)
        throw new Error('evidence without a provider request id needs an export completion');
      if (
        knownRequestId &&
        cmd.providerRequestId !== null &&
        knownRequestId !== cmd.providerRequestId &&
        cmd.clientRequestId !== attempt.id
      ) {
        throw new ReconciliationError(
          'provider_request_mismatch',
          `attempt ${attempt.id} was provider request ${knownRequestId}, the evidence is for ${cmd.providerRequestId}`,
        );
      }
      // the attempt's own price (a fallback at its route's), the rule settlement applies too
      const priceRevisionId = priceRevisionOf(attempt.priceRevisionId, reservation.priceRevisionId);
      const price = await this.catalog.priceById(priceRevisionId);
      if (!price) throw new Error(`price revision ${priceRevisionId} missing`);
      const usage = cmd.usage;
      const cost = priceUsage(usage, price);
      const providerRequestId = cmd.providerRequestId ?? knownRequestId;
      const source: ImportUsageResult['usage_source'] = cmd.late?.source ?? 'provider_export';
      const how = cmd.completion
        ? 'settled at zero: no line in an export stated complete'
        : cmd.late
          ? "settled from the provider's response, recorded by dispatch after the orphan sweep"
          : 'settled from provider usage export';
      const evidence = cmd.completion
        ? `settled at zero: the export stated complete for ${cmd.completion.day} (statement ${cmd.completion.statementId}, ${cmd.completion.exportDigest}) has no line for it`
        : cmd.late
          ? `settled from the provider's response (${cmd.providerRequestId ?? 'no provider request id'}), which dispatch offered at ${cmd.late.offeredAt}, after the orphan sweep had opened this case`
          : `settled from provider usage export (${cmd.providerRequestId})`;
      const row = buildLedgerRow({
        id: this.ids.next(),
        facts: attemptFacts(action, attempt, providerRequestId),
        evidence: { kind: 'usage', source, usage, cost },
        priceRevisionId: price.id,
        settledAt: now,
      });
      if (!(await this.ledger.record(tx, row, this.ids.next()))) {
        throw new ReconciliationError('attempt_already_settled', `attempt ${attempt.id} already has its ledger row`);
      }
      await this.p.attempts.transition(tx, attempt.id, 'settle', `${how} (case ${c.id})`, now, {
        usageSource: source,
        providerRequestId,
        inputTokens: usage.inputTokens,
        cachedInputTokens: usage.cachedInputTokens,
        outputTokensTotal: usage.outputTokens,
        reasoningTokens: usage.reasoningTokens,
      });
      const plan = await resolveHold(this.p, tx, open, cost.total, `case ${c.id}: ${how}`, now);
      const released = plan?.releasedMicrousd ?? 0n;
      const overrun = plan?.overrunMicrousd ?? 0n;
      await this.p.cases.resolve(tx, c.id, {
        resolution: `${evidence}: ${cost.total} micro-USD settled, ${released} released`,
        resolvedBy: cmd.actor,
        resolvedAt: now,
        details: {
          usage_source: source,
          ledger_entry_id: row.id,
          settled_microusd: cost.total.toString(),
          released_microusd: released.toString(),
          overrun_microusd: overrun.toString(),
          ...(cost.unpriced.length > 0 ? { unpriced: cost.unpriced } : {}),
          ...(cmd.completion
            ? {
                export_completion_id: cmd.completion.statementId,
                export_digest: cmd.completion.exportDigest,
                export_day: cmd.completion.day,
              }
            : {}),
        },
      });
      return {
        case_id: c.id,
        status: 'resolved' as const,
        action_id: action.id,
        attempt_id: attempt.id,
        ledger_entry_id: row.id,
        usage_source: source,
        price_revision: price.id,
        cost_microusd: cost.total.toString(),
        cost_microusd_by_category: settledCostFields(cost).cost_microusd_by_category,
        unpriced: cost.unpriced,
        settled_microusd: cost.total.toString(),
        released_microusd: released.toString(),
        overrun_microusd: overrun.toString(),
        reservation_status: plan?.movement.status ?? null,
      };
    });
    this.log.info(
      { case_id: result.case_id, attempt_id: result.attempt_id, cost_microusd: result.cost_microusd },
      'case settled from provider usage export',
    );
    return result;
  }
}
