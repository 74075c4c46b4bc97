import { settledCostFields } from '@gateway/contracts';
import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import type { UsageSettledV1 } from '@gateway/contracts';
import { CatalogRepository, OutboxRepository, ReconciliationRepository, ReconciliationStore } from '@gateway/db';
import { attemptMachine, priceUsage } from '@gateway/domain';
import { InjectLogger } from '@gateway/service-kit';
import { ReconciliationError } from '../../reconciliation.errors';
import { lockOpenCase, resolveHold } from '../case-resolution';
import { sanitisedFields } from '../sanitised-fields';
import { ImportUsageCommand } from './import-usage.command';

export interface ImportUsageResult {
  case_id: string;
  status: 'resolved';
  action_id: string;
  attempt_id: string;
  ledger_entry_id: string;
  usage_source: 'provider_export';
  price_revision: string;
  cost_microusd: string;
  cost_microusd_by_category: { input: string; cached_input: string; output: string; reasoning: string };
  /** how the case's exposure ended: settled from evidence, released, and cost beyond what was held */
  settled_microusd: string;
  released_microusd: string;
  overrun_microusd: string;
  reservation_status: string | null;
}

/**
 * Settles a case's attempt from provider usage evidence (DESIGN §7 Settlement): one ledger row
 * priced with the reservation's price revision, usage_source `provider_export`; the case's
 * exposure moves from unresolved to settled with the rest released; the case resolves; and
 * `usage.settled` is published through the outbox — one transaction.
 */
@Injectable()
export class ImportUsage {
  constructor(
    @Inject(ReconciliationRepository) private readonly store: ReconciliationStore,
    @Inject(CatalogRepository) private readonly catalog: Pick<CatalogRepository, 'priceById'>,
    @Inject(OutboxRepository) private readonly outbox: Pick<OutboxRepository, 'append'>,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {}

  async execute(cmd: ImportUsageCommand, now: Date): Promise<ImportUsageResult> {
    const result = await this.store.transaction(async (tx) => {
      const open = await lockOpenCase(this.store, tx, cmd.caseId);
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
      // Evidence for another provider request would settle the wrong call.
      const knownRequestId = c.providerRequestId ?? attempt.providerRequestId;
      if (knownRequestId && knownRequestId !== cmd.providerRequestId) {
        throw new ReconciliationError(
          'provider_request_mismatch',
          `attempt ${attempt.id} was provider request ${knownRequestId}, the evidence is for ${cmd.providerRequestId}`,
        );
      }
      const price = await this.catalog.priceById(reservation.priceRevisionId);
      if (!price) throw new Error(`price revision ${reservation.priceRevisionId} missing`);
      const cost = priceUsage(
        {
          inputTokens: cmd.inputTokens,
          cachedInputTokens: cmd.cachedInputTokens,
          outputTokens: cmd.outputTokensTotal,
          reasoningTokens: cmd.reasoningTokens,
          outputIncludesReasoning: true,
        },
        price,
      );
      const ledgerId = randomUUID();
      // The ledger's returned count is what the gateway saw in a response; an orphan saw none.
      const returned = attempt.returnedCandidates ?? 0;
      const inserted = await this.store.insertLedger(tx, {
        id: ledgerId,
        attemptId: attempt.id,
        actionId: action.id,
        attemptRole: attempt.role,
        workloadId: action.workloadId,
        environment: action.environment,
        routeId: attempt.routeId,
        routeVersion: attempt.routeVersion,
        modelAlias: action.modelAlias,
        providerRequestId: cmd.providerRequestId,
        requestedCandidates: action.requestedCandidates,
        effectiveCandidates: action.effectiveCandidates,
        returnedCandidates: returned,
        inputTokens: cmd.inputTokens,
        cachedInputTokens: cmd.cachedInputTokens,
        outputTokensTotal: cmd.outputTokensTotal,
        reasoningTokens: cmd.reasoningTokens,
        totalTokens: cmd.inputTokens + cmd.outputTokensTotal,
        streamMode: action.streamMode,
        usageSource: 'provider_export',
        priceRevisionId: price.id,
        inputMicrousd: cost.input,
        cachedInputMicrousd: cost.cachedInput,
        outputMicrousd: cost.output,
        reasoningMicrousd: cost.reasoning,
        costMicrousd: cost.total,
        settledAt: now,
      });
      if (!inserted) throw new ReconciliationError('attempt_already_settled', `attempt ${attempt.id} already has its ledger row`);
      await this.store.setAttemptStatus(
        tx,
        attempt.id,
        attemptMachine.transition(attempt.status, 'settle'),
        `settled from provider usage export (case ${c.id})`,
        now,
        {
          usageSource: 'provider_export',
          providerRequestId: cmd.providerRequestId,
          inputTokens: cmd.inputTokens,
          cachedInputTokens: cmd.cachedInputTokens,
          outputTokensTotal: cmd.outputTokensTotal,
          reasoningTokens: cmd.reasoningTokens,
        },
      );
      const plan = await resolveHold(this.store, tx, open, cost.total, `case ${c.id}: settled from provider usage export`, now);
      const released = plan?.releasedMicrousd ?? 0n;
      const overrun = plan?.overrunMicrousd ?? 0n;
      await this.store.resolveCase(tx, c.id, {
        resolution: `settled from provider usage export (${cmd.providerRequestId}): ${cost.total} micro-USD settled, ${released} released`,
        resolvedBy: cmd.actor,
        resolvedAt: now,
        details: {
          usage_source: 'provider_export',
          ledger_entry_id: ledgerId,
          settled_microusd: cost.total.toString(),
          released_microusd: released.toString(),
          overrun_microusd: overrun.toString(),
        },
      });
      const event: UsageSettledV1 = {
        ...sanitisedFields(action, attempt, now, {
          usageSource: 'provider_export',
          providerRequestId: cmd.providerRequestId,
          inputTokens: cmd.inputTokens,
          outputTokensTotal: cmd.outputTokensTotal,
          returnedCandidates: returned,
        }),
        event_id: randomUUID(),
        price_revision: price.id,
        ...settledCostFields(cost),
        settled_at: now.toISOString(),
      };
      await this.outbox.append(tx, 'usageSettled', action.workloadId, event);
      return {
        case_id: c.id,
        status: 'resolved' as const,
        action_id: action.id,
        attempt_id: attempt.id,
        ledger_entry_id: ledgerId,
        usage_source: 'provider_export' as const,
        price_revision: price.id,
        cost_microusd: cost.total.toString(),
        cost_microusd_by_category: event.cost_microusd_by_category,
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
