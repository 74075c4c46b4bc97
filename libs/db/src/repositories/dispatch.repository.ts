import { AcceptanceVerdict, AttemptCompletedV1, AttemptRole, DeliveryOutcome, LateEvidence, Topics } from '@gateway/contracts';
import {
  actionMachine,
  ActionState,
  attemptMachine,
  AttemptState,
  AllowanceFunding,
  BUDGET_ACCOUNT_LOCK_ORDER,
  EXPERIMENT_ALLOWANCE_SCOPE,
  InvalidTransitionError,
  transitionGuard,
} from '@gateway/domain';
import { Database, PreparedStatement } from '../database';
import { StatementGroups } from '../statement-groups';
import { budgetAccountId } from './admission.repository';
import { CaseRepository } from './case.repository';
import { OutboxRepository } from './outbox.repository';

export interface ClaimInput {
  actionId: string;
  attemptId: string;
  attemptNo: number;
  role: AttemptRole;
  routeId: string;
  routeVersion: number;
  effectiveCandidates: number;
  /** the primary's own hold; null = the reservation's amount at admission */
  holdMicrousd: bigint | null;
  /** the hedge_policy_revision row id in force, or null when the workload has none */
  policyRevisionId: string | null;
  /** the experiment pause open when the action was dispatched (issue 11); null / absent: none */
  experimentPauseId?: string | null;
  claimedBy: string;
  now: Date;
}

export type ClaimResult = { ok: true } | { ok: false; reason: 'already_claimed' | 'expired' | 'not_dispatchable' };

export interface AttemptOutcome {
  attemptId: string;
  actionId: string;
  status: Extract<AttemptState, 'succeeded' | 'failed' | 'cancelled' | 'usage_missing'>;
  statusReason: string;
  providerRequestId: string | null;
  httpStatus: number | null;
  returnedCandidates: number | null;
  candidateOutcomes: AttemptCompletedV1['candidates'];
  promptBlockReason: string | null;
  usage: { inputTokens: number; cachedInputTokens: number; outputTokensTotal: number; reasoningTokens: number } | null;
  usageSource: 'provider_response' | 'stream_final_chunk' | null;
  now: Date;
  event: AttemptCompletedV1;
  /**
   * What the user got (delivery) and whether it was a valid answer (acceptance), recorded apart
   * from the money, which settlement and reconciliation decide.
   */
  delivery: {
    outcome: DeliveryOutcome;
    /** null when there was no answer to judge */
    verdict: AcceptanceVerdict | null;
    verdictReason: string | null;
  };
  /** set when this attempt decides the action (answered or failed) */
  finishAction: {
    status: Extract<ActionState, 'answered' | 'failed' | 'expired'>;
    reason: string;
    returnedCandidates: number | null;
    workloadId: string;
  } | null;
}

export type ExtraAttemptRole = 'hedge' | 'retry' | 'fallback';
export interface ExtraAttemptInput {
  actionId: string;
  attemptId: string;
  attemptNo: number;
  role: ExtraAttemptRole;
  routeId: string;
  routeVersion: number;
  effectiveCandidates: number;
  /** this attempt's own worst case: input estimate + effective × per-candidate ceiling at ITS route's price */
  holdMicrousd: bigint;
  /** the hedge_policy_revision row id in force (every extra attempt records it) */
  policyRevisionId: string;
  /** the price revision of THIS attempt's route in force (the command's RouteTarget `price_revision_id`): what settles it */
  priceRevisionId: string;
  limits: {
    maxAttempts: number; // including the primary
    maxHedges: number;
    maxRetries: number;
    maxExtraSpendMicrousd: bigint; // across all non-primary attempts: settled cost, else their hold while uncertain
    spendFloorMicrousd: bigint; // every budget account's headroom after this hold must stay >= floor
    minUsefulRemainingMs: number; // action deadline - now must be >= this
  };
  claimedBy: string;
  now: Date;
  /**
   * The experiment allowance that funds this attempt (issue 10), or none: then it holds on the
   * reservation's own accounts as before. With one it holds on the allowance account of this period
   * (created on first use, its budget the revision's) and the reservation's team/environment accounts.
   */
  allowance?: ExtraAttemptAllowance | null;
}
/** libs/domain `allowanceFundingOf`: the policy lineage's allowance account for the period. */
export type ExtraAttemptAllowance = AllowanceFunding;
export type ExtraAttemptDenial =
  | 'winner_chosen'
  | 'action_terminal'
  | 'deadline_too_short'
  | 'spend_floor'
  | 'hedge_limit'
  | 'retry_limit'
  | 'attempt_allowance_spent'
  | 'spend_allowance_spent'
  | 'budget_exhausted'
  | 'experiment_allowance_spent'
  | 'already_claimed';
export type ExtraAttemptResult = { ok: true; attemptsTotal: number } | { ok: false; reason: ExtraAttemptDenial };

const EXTRA_ATTEMPT_DENIALS: readonly ExtraAttemptDenial[] = [
  'winner_chosen',
  'action_terminal',
  'deadline_too_short',
  'spend_floor',
  'hedge_limit',
  'retry_limit',
  'attempt_allowance_spent',
  'spend_allowance_spent',
  'budget_exhausted',
  'experiment_allowance_spent',
  'already_claimed',
];

/** Dispatch's state: single-use claims, attempt lifecycle, action completion. */
export class DispatchRepository {
  private readonly claims: StatementGroups<unknown, ClaimRow>;
  private readonly completions: StatementGroups<unknown, CompleteRow>;
  private readonly cases: CaseRepository;

  /**
   * Claims, and apart from them completions, are group-committed (`StatementGroups`): those that
   * arrive while one of their statements runs, or in the same event-loop turn, go together in the
   * next one (at most `maxGroup`). `groupStatements: false` sends each alone, as a group of one.
   */
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
    private readonly opts: { groupStatements?: boolean; maxGroup?: number } = {},
  ) {
    const maxGroup = opts.groupStatements === false ? 1 : (opts.maxGroup ?? MAX_GROUP);
    this.claims = new StatementGroups((items) => this.runGroup<ClaimRow>(CLAIM_GROUP, items), maxGroup);
    this.completions = new StatementGroups((items) => this.runGroup<CompleteRow>(COMPLETE_GROUP, items), maxGroup);
    this.cases = new CaseRepository(db, outbox);
  }

  /**
   * The evidence of an attempt whose completion was refused because the orphan sweep had cut it
   * first, offered to its open `orphaned_attempt` case (`CaseRepository.offerLateEvidence`): the
   * case id, or null when no open case takes it.
   */
  offerLateEvidence(attemptId: string, evidence: LateEvidence): Promise<string | null> {
    return this.cases.offerLateEvidence(attemptId, evidence);
  }

  /**
   * One call of a group function for `items`, its rows in the items' order. A group that fails for
   * a reason that is not transient is sent again item by item by `StatementGroups`, so only the
   * item at fault fails (the failed group wrote nothing); a transient failure fails them all, and
   * their callers retry.
   */
  private runGroup<Row extends Record<string, unknown>>(statement: PreparedStatement, items: unknown[]): Promise<Row[]> {
    return this.db.query<Row>(statement, [JSON.stringify(items)]);
  }

  /**
   * Takes the single-use right to send this attempt upstream, in one autocommit statement (shared
   * with the claims that arrive meanwhile, each decided as if alone): the
   * action row is locked (the reconciliation sweeper may be expiring it), the claim's primary key
   * makes a second claim a no-op, and the attempt and the action's transition are written only
   * when the claim was taken. A redelivered command, a second dispatcher or an expired command
   * sends nothing.
   */
  async claim(input: ClaimInput): Promise<ClaimResult> {
    const r = await this.claims.submit(GROUP_KEY, {
      action_id: input.actionId,
      now: input.now,
      attempt_no: input.attemptNo,
      claimed_by: input.claimedBy,
      claimable: CLAIMABLE,
      attempt_id: input.attemptId,
      role: input.role,
      route_id: input.routeId,
      route_version: input.routeVersion,
      attempt_status: CLAIMED_ATTEMPT_STATUS,
      effective_candidates: input.effectiveCandidates,
      dispatch_to: DISPATCH.to,
      dispatch_from: DISPATCH.from,
      hold_microusd: input.holdMicrousd === null ? null : input.holdMicrousd.toString(),
      policy_revision_id: input.policyRevisionId,
      experiment_pause_id: input.experimentPauseId ?? null,
    });
    if (r.status === null) return { ok: false, reason: 'not_dispatchable' };
    if (r.expired) return { ok: false, reason: 'expired' };
    if (!CLAIMABLE.includes(r.status)) return { ok: false, reason: 'not_dispatchable' };
    if (Number(r.claimed) === 0) return { ok: false, reason: 'already_claimed' };
    return { ok: true };
  }

  /**
   * Admits a hedge, retry or fallback of an action as ONE serialised step (the plpgsql function
   * `dispatch_admit_extra_attempt_funded`, one autocommit call): under the action's row lock, then the
   * reservation's, then its budget accounts' in `BUDGET_ACCOUNT_LOCK_ORDER`, it checks (in order)
   * that the attempt is not claimed yet, no winner, the action still open, the deadline, the role's
   * limit, the attempt count, the extra spend, and every budget account's room and floor; then it
   * adds the attempt's own hold to the reservation and to every one of its accounts' pending and
   * inserts the claim and the attempt row, with the price revision it will be settled at
   * and, under an experiment allowance, its funding set (`input.allowance`: the allowance account
   * instead of the workload and exception ones; `experiment_allowance_spent` when it has no room).
   * A refusal writes nothing but a new allowance account; the primary's hold stays.
   */
  async admitExtraAttempt(input: ExtraAttemptInput): Promise<ExtraAttemptResult> {
    if (input.holdMicrousd < 0n) throw new RangeError('holdMicrousd must not be negative');
    const l = input.limits;
    const rows = await this.db.query<{ refused: string | null; attempts_total: number | null }>(ADMIT_EXTRA, [
      input.actionId,
      input.attemptId,
      input.attemptNo,
      input.role,
      input.routeId,
      input.routeVersion,
      input.effectiveCandidates,
      input.holdMicrousd,
      input.policyRevisionId,
      l.maxAttempts,
      l.maxHedges,
      l.maxRetries,
      l.maxExtraSpendMicrousd,
      l.spendFloorMicrousd,
      l.minUsefulRemainingMs,
      input.claimedBy,
      input.now,
      EXTENDABLE,
      CLAIMED_ATTEMPT_STATUS,
      [...BUDGET_ACCOUNT_LOCK_ORDER],
      input.priceRevisionId,
      input.allowance ? budgetAccountId(EXPERIMENT_ALLOWANCE_SCOPE, input.allowance.scopeId, input.allowance.periodStart) : null,
      input.allowance?.scopeId ?? null,
      input.allowance?.periodStart ?? null,
      input.allowance?.budgetMicrousd ?? null,
    ]);
    const r = rows[0];
    if (r.refused === null) return { ok: true, attemptsTotal: Number(r.attempts_total) };
    const reason = EXTRA_ATTEMPT_DENIALS.find((d) => d === r.refused);
    if (!reason) throw new Error(`dispatch_admit_extra_attempt_funded answered an unknown refusal: ${r.refused}`);
    return { ok: false, reason };
  }

  /**
   * The winner compare-and-set (`dispatch_choose_winner`, one autocommit call under the action's
   * row lock, so it is serialised with `admitExtraAttempt`): the first attempt of the still-open
   * action to ask wins; later callers get `won: false` and the winner's id. Asking again as the
   * winner answers `won: true`.
   */
  async chooseWinner(input: { actionId: string; attemptId: string; now: Date }): Promise<{ won: boolean; winnerAttemptId: string | null }> {
    const rows = await this.db.query<{ won: boolean; winner_attempt_id: string | null }>(CHOOSE_WINNER, [
      input.actionId,
      input.attemptId,
      input.now,
      EXTENDABLE,
    ]);
    return { won: rows[0].won, winnerAttemptId: rows[0].winner_attempt_id };
  }

  /**
   * Records an attempt's end and its sanitised event in one autocommit statement (shared with the
   * completions that arrive meanwhile, each decided as if alone), so the attempt, action and
   * in-flight counter rows are locked for that statement only, never across an event-loop turn. The statement decides first, under row locks taken in the global order
   * (attempt, then action): both transitions must be allowed by libs/domain's machines and this
   * event must not be recorded yet; only then are the attempt and action updated, the in-flight
   * slot released when the action ends, and the outbox row written. An action's winner that ends
   * it becomes `winner_attempt_id` here when none is recorded yet: for an action that can have no
   * other attempt (no hedge policy), this statement is the winner's record and no compare-and-set
   * runs before it.
   *
   * Safe to run again with the same outcome: when a previous run committed (a connection lost after
   * COMMIT leaves the caller unsure), the outbox row of this outcome's event id is there, and the
   * run answers `already_recorded` instead of failing the compare-and-set. A different outcome for
   * an attempt that has already ended is still an InvalidTransitionError.
   */
  async complete(o: AttemptOutcome): Promise<'recorded' | 'already_recorded'> {
    const attemptEvent =
      o.status === 'succeeded' ? 'succeed' : o.status === 'failed' ? 'fail' : o.status === 'cancelled' ? 'cancel' : 'cut';
    const attemptGuard = transitionGuard(attemptMachine, attemptEvent);
    const actionGuard = o.finishAction
      ? transitionGuard(
          actionMachine,
          o.finishAction.status === 'answered' ? 'answer' : o.finishAction.status === 'failed' ? 'fail' : 'expire',
        )
      : null;
    const event = Topics.attemptCompleted.schema.parse(o.event);
    const key = o.event.workload_id ?? o.actionId;
    const r = await this.completions.submit(GROUP_KEY, {
      attempt_id: o.attemptId,
      attempt_from: attemptGuard.from,
      attempt_to: attemptGuard.to,
      status_reason: o.statusReason,
      provider_request_id: o.providerRequestId,
      http_status: o.httpStatus,
      returned_candidates: o.returnedCandidates,
      candidate_outcomes: o.candidateOutcomes,
      prompt_block_reason: o.promptBlockReason,
      input_tokens: o.usage?.inputTokens ?? null,
      cached_input_tokens: o.usage?.cachedInputTokens ?? null,
      output_tokens_total: o.usage?.outputTokensTotal ?? null,
      reasoning_tokens: o.usage?.reasoningTokens ?? null,
      usage_source: o.usageSource,
      delivery_outcome: o.delivery.outcome,
      acceptance_verdict: o.delivery.verdict,
      acceptance_reason: o.delivery.verdictReason,
      now: o.now,
      action_id: o.actionId,
      finishing: o.finishAction !== null,
      action_from: actionGuard?.from ?? [],
      action_to: actionGuard?.to ?? '',
      action_reason: o.finishAction?.reason ?? '',
      action_returned_candidates: o.finishAction?.returnedCandidates ?? null,
      workload_id: o.finishAction?.workloadId ?? '',
      event_id: event.event_id,
      topic: Topics.attemptCompleted.name,
      key,
      payload: event,
      cache_write_input_tokens: event.cache_write_input_tokens ?? null,
      audio_input_tokens: event.audio_input_tokens ?? null,
      audio_output_tokens: event.audio_output_tokens ?? null,
      image_output_tokens: event.image_output_tokens ?? null,
      service_tier: event.service_tier ?? null,
      feature_calls: event.feature_calls ?? null,
      deadline_outcome: event.deadline_outcome ?? null,
      // the winner of an action that could have no other attempt, recorded without a compare-and-set
      winner: event.winner === true,
    });
    // The item's check ran before its own insert, so this is a previous run's row.
    if (r.recorded) return 'already_recorded';
    if (!r.ok) {
      if (r.attempt_status === null || !attemptGuard.from.includes(r.attempt_status as AttemptState))
        throw new InvalidTransitionError('attempt', 'not ' + attemptGuard.from.join('|'), attemptEvent);
      throw new InvalidTransitionError('action', 'not ' + (actionGuard?.from.join('|') ?? ''), 'finish');
    }
    this.outbox.committedNow([{ id: BigInt(r.outbox_id as string), topic: Topics.attemptCompleted.name, key, payload: event }]);
    return 'recorded';
  }
}

const DISPATCH = transitionGuard(actionMachine, 'dispatch');
/** Further attempts (hedge, retry, fallback) of an already dispatched action may be claimed too. */
const CLAIMABLE: string[] = [...DISPATCH.from, DISPATCH.to];
const CLAIMED_ATTEMPT_STATUS = attemptMachine.transition('claimed', 'start');
/** An action that may still gain an attempt or a winner: dispatched and not ended. */
const EXTENDABLE: string[] = [DISPATCH.to];

/**
 * `dispatch_admit_extra_attempt_funded` (migration 20261202200000, its allowance account creation as of 20261203800000; the one extra-attempt admission;
 * it replaced `dispatch_admit_extra_attempt` and its priced wrapper): $1..$20 as those declared them,
 * $21 the attempt's price revision, $22..$25 the experiment allowance, all null without one.
 */
const ADMIT_EXTRA: PreparedStatement = {
  name: 'dispatch_admit_extra_attempt_funded',
  text: `SELECT refused, attempts_total FROM dispatch_admit_extra_attempt_funded($1::text, $2::text, $3::int, $4::text, $5::text, $6::int,
    $7::int, $8::bigint, $9::text, $10::int, $11::int, $12::int, $13::bigint, $14::bigint, $15::int, $16::text, $17::timestamptz,
    $18::text[], $19::text, $20::text[], $21::text, $22::text, $23::text, $24::timestamptz, $25::bigint)`,
};

/**
 * $1 action, $2 attempt, $3 now, $4 the action states a winner may still be chosen in. The attempt
 * is locked before the action (`dispatch_choose_winner_in_order`, the global lock order).
 */
const CHOOSE_WINNER: PreparedStatement = {
  name: 'dispatch_choose_winner_in_order',
  text: `SELECT won, winner_attempt_id FROM dispatch_choose_winner_in_order($1::text, $2::text, $3::timestamptz, $4::text[])`,
};

/** Claims and completions each form one group per repository (the statements lock rows of many workloads in a fixed order). */
const GROUP_KEY = 'all';

/**
 * At most this many attempts per statement: the functions take their row locks item by item, so
 * a group holds the locks of its earlier items until its commit.
 */
const MAX_GROUP = 32;

interface ClaimRow extends Record<string, unknown> {
  status: string | null;
  expired: boolean | null;
  claimed: number;
}

interface CompleteRow extends Record<string, unknown> {
  ok: boolean;
  recorded: boolean;
  attempt_status: string | null;
  outbox_id: string | null;
}

/**
 * Claims of a group, each as the single statement decided it (prisma/migrations/
 * 20261203600000_dispatch_group_statements): the action row locked, the claim's primary key
 * making a second claim a no-op, the attempt and the action's transition written only when the
 * claim was taken. $1 the items as JSON, in order.
 */
const CLAIM_GROUP: PreparedStatement = {
  name: 'dispatch_claim_group',
  text: 'SELECT status, expired, claimed FROM dispatch_claim_group($1::jsonb) ORDER BY ord',
};

/**
 * Completions of a group, each as the single statement decided it (same migration): the attempt
 * locked, then its action when it finishes the action; both transitions allowed by libs/domain's
 * machines (`from` / `to` per item) and the event not recorded yet; then the writes, and at the
 * end the in-flight slots of the actions that ended, per workload in workload-id order.
 */
const COMPLETE_GROUP: PreparedStatement = {
  name: 'dispatch_complete_group',
  text: 'SELECT ok, recorded, attempt_status, outbox_id FROM dispatch_complete_group($1::jsonb) ORDER BY ord',
};
