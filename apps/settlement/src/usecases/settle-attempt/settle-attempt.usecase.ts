import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { ABSENT_CANDIDATE_OUTCOMES, AttemptCompletedV1, CaseReason, SanitisedFields } from '@gateway/contracts';
import {
  AttemptFacts,
  AttemptRepository,
  buildLedgerRow,
  CaseRepository,
  CatalogRepository,
  LedgerRepository,
  ProcessedEventRepository,
  ReservationHoldRepository,
  ReservationView,
  Tx,
} from '@gateway/db';
import {
  applyMovement,
  combineMovements,
  Movement,
  planMoveToUnresolved,
  planReleaseRest,
  planSettle,
  priceUsage,
  usageImplausible,
} from '@gateway/domain';
import { handleOnce } from '@gateway/messaging';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';

const CONSUMER = 'settlement.attempt-completed';

export type SettleOutcome = 'settled' | 'reconciliation_required' | 'duplicate';

/** The repositories settlement uses, narrowed to what it calls (fakes implement these). */
export interface SettlementPorts {
  processed: Pick<ProcessedEventRepository, 'transaction' | 'recordOnce'>;
  holds: Pick<ReservationHoldRepository, 'lock' | 'move'>;
  ledger: Pick<LedgerRepository, 'record'>;
  cases: Pick<CaseRepository, 'open'>;
  attempts: Pick<AttemptRepository, 'lockAttempt' | 'transition' | 'awaitingSettlement'>;
  catalog: Pick<CatalogRepository, 'priceById'>;
}

/**
 * One ledger row per attempt from the provider's aggregate usage (DESIGN §7 Settlement), the
 * reservation moved by the hold planner (rest released when the action is over), and
 * `usage.settled` published with the row — all in the transaction that records the event id, so
 * a redelivered event settles nothing twice. What lacks evidence is never zero: it becomes a
 * reconciliation case and its exposure stays held as unresolved. An attempt with no reservation
 * to settle against opens a case too, never silently processed.
 */
@Injectable()
export class SettleAttempt {
  constructor(
    @Inject(ProcessedEventRepository) private readonly processed: SettlementPorts['processed'],
    @Inject(ReservationHoldRepository) private readonly holds: SettlementPorts['holds'],
    @Inject(LedgerRepository) private readonly ledger: SettlementPorts['ledger'],
    @Inject(CaseRepository) private readonly cases: SettlementPorts['cases'],
    @Inject(AttemptRepository) private readonly attempts: SettlementPorts['attempts'],
    @Inject(CatalogRepository) private readonly catalog: SettlementPorts['catalog'],
    @InjectIds() private readonly ids: IdGenerator,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {}

  async execute(e: AttemptCompletedV1, now: Date): Promise<SettleOutcome> {
    const result = await handleOnce(this.processed, CONSUMER, e.event_id, async (tx) => {
      // Global lock order (docs/architecture.md): attempt, action, reservation, quota counters, budget accounts.
      await this.attempts.lockAttempt(tx, e.attempt_id);
      const reservation = await this.holds.lock(tx, e.action_id);
      if (!reservation) {
        await this.openCase(tx, e, 'no_reservation', 0n, now, { outcome: e.outcome, has_usage: hasUsage(e) });
        return 'reconciliation_required' as const;
      }
      const excess = inResponse(e) > (e.effective_candidate_count ?? 0);
      const outcome =
        hasUsage(e) && !excess
          ? await this.settle(tx, e, reservation, now)
          : await this.requireReconciliation(tx, e, reservation, excess ? 'returned_exceeds_effective' : missingUsageReason(e), now);
      if (outcome === 'settled' && (e.usage_unknown_fields?.length ?? 0) > 0) {
        // Settled from the reported total; the fields we could not read go to an operator.
        await this.openCase(tx, e, 'usage_shape_unknown', 0n, now, { unknown_fields: e.usage_unknown_fields });
      }
      if (
        outcome === 'settled' &&
        usageImplausible({
          effectiveCandidates: e.effective_candidate_count ?? 0,
          outputTokensTotal: e.output_tokens_total,
          outputTokensFloor: e.output_tokens_floor,
        })
      ) {
        // Provider usage is the evidence and is booked as reported; an operator compares it with
        // the provider's export (docs/decisions.md, usage plausibility).
        await this.openCase(tx, e, 'usage_implausible', 0n, now, {
          output_tokens_total: e.output_tokens_total,
          output_tokens_floor: e.output_tokens_floor,
          returned_in_response: inResponse(e),
        });
      }
      if (e.outcome === 'succeeded' && silentShortfall(e)) {
        await this.openCase(tx, e, 'candidate_shortfall_unexplained', 0n, now, {
          effective: e.effective_candidate_count,
          returned: e.returned_candidate_count,
        });
      }
      return outcome;
    });
    if (result.duplicate) return 'duplicate';
    this.log.info({ action_id: e.action_id, attempt_id: e.attempt_id, outcome: result.result }, 'attempt settled');
    return result.result;
  }

  private async settle(tx: Tx, e: AttemptCompletedV1, r: ReservationView, now: Date): Promise<SettleOutcome> {
    const price = await this.catalog.priceById(r.priceRevisionId);
    if (!price) throw new Error(`price revision ${r.priceRevisionId} missing`);
    const usage = {
      inputTokens: e.input_tokens ?? 0,
      cachedInputTokens: e.cached_input_tokens ?? 0,
      outputTokensTotal: e.output_tokens_total ?? 0,
      reasoningTokens: e.reasoning_tokens ?? 0,
    };
    const cost = priceUsage(
      {
        inputTokens: usage.inputTokens,
        cachedInputTokens: usage.cachedInputTokens,
        outputTokens: usage.outputTokensTotal,
        reasoningTokens: usage.reasoningTokens,
        outputIncludesReasoning: e.output_includes_reasoning,
      },
      price,
    );
    const row = buildLedgerRow({
      id: this.ids.next(),
      facts: factsOf(e),
      evidence: { kind: 'usage', source: usageSourceOf(e), usage, cost },
      priceRevisionId: price.id,
      settledAt: now,
    });
    if (!(await this.ledger.record(tx, row, this.ids.next()))) return 'duplicate';
    await this.attempts.transition(tx, e.attempt_id, 'settle', 'settled from provider-reported usage', now);
    const plan = planSettle(r, { costMicrousd: cost.total, actionDone: await this.actionDone(tx, e) });
    await this.holds.move(
      tx,
      r,
      plan.movement,
      `attempt ${e.attempt_no} settled${plan.releasedMicrousd > 0n ? '; unused hold released' : ''}`,
      now,
    );
    return 'settled';
  }

  private async requireReconciliation(
    tx: Tx,
    e: AttemptCompletedV1,
    r: ReservationView,
    reason: CaseReason,
    now: Date,
  ): Promise<SettleOutcome> {
    const toUnresolved = planMoveToUnresolved(r);
    const opened = await this.openCase(tx, e, reason, toUnresolved.exposuresMicrousd[0], now, {
      outcome: e.outcome,
      http_status: e.http_status,
      effective: e.effective_candidate_count,
      returned_in_response: inResponse(e),
    });
    if (!opened) return 'duplicate';
    await this.attempts.transition(tx, e.attempt_id, 'require_reconciliation', reason, now);
    let movement: Movement = toUnresolved.movement;
    // Nothing is pending after the move; the release only settles the state when nothing is unresolved.
    if (await this.actionDone(tx, e)) movement = combineMovements(movement, planReleaseRest(applyMovement(r, movement)));
    await this.holds.move(tx, r, movement, `attempt ${e.attempt_no}: ${reason}`, now);
    return 'reconciliation_required';
  }

  /** No attempt of the action can still bring usage through settlement. */
  private async actionDone(tx: Tx, e: AttemptCompletedV1): Promise<boolean> {
    return e.action_final && (await this.attempts.awaitingSettlement(tx, e.action_id)) === 0;
  }

  private openCase(
    tx: Tx,
    e: AttemptCompletedV1,
    reason: CaseReason,
    exposure: bigint,
    now: Date,
    details: Record<string, unknown>,
  ): Promise<boolean> {
    return this.cases.open(
      tx,
      {
        id: this.ids.next(),
        actionId: e.action_id,
        attemptId: e.attempt_id,
        reason,
        providerRequestId: e.provider_request_id,
        exposureMicrousd: exposure,
        details,
        openedAt: now,
      },
      { eventId: this.ids.next(), fields: sanitised(e) },
    );
  }
}

function hasUsage(e: AttemptCompletedV1): boolean {
  return e.input_tokens !== null && e.output_tokens_total !== null;
}

function missingUsageReason(e: AttemptCompletedV1): CaseReason {
  return e.stream_mode === 'sse' ? 'stream_ended_before_usage' : 'usage_missing';
}

function usageSourceOf(e: AttemptCompletedV1): 'provider_response' | 'stream_final_chunk' {
  return e.usage_source === 'stream_final_chunk' ? 'stream_final_chunk' : 'provider_response';
}

function silentShortfall(e: AttemptCompletedV1): boolean {
  const effective = e.effective_candidate_count ?? 0;
  // Only a filter or a block explains missing candidates (same rule as libs/domain's candidateShortfall).
  const explained = e.candidates.some((c) => c.outcome === 'filtered') || e.prompt_block_reason !== null;
  return inResponse(e) < effective && !explained;
}

/** Candidates the response actually contained (absent ones are listed as missing or blocked). */
function inResponse(e: AttemptCompletedV1): number {
  return e.candidates.filter((c) => !(ABSENT_CANDIDATE_OUTCOMES as readonly string[]).includes(c.outcome)).length;
}

/** The ledger's view of the attempt, from the event (which carries nothing else). */
function factsOf(e: AttemptCompletedV1): AttemptFacts {
  return {
    attemptId: e.attempt_id,
    actionId: e.action_id,
    attemptRole: e.attempt_role,
    requestId: e.request_id,
    workloadId: e.workload_id ?? '',
    environment: e.environment ?? '',
    routeId: e.route_id ?? '',
    routeVersion: e.route_version ?? 0,
    modelAlias: e.model_alias ?? '',
    providerRequestId: e.provider_request_id,
    requestedCandidates: e.requested_candidate_count,
    effectiveCandidates: e.effective_candidate_count ?? 0,
    returnedCandidates: e.returned_candidate_count ?? 0,
    streamMode: e.stream_mode,
  };
}

/** The DESIGN §8 field set, copied from the attempt event (which carries nothing else). */
function sanitised(e: AttemptCompletedV1): SanitisedFields {
  return {
    timestamp: e.timestamp,
    request_id: e.request_id,
    action_id: e.action_id,
    attempt_id: e.attempt_id,
    attempt_role: e.attempt_role,
    workload_id: e.workload_id,
    environment: e.environment,
    route_id: e.route_id,
    route_version: e.route_version,
    model_alias: e.model_alias,
    provider_request_id: e.provider_request_id,
    requested_candidate_count: e.requested_candidate_count,
    effective_candidate_count: e.effective_candidate_count,
    returned_candidate_count: e.returned_candidate_count,
    input_tokens: e.input_tokens,
    output_tokens_total: e.output_tokens_total,
    total_tokens: e.total_tokens,
    stream_mode: e.stream_mode,
    usage_source: e.usage_source,
    quota_scope: e.quota_scope,
    policy_result: e.policy_result,
    policy_reason: e.policy_reason,
  };
}
