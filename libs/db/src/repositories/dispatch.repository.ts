import { AcceptanceVerdict, AttemptCompletedV1, AttemptRole, DeliveryOutcome, Topics } from '@gateway/contracts';
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
import { budgetAccountId } from './admission.repository';
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
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  /**
   * Takes the single-use right to send this attempt upstream, in one autocommit statement: the
   * action row is locked (the reconciliation sweeper may be expiring it), the claim's primary key
   * makes a second claim a no-op, and the attempt and the action's transition are written only
   * when the claim was taken. A redelivered command, a second dispatcher or an expired command
   * sends nothing.
   */
  async claim(input: ClaimInput): Promise<ClaimResult> {
    const rows = await this.db.query<{ status: string | null; expired: boolean | null; claimed: string }>(CLAIM, [
      input.actionId,
      input.now,
      input.attemptNo,
      input.claimedBy,
      CLAIMABLE,
      input.attemptId,
      input.role,
      input.routeId,
      input.routeVersion,
      CLAIMED_ATTEMPT_STATUS,
      input.effectiveCandidates,
      DISPATCH.to,
      DISPATCH.from,
      input.holdMicrousd,
      input.policyRevisionId,
      input.experimentPauseId ?? null,
    ]);
    const r = rows[0];
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
   * Records an attempt's end and its sanitised event in one autocommit statement, so the attempt,
   * action and in-flight counter rows are locked for that statement only, never across an
   * event-loop turn. The statement decides first, under row locks taken in the global order
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
    const rows = await this.db.query<{ ok: boolean; recorded: boolean; attempt_status: string | null; outbox_id: string | null }>(
      COMPLETE,
      [
        o.attemptId,
        attemptGuard.from,
        attemptGuard.to,
        o.statusReason,
        o.providerRequestId,
        o.httpStatus,
        o.returnedCandidates,
        JSON.stringify(o.candidateOutcomes),
        o.promptBlockReason,
        o.usage?.inputTokens ?? null,
        o.usage?.cachedInputTokens ?? null,
        o.usage?.outputTokensTotal ?? null,
        o.usage?.reasoningTokens ?? null,
        o.usageSource,
        o.delivery.outcome,
        o.delivery.verdict,
        o.delivery.verdictReason,
        o.now,
        o.actionId,
        o.finishAction !== null,
        actionGuard?.from ?? [],
        actionGuard?.to ?? '',
        o.finishAction?.reason ?? '',
        o.finishAction?.returnedCandidates ?? null,
        o.finishAction?.workloadId ?? '',
        event.event_id,
        Topics.attemptCompleted.name,
        key,
        JSON.stringify(event),
        event.cache_write_input_tokens ?? null,
        event.audio_input_tokens ?? null,
        event.audio_output_tokens ?? null,
        event.image_output_tokens ?? null,
        event.service_tier ?? null,
        event.feature_calls ? JSON.stringify(event.feature_calls) : null,
        event.deadline_outcome ?? null,
        // the winner of an action that could have no other attempt, recorded without a compare-and-set
        event.winner === true,
      ],
    );
    const r = rows[0];
    // The statement's snapshot predates its own insert, so this is a previous run's row.
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
 * `dispatch_admit_extra_attempt_funded` (migration 20261202200000, the one extra-attempt admission;
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

/**
 * $1 action, $2 now, $3 attempt_no, $4 claimed_by, $5 claimable action states, $6 attempt id,
 * $7 role, $8 route, $9 route version, $10 attempt status, $11 effective candidates,
 * $12/$13 the action's dispatch transition (to / from), $14 the attempt's own hold (null: the
 * reservation's amount, which is the admission's while only the primary exists), $15 the hedge
 * policy revision in force, $16 the experiment pause open at dispatch (issue 11). The attempt's price
 * revision is the reservation's (the primary is priced at what admission reserved at).
 */
const CLAIM: PreparedStatement = {
  name: 'dispatch_claim',
  text: `
    WITH a AS (
      SELECT id, status, dispatch_deadline_at <= $2::timestamptz AS expired FROM action WHERE id = $1::text FOR UPDATE
    ),
    c AS (
      INSERT INTO dispatch_claim (action_id, attempt_no, claimed_by, claimed_at)
      SELECT id, $3::int, $4::text, $2::timestamptz FROM a WHERE NOT a.expired AND a.status = ANY($5::text[])
      ON CONFLICT DO NOTHING
      RETURNING action_id
    ),
    t AS (
      INSERT INTO attempt (id, action_id, attempt_no, role, route_id, route_version, status, status_reason, effective_candidates,
        hold_microusd, hedge_policy_revision_id, price_revision_id, experiment_pause_id, started_at, updated_at)
      SELECT $6::text, action_id, $3::int, $7::text, $8::text, $9::int, $10::text, 'sent upstream', $11::int,
        COALESCE($14::bigint, (SELECT r.reserved_microusd FROM reservation r WHERE r.action_id = $1::text)), $15::text,
        (SELECT r.price_revision_id FROM reservation r WHERE r.action_id = $1::text), $16::text, $2::timestamptz, $2::timestamptz
      FROM c
      RETURNING id
    ),
    u AS (
      UPDATE action SET status = $12::text, status_reason = 'dispatched', updated_at = $2::timestamptz
      WHERE id IN (SELECT action_id FROM c) AND status = ANY($13::text[])
      RETURNING id
    )
    SELECT (SELECT status FROM a) AS status, (SELECT expired FROM a) AS expired, (SELECT count(*) FROM t) AS claimed`,
};

/**
 * Guards first: `at` locks the attempt, then `ac` the action (only once `at` has run, and
 * only when the attempt finishes the action), and `g` decides. The writes run only when `g.ok`.
 * $1 attempt, $2/$3 attempt transition (from / to), $4..$17 the attempt's outcome columns,
 * $18 now, $19 action, $20 finishing, $21/$22 action transition (from / to), $23 action reason,
 * $24 action returned candidates, $25 workload, $26 event id, $27 topic, $28 key, $29 payload,
 * $30..$35 the attempt's billable detail (from the event: cache writes, audio in / out, image out,
 * tier, feature calls), $36 the attempt's deadline outcome (issue 10; from the event).
 */
const COMPLETE: PreparedStatement = {
  name: 'dispatch_complete',
  text: `
    WITH at AS (
      SELECT status FROM attempt WHERE id = $1::text FOR UPDATE
    ),
    ac AS (
      SELECT status FROM action WHERE id = $19::text AND $20::boolean AND EXISTS (SELECT 1 FROM at) FOR UPDATE
    ),
    g AS (
      SELECT COALESCE((SELECT status FROM at) = ANY($2::text[])
               AND (NOT $20::boolean OR (SELECT status FROM ac) = ANY($21::text[]))
               AND NOT EXISTS (SELECT 1 FROM outbox_message WHERE event_id = $26::text), false) AS ok,
             EXISTS (SELECT 1 FROM outbox_message WHERE event_id = $26::text) AS recorded
    ),
    at_end AS (
      UPDATE attempt SET status = $3::text, status_reason = $4::text, provider_request_id = $5::text,
        http_status = $6::int, returned_candidates = $7::int, candidate_outcomes = $8::jsonb, prompt_block_reason = $9::text,
        input_tokens = $10::int, cached_input_tokens = $11::int, output_tokens_total = $12::int, reasoning_tokens = $13::int,
        usage_source = $14::text, delivery_outcome = $15::text, acceptance_verdict = $16::text, acceptance_reason = $17::text,
        cache_write_input_tokens = $30::int, audio_input_tokens = $31::int, audio_output_tokens = $32::int,
        image_output_tokens = $33::int, service_tier = $34::text, feature_calls = $35::jsonb, deadline_outcome = $36::text,
        ended_at = $18::timestamptz, updated_at = $18::timestamptz
      WHERE id = $1::text AND (SELECT ok FROM g)
      RETURNING id
    ),
    ac_end AS (
      UPDATE action SET status = $22::text, status_reason = $23::text, returned_candidates = $24::int,
        delivery_outcome = $15::text, acceptance_verdict = $16::text, acceptance_reason = $17::text, updated_at = $18::timestamptz,
        winner_attempt_id = CASE WHEN $37::boolean THEN COALESCE(winner_attempt_id, $1::text) ELSE winner_attempt_id END
      WHERE id = $19::text AND $20::boolean AND (SELECT ok FROM g)
      RETURNING id
    ),
    slot AS (
      UPDATE quota_counter SET in_flight = GREATEST(in_flight - 1, 0), updated_at = now()
      WHERE scope = 'workload' AND scope_id = $25::text AND window_start = 'epoch'::timestamptz AND EXISTS (SELECT 1 FROM ac_end)
      RETURNING 1
    ),
    ob AS (
      INSERT INTO outbox_message (event_id, topic, key, payload)
      SELECT $26::text, $27::text, $28::text, $29::jsonb FROM at_end
      RETURNING id
    )
    SELECT (SELECT ok FROM g) AS ok, (SELECT recorded FROM g) AS recorded, (SELECT status FROM at) AS attempt_status,
      (SELECT id FROM ob) AS outbox_id`,
};
