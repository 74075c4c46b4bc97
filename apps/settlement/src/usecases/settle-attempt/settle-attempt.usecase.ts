import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { ABSENT_CANDIDATE_OUTCOMES, AttemptCompletedV1, CaseReason, SanitisedFields, usageOfReport } from '@gateway/contracts';
import {
  AttemptFacts,
  AttemptRepository,
  buildLedgerRow,
  CaseRepository,
  CatalogRepository,
  LedgerRepository,
  LedgerRow,
  LockedAttempt,
  priceRevisionOf,
  ProcessedEventRepository,
  ReservationHoldRepository,
  FundedSteps,
  ReservationView,
  Tx,
} from '@gateway/db';
import {
  actionMachine,
  applyMovement,
  attemptMachine,
  AttemptEvent,
  AttemptState,
  awaitsSettlement,
  combineMovements,
  Hold,
  Movement,
  planMoveToUnresolved,
  planReleaseRest,
  planSettle,
  priceUsage,
  Usage,
  usageImplausible,
} from '@gateway/domain';
import { handleEachOnce } from '@gateway/messaging';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';

const CONSUMER = 'settlement.attempt-completed';

export type SettleOutcome = 'settled' | 'reconciliation_required' | 'duplicate';

/** The repositories settlement uses, narrowed to what it calls (fakes implement these). */
export interface SettlementPorts {
  processed: Pick<ProcessedEventRepository, 'transaction' | 'recordMany'>;
  holds: Pick<ReservationHoldRepository, 'lockMany' | 'moveMany'>;
  ledger: Pick<LedgerRepository, 'recordMany'>;
  cases: Pick<CaseRepository, 'open'>;
  attempts: Pick<AttemptRepository, 'lockAttempts' | 'transitionMany' | 'awaitingSettlementByAction' | 'holdsOf'>;
  catalog: Pick<CatalogRepository, 'priceById'>;
}

/**
 * One ledger row per attempt from the provider's aggregate usage (DESIGN §7 Settlement), the
 * reservation moved by the hold planner (rest released when the action is over), and
 * `usage.settled` published with the row — all in the transaction that records the event id, so
 * a redelivered event settles nothing twice. What lacks evidence is never zero: it becomes a
 * reconciliation case and its exposure stays held as unresolved. An attempt with no reservation
 * to settle against opens a case too, never silently processed.
 *
 * Events come in batches (one partition's worth, up to the consumer's batch size) and a batch is
 * one transaction: its event ids recorded in one statement, its attempts and reservations locked
 * and read in one statement each, its ledger rows and their `usage.settled` in one insert each,
 * the attempts moved in one statement per event kind and every reservation and budget account
 * moved once (`moveMany`). The rules run per event, in order, on the hold the previous events of
 * the batch left; a single event is a batch of one.
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
    const [outcome] = await this.executeBatch([e], now);
    return outcome;
  }

  /** Settles the events in one transaction; one outcome per event, in order. */
  async executeBatch(events: readonly AttemptCompletedV1[], now: Date): Promise<SettleOutcome[]> {
    const results = await handleEachOnce(this.processed, CONSUMER, events, (tx, fresh) => this.settleFresh(tx, fresh, now));
    const outcomes = results.map((r): SettleOutcome => (r.duplicate ? 'duplicate' : r.result));
    const count = (o: SettleOutcome) => outcomes.filter((x) => x === o).length;
    const only = events.length === 1 ? { action_id: events[0].action_id, attempt_id: events[0].attempt_id, outcome: outcomes[0] } : {};
    this.log.info(
      {
        events: events.length,
        settled: count('settled'),
        reconciliation_required: count('reconciliation_required'),
        duplicate: count('duplicate'),
        ...only,
      },
      'attempts settled',
    );
    return outcomes;
  }

  private async settleFresh(tx: Tx, events: AttemptCompletedV1[], now: Date): Promise<SettleOutcome[]> {
    // Global lock order (docs/architecture.md): attempts, then reservations (each set in id
    // order); the budget accounts last, in moveMany.
    const locked = await this.attempts.lockAttempts(tx, unique(events.map((e) => e.attempt_id)));
    const actionIds = unique(events.map((e) => e.action_id));
    const reservations = await this.holds.lockMany(tx, actionIds);
    const batch = new SettlementBatch(locked, await this.attempts.awaitingSettlementByAction(tx, actionIds));
    // The ledger rows first, in one insert: whether an attempt's row is new decides what it moves.
    const entries = new Map<AttemptCompletedV1, { row: LedgerRow; eventId: string; unpriced: string[] }>();
    for (const e of events) {
      const r = reservations.get(e.action_id);
      if (r && settlesFromUsage(e)) {
        const priceRevisionId = priceRevisionOf(locked.get(e.attempt_id)?.priceRevisionId, r.priceRevisionId);
        entries.set(e, { ...(await this.ledgerRow(e, priceRevisionId, now)), eventId: this.ids.next() });
      }
    }
    const inserted = await this.ledger.recordMany(tx, [...entries.values()]);
    const outcomes: SettleOutcome[] = [];
    for (const e of events) {
      const r = reservations.get(e.action_id);
      const entry = entries.get(e);
      outcomes.push(
        await this.settleOne(
          tx,
          e,
          r,
          entry && inserted.delete(e.attempt_id) ? { row: entry.row, unpriced: entry.unpriced } : entry ? 'duplicate' : null,
          batch,
          now,
        ),
      );
    }
    await this.attempts.transitionMany(tx, batch.transitions, now);
    await this.holds.moveMany(tx, batch.moves(), now);
    return outcomes;
  }

  /**
   * The rules for one event, on the batch's state so far. `settled` is the attempt's new ledger row
   * (and what its usage reported that the price does not price) when it settles from usage
   * (`duplicate` when the attempt already had one), null otherwise.
   */
  private async settleOne(
    tx: Tx,
    e: AttemptCompletedV1,
    r: ReservationView | undefined,
    settled: { row: LedgerRow; unpriced: string[] } | 'duplicate' | null,
    batch: SettlementBatch,
    now: Date,
  ): Promise<SettleOutcome> {
    if (!r) {
      await this.openCase(tx, e, 'no_reservation', 0n, now, { outcome: e.outcome, has_usage: hasUsage(e) });
      return 'reconciliation_required';
    }
    const outcome =
      settled === 'duplicate'
        ? 'duplicate'
        : settled
          ? this.settle(e, r, settled.row, batch)
          : await this.requireReconciliation(
              tx,
              e,
              r,
              excessCandidates(e) ? 'returned_exceeds_effective' : missingUsageReason(e),
              batch,
              now,
            );
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
    if (outcome === 'settled' && settled !== null && settled !== 'duplicate' && settled.unpriced.length > 0) {
      // Settled at the priced amount (an unpriced tier at the dearest priced one, an unpriced
      // feature's calls at nothing); an operator prices the rest (docs/decisions.md).
      await this.openCase(tx, e, 'usage_unpriced', 0n, now, { unpriced: settled.unpriced, service_tier: e.service_tier ?? null });
    }
    if (e.outcome === 'succeeded' && silentShortfall(e)) {
      await this.openCase(tx, e, 'candidate_shortfall_unexplained', 0n, now, {
        effective: e.effective_candidate_count,
        returned: e.returned_candidate_count,
      });
    }
    return outcome;
  }

  /**
   * The attempt's ledger row, priced from the provider-reported usage at the attempt's own price
   * revision (`priceRevisionOf`: a fallback at its route's price) and at the tiers the usage
   * reached, and what the usage reported that it does not price.
   */
  private async ledgerRow(e: AttemptCompletedV1, priceRevisionId: string, now: Date): Promise<{ row: LedgerRow; unpriced: string[] }> {
    const price = await this.catalog.priceById(priceRevisionId);
    if (!price) throw new Error(`price revision ${priceRevisionId} missing`);
    const usage = usageOfAttempt(e);
    const cost = priceUsage(usage, price);
    const row = buildLedgerRow({
      id: this.ids.next(),
      facts: factsOf(e),
      evidence: { kind: 'usage', source: usageSourceOf(e), usage, cost },
      priceRevisionId: price.id,
      settledAt: now,
    });
    return { row, unpriced: cost.unpriced };
  }

  private settle(e: AttemptCompletedV1, r: ReservationView, row: LedgerRow, batch: SettlementBatch): SettleOutcome {
    batch.transition(e, 'settle', 'settled from provider-reported usage');
    const plan = planSettle(batch.hold(r), { costMicrousd: row.costMicrousd, actionDone: batch.actionDone(e, r) });
    batch.move(
      r,
      plan.movement,
      `attempt ${e.attempt_no} settled${plan.releasedMicrousd > 0n ? '; unused hold released' : ''}`,
      e.attempt_id,
    );
    return 'settled';
  }

  private async requireReconciliation(
    tx: Tx,
    e: AttemptCompletedV1,
    r: ReservationView,
    reason: CaseReason,
    batch: SettlementBatch,
    now: Date,
  ): Promise<SettleOutcome> {
    const hold = batch.hold(r);
    // Only this attempt's own exposure (its hold, or what is left of the pool if less), never the
    // pool the action's other attempts share; read on this rare path only, the attempt is locked.
    const own = (await this.attempts.holdsOf(tx, [e.attempt_id])).get(e.attempt_id) ?? null;
    const toUnresolved = planMoveToUnresolved(hold, [own]);
    const opened = await this.openCase(tx, e, reason, toUnresolved.exposuresMicrousd[0], now, {
      outcome: e.outcome,
      http_status: e.http_status,
      effective: e.effective_candidate_count,
      returned_in_response: inResponse(e),
    });
    if (!opened) return 'duplicate';
    batch.transition(e, 'require_reconciliation', reason);
    let movement: Movement = toUnresolved.movement;
    // The action is over: the rest of the pool (holds no attempt needs any more) is released; the
    // reservation stays unresolved while any exposure is.
    if (batch.actionDone(e, r)) movement = combineMovements(movement, planReleaseRest(applyMovement(hold, movement)));
    batch.move(r, movement, `attempt ${e.attempt_no}: ${reason}`, e.attempt_id);
    return 'reconciliation_required';
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

/**
 * What a batch has decided so far and will write at its end: the attempts' transitions, each
 * reservation's movements in order (and the hold they leave), and how many attempts of each
 * action can still bring usage — as the per-event reads would see them inside the transaction.
 */
class SettlementBatch {
  readonly transitions: Array<{ attemptId: string; event: AttemptEvent; reason: string }> = [];
  private readonly byReservation = new Map<
    string,
    { r: ReservationView; hold: Hold; steps: Movement[]; fundings: Array<string[] | null>; reason: string }
  >();
  private readonly statuses: Map<string, AttemptState>;

  constructor(
    private readonly locked: Map<string, LockedAttempt>,
    private readonly awaiting: Map<string, number>,
  ) {
    this.statuses = new Map([...locked].map(([id, a]) => [id, a.status]));
  }

  transition(e: AttemptCompletedV1, event: AttemptEvent, reason: string): void {
    this.transitions.push({ attemptId: e.attempt_id, event, reason });
    const from = this.statuses.get(e.attempt_id);
    // An attempt that does not exist fails the batch's transition statement instead.
    if (from === undefined) return;
    if (awaitsSettlement(from)) this.awaiting.set(e.action_id, (this.awaiting.get(e.action_id) ?? 0) - 1);
    this.statuses.set(e.attempt_id, attemptMachine.transition(from, event));
  }

  /**
   * No attempt of the action can still bring usage through settlement: the action is over — the
   * event says so, or the action row (read under the batch's lock) is already terminal, e.g. failed
   * by the sweeper after this attempt's event said more would come — and none awaits settlement.
   */
  actionDone(e: AttemptCompletedV1, r: ReservationView): boolean {
    const over = e.action_final || actionMachine.terminal(r.actionStatus);
    return over && (this.awaiting.get(e.action_id) ?? 0) === 0;
  }

  hold(r: ReservationView): Hold {
    return this.byReservation.get(r.id)?.hold ?? r;
  }

  /** A step about `attemptId`: it lands on the accounts that attempt's hold sits on (`moveMany` splits it). */
  move(r: ReservationView, m: Movement, reason: string, attemptId: string): void {
    const cur = this.byReservation.get(r.id) ?? { r, hold: r, steps: [], fundings: [], reason };
    cur.hold = applyMovement(cur.hold, m);
    cur.steps.push(m);
    cur.fundings.push(this.locked.get(attemptId)?.fundingAccountIds ?? null);
    cur.reason = reason;
    this.byReservation.set(r.id, cur);
  }

  moves(): FundedSteps[] {
    return [...this.byReservation.values()];
  }
}

function unique(values: string[]): string[] {
  return [...new Set(values)];
}

/** Usage to price, and no more candidates returned than were paid for. */
function settlesFromUsage(e: AttemptCompletedV1): boolean {
  return hasUsage(e) && !excessCandidates(e);
}

function excessCandidates(e: AttemptCompletedV1): boolean {
  return inResponse(e) > (e.effective_candidate_count ?? 0);
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

/** The provider-reported usage of an attempt as the domain prices it (absent detail: 0, no tier: the requested one). */
export function usageOfAttempt(e: AttemptCompletedV1): Usage {
  return usageOfReport(e, e.output_includes_reasoning);
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
    attemptNo: e.attempt_no,
    winner: e.winner ?? null,
    attemptsTotal: e.attempts_total,
    policyRevisionId: e.policy_revision_id ?? null,
    deadlineOutcome: e.deadline_outcome ?? null,
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
