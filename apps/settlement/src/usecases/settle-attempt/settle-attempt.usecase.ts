import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  ABSENT_CANDIDATE_OUTCOMES,
  AttemptCompletedV1,
  ReconciliationRequiredV1,
  settledCostFields,
  UsageSettledV1,
} from '@gateway/contracts';
import {
  CatalogRepository,
  HoldMovement,
  OutboxRepository,
  ProcessedEventRepository,
  ReservationView,
  SettlementRepository,
  Tx,
} from '@gateway/db';
import { pendingOf, priceUsage, reservationMachine, ReservationState } from '@gateway/domain';
import { handleOnce } from '@gateway/messaging';
import { InjectLogger } from '@gateway/service-kit';

const CONSUMER = 'settlement.attempt-completed';

export type SettleOutcome = 'settled' | 'reconciliation_required' | 'duplicate' | 'no_reservation';

/**
 * One ledger row per attempt from the provider's aggregate usage (DESIGN §7 Settlement), the
 * reservation moved from pending to settled (rest released when the action is over), and
 * `usage.settled` published through the outbox — all in the transaction that records the event
 * id, so a redelivered event settles nothing twice. What lacks evidence is never zero: it becomes
 * a reconciliation case and its exposure stays held as unresolved.
 */
@Injectable()
export class SettleAttempt {
  constructor(
    private readonly processed: ProcessedEventRepository,
    private readonly settlement: SettlementRepository,
    private readonly catalog: CatalogRepository,
    private readonly outbox: OutboxRepository,
    @InjectLogger() private readonly log: Logger,
  ) {}

  async execute(e: AttemptCompletedV1, now: Date): Promise<SettleOutcome> {
    const result = await handleOnce(this.processed, CONSUMER, e.event_id, async (tx) => {
      const reservation = await this.settlement.lockReservation(tx, e.action_id);
      if (!reservation) return 'no_reservation' as const;
      const returnedInResponse = inResponse(e);
      const hasUsage = e.input_tokens !== null && e.output_tokens_total !== null;
      const excess = returnedInResponse > (e.effective_candidate_count ?? 0);
      let plan: Plan;
      if (hasUsage && !excess) {
        plan = await this.settle(tx, e, reservation, now);
      } else {
        const reason = excess ? 'returned_exceeds_effective' : e.stream_mode === 'sse' ? 'stream_ended_before_usage' : 'usage_missing';
        plan = await this.requireReconciliation(tx, e, reservation, reason, now);
      }
      if (e.outcome === 'succeeded' && this.silentShortfall(e)) {
        await this.openCase(tx, e, 'candidate_shortfall_unexplained', 0n, now, {
          effective: e.effective_candidate_count,
          returned: e.returned_candidate_count,
        });
      }
      // When no attempt of the action can still bring usage, the rest of the hold is released in
      // the same movement (one write to the reservation and its budget accounts).
      let movement = plan.movement;
      if (e.action_final && (await this.settlement.unresolvedAttemptCount(tx, e.action_id)) === 0) {
        movement = withRelease(reservation, movement, now);
      }
      if (movement) await this.settlement.moveReservation(tx, reservation, movement);
      return plan.outcome;
    });
    if (result.duplicate) return 'duplicate';
    this.log.info({ action_id: e.action_id, attempt_id: e.attempt_id, outcome: result.result }, 'attempt settled');
    return result.result;
  }

  private async settle(tx: Tx, e: AttemptCompletedV1, r: ReservationView, now: Date): Promise<Plan> {
    const price = await this.catalog.priceById(r.priceRevisionId);
    if (!price) throw new Error(`price revision ${r.priceRevisionId} missing`);
    const cost = priceUsage(
      {
        inputTokens: e.input_tokens ?? 0,
        cachedInputTokens: e.cached_input_tokens ?? 0,
        outputTokens: e.output_tokens_total ?? 0,
        reasoningTokens: e.reasoning_tokens ?? 0,
        outputIncludesReasoning: e.output_includes_reasoning,
      },
      price,
    );
    const inserted = await this.settlement.insertLedger(tx, {
      id: randomUUID(),
      attemptId: e.attempt_id,
      actionId: e.action_id,
      attemptRole: e.attempt_role,
      workloadId: e.workload_id ?? '',
      environment: e.environment ?? '',
      routeId: e.route_id ?? '',
      routeVersion: e.route_version ?? 0,
      modelAlias: e.model_alias ?? '',
      providerRequestId: e.provider_request_id,
      requestedCandidates: e.requested_candidate_count,
      effectiveCandidates: e.effective_candidate_count ?? 0,
      returnedCandidates: e.returned_candidate_count ?? 0,
      inputTokens: e.input_tokens ?? 0,
      cachedInputTokens: e.cached_input_tokens ?? 0,
      outputTokensTotal: e.output_tokens_total ?? 0,
      reasoningTokens: e.reasoning_tokens ?? 0,
      totalTokens: (e.input_tokens ?? 0) + (e.output_tokens_total ?? 0),
      streamMode: e.stream_mode,
      usageSource: e.usage_source ?? 'provider_response',
      priceRevisionId: price.id,
      inputMicrousd: cost.input,
      cachedInputMicrousd: cost.cachedInput,
      outputMicrousd: cost.output,
      reasoningMicrousd: cost.reasoning,
      costMicrousd: cost.total,
      settledAt: now,
    });
    if (!inserted) return { outcome: 'duplicate', movement: null };
    await this.settlement.transitionAttempt(tx, e.attempt_id, 'settle', 'settled from provider-reported usage', now);
    const movement: HoldMovement = {
      fromPendingMicrousd: min(cost.total, pendingOf(r)),
      toSettledMicrousd: cost.total,
      toUnresolvedMicrousd: 0n,
      fromUnresolvedMicrousd: 0n,
      toReleasedMicrousd: 0n,
      status: r.status,
      reason: `attempt ${e.attempt_no} settled`,
      now,
    };
    const settled: UsageSettledV1 = {
      ...sanitised(e),
      event_id: randomUUID(),
      price_revision: price.id,
      ...settledCostFields(cost),
      settled_at: now.toISOString(),
    };
    await this.outbox.append(tx, 'usageSettled', e.workload_id ?? 'unknown', settled);
    return { outcome: 'settled', movement };
  }

  private async requireReconciliation(tx: Tx, e: AttemptCompletedV1, r: ReservationView, reason: string, now: Date): Promise<Plan> {
    const exposure = pendingOf(r);
    const opened = await this.openCase(tx, e, reason, exposure, now, {
      outcome: e.outcome,
      http_status: e.http_status,
      effective: e.effective_candidate_count,
      returned_in_response: inResponse(e),
    });
    if (!opened) return { outcome: 'duplicate', movement: null };
    await this.settlement.transitionAttempt(tx, e.attempt_id, 'require_reconciliation', reason, now);
    return {
      outcome: 'reconciliation_required',
      movement: {
        fromPendingMicrousd: exposure,
        toSettledMicrousd: 0n,
        toUnresolvedMicrousd: exposure,
        fromUnresolvedMicrousd: 0n,
        toReleasedMicrousd: 0n,
        status: r.status === 'pending' ? reservationMachine.transition('pending', 'mark_unresolved') : r.status,
        reason: `attempt ${e.attempt_no}: ${reason}`,
        now,
      },
    };
  }

  private async openCase(
    tx: Tx,
    e: AttemptCompletedV1,
    reason: string,
    exposure: bigint,
    now: Date,
    details: Record<string, unknown>,
  ): Promise<boolean> {
    const caseId = randomUUID();
    const opened = await this.settlement.openCase(tx, {
      id: caseId,
      actionId: e.action_id,
      attemptId: e.attempt_id,
      reason,
      providerRequestId: e.provider_request_id,
      exposureMicrousd: exposure,
      details,
      openedAt: now,
    });
    if (!opened) return false;
    const event: ReconciliationRequiredV1 = {
      ...sanitised(e),
      event_id: randomUUID(),
      case_id: caseId,
      reason,
      exposure_microusd: exposure.toString(),
    };
    await this.outbox.append(tx, 'reconciliationRequired', e.workload_id ?? 'unknown', event);
    return true;
  }

  private silentShortfall(e: AttemptCompletedV1): boolean {
    const effective = e.effective_candidate_count ?? 0;
    // Only a filter or a block explains missing candidates (same rule as libs/domain's candidateShortfall).
    const explained = e.candidates.some((c) => c.outcome === 'filtered') || e.prompt_block_reason !== null;
    return inResponse(e) < effective && !explained;
  }
}

interface Plan {
  outcome: SettleOutcome;
  movement: HoldMovement | null;
}

/**
 * Adds the release of whatever is still pending to `movement` (or makes it the whole movement):
 * the reservation ends settled when nothing is unresolved, and keeps its unresolved exposure
 * otherwise.
 */
function withRelease(r: ReservationView, movement: HoldMovement | null, now: Date): HoldMovement {
  const base: HoldMovement = movement ?? {
    fromPendingMicrousd: 0n,
    toSettledMicrousd: 0n,
    toUnresolvedMicrousd: 0n,
    fromUnresolvedMicrousd: 0n,
    toReleasedMicrousd: 0n,
    status: r.status,
    reason: '',
    now,
  };
  const rest = pendingOf(r) - base.fromPendingMicrousd;
  const release = rest > 0n ? rest : 0n;
  const unresolvedAfter = r.unresolvedMicrousd + base.toUnresolvedMicrousd - base.fromUnresolvedMicrousd;
  const status: ReservationState =
    base.status === 'pending' && unresolvedAfter === 0n ? reservationMachine.transition('pending', 'settle') : base.status;
  return {
    ...base,
    fromPendingMicrousd: base.fromPendingMicrousd + release,
    toReleasedMicrousd: base.toReleasedMicrousd + release,
    status,
    reason:
      status === 'settled'
        ? `${base.reason ? `${base.reason}; ` : ''}all attempts settled; unused hold released`
        : `${base.reason ? `${base.reason}; ` : ''}unused hold released; unresolved exposure kept`,
  };
}

/** Candidates the response actually contained (absent ones are listed as missing or blocked). */
function inResponse(e: AttemptCompletedV1): number {
  return e.candidates.filter((c) => !(ABSENT_CANDIDATE_OUTCOMES as readonly string[]).includes(c.outcome)).length;
}

function min(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}

/** The DESIGN §8 field set, copied from the attempt event (which carries nothing else). */
function sanitised(e: AttemptCompletedV1) {
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
