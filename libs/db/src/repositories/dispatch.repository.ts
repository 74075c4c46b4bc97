import { AcceptanceVerdict, AttemptCompletedV1, AttemptRole, DeliveryOutcome, Topics } from '@gateway/contracts';
import { actionMachine, ActionState, attemptMachine, AttemptState, InvalidTransitionError, transitionGuard } from '@gateway/domain';
import { Database, prismaTx } from '../database';
import { OutboxRepository } from './outbox.repository';

export interface ClaimInput {
  actionId: string;
  attemptId: string;
  attemptNo: number;
  role: AttemptRole;
  routeId: string;
  routeVersion: number;
  effectiveCandidates: number;
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

/** Dispatch's state: single-use claims, attempt lifecycle, action completion. */
export class DispatchRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  /**
   * Takes the single-use right to send this attempt upstream, in one statement: the action row is
   * locked (the reconciliation sweeper may be expiring it), the claim's primary key makes a second
   * claim a no-op, and the attempt and the action's transition are written only when the claim
   * was taken. A redelivered command, a second dispatcher or an expired command sends nothing.
   */
  async claim(input: ClaimInput): Promise<ClaimResult> {
    const dispatch = transitionGuard(actionMachine, 'dispatch');
    // Further attempts (hedge, retry, fallback) of an already dispatched action may be claimed too.
    const claimable: string[] = [...dispatch.from, dispatch.to];
    const attemptStatus = attemptMachine.transition('claimed', 'start');
    const rows = await this.db.prisma.$queryRaw<Array<{ status: string | null; expired: boolean | null; claimed: bigint }>>`
      WITH a AS (
        SELECT id, status, dispatch_deadline_at <= ${input.now} AS expired FROM action WHERE id = ${input.actionId} FOR UPDATE
      ),
      c AS (
        INSERT INTO dispatch_claim (action_id, attempt_no, claimed_by, claimed_at)
        SELECT id, ${input.attemptNo}::int, ${input.claimedBy}, ${input.now} FROM a WHERE NOT a.expired AND a.status = ANY(${claimable}::text[])
        ON CONFLICT DO NOTHING
        RETURNING action_id
      ),
      t AS (
        INSERT INTO attempt (id, action_id, attempt_no, role, route_id, route_version, status, status_reason, effective_candidates, started_at, updated_at)
        SELECT ${input.attemptId}, action_id, ${input.attemptNo}::int, ${input.role}, ${input.routeId}, ${input.routeVersion}::int,
               ${attemptStatus}, 'sent upstream', ${input.effectiveCandidates}::int, ${input.now}, ${input.now}
        FROM c
        RETURNING id
      ),
      u AS (
        UPDATE action SET status = ${dispatch.to}, status_reason = 'dispatched', updated_at = ${input.now}
        WHERE id IN (SELECT action_id FROM c) AND status = ANY(${dispatch.from}::text[])
        RETURNING id
      )
      SELECT (SELECT status FROM a) AS status, (SELECT expired FROM a) AS expired, (SELECT count(*) FROM t) AS claimed`;
    const r = rows[0];
    if (r.status === null) return { ok: false, reason: 'not_dispatchable' };
    if (r.expired) return { ok: false, reason: 'expired' };
    if (!claimable.includes(r.status)) return { ok: false, reason: 'not_dispatchable' };
    if (Number(r.claimed) === 0) return { ok: false, reason: 'already_claimed' };
    return { ok: true };
  }

  /**
   * Records an attempt's end and its sanitised event in one transaction of a single statement:
   * both transitions are compare-and-set on the states libs/domain allows, the in-flight slot is
   * released when the action ends, and the outbox row is written with them.
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
    const finishing = o.finishAction !== null;
    return this.db.transaction(async (tx) => {
      const rows = await prismaTx(tx).$queryRaw<Array<{ attempt: bigint; action: bigint; outbox_id: bigint; recorded: boolean }>>`
        WITH at AS (
          UPDATE attempt SET status = ${attemptGuard.to}, status_reason = ${o.statusReason}, provider_request_id = ${o.providerRequestId},
            http_status = ${o.httpStatus}::int, returned_candidates = ${o.returnedCandidates}::int,
            candidate_outcomes = ${JSON.stringify(o.candidateOutcomes)}::jsonb, prompt_block_reason = ${o.promptBlockReason},
            input_tokens = ${o.usage?.inputTokens ?? null}::int, cached_input_tokens = ${o.usage?.cachedInputTokens ?? null}::int,
            output_tokens_total = ${o.usage?.outputTokensTotal ?? null}::int, reasoning_tokens = ${o.usage?.reasoningTokens ?? null}::int,
            usage_source = ${o.usageSource}, delivery_outcome = ${o.delivery.outcome}, acceptance_verdict = ${o.delivery.verdict},
            acceptance_reason = ${o.delivery.verdictReason}, ended_at = ${o.now}, updated_at = ${o.now}
          WHERE id = ${o.attemptId} AND status = ANY(${attemptGuard.from}::text[])
          RETURNING id
        ),
        ac AS (
          UPDATE action SET status = ${actionGuard?.to ?? ''}, status_reason = ${o.finishAction?.reason ?? ''},
            returned_candidates = ${o.finishAction?.returnedCandidates ?? null}::int, delivery_outcome = ${o.delivery.outcome},
            acceptance_verdict = ${o.delivery.verdict}, acceptance_reason = ${o.delivery.verdictReason}, updated_at = ${o.now}
          WHERE ${finishing} AND id = ${o.actionId} AND EXISTS (SELECT 1 FROM at)
            AND status = ANY(${actionGuard?.from ?? []}::text[])
          RETURNING id
        ),
        slot AS (
          UPDATE quota_counter SET in_flight = GREATEST(in_flight - 1, 0), updated_at = now()
          WHERE scope = 'workload' AND scope_id = ${o.finishAction?.workloadId ?? ''} AND window_start = ${NO_WINDOW}
            AND EXISTS (SELECT 1 FROM ac)
          RETURNING 1
        ),
        ob AS (
          INSERT INTO outbox_message (event_id, topic, key, payload)
          SELECT ${event.event_id}, ${Topics.attemptCompleted.name}, ${key}, ${JSON.stringify(event)}::jsonb FROM at
          RETURNING id
        )
        SELECT (SELECT count(*) FROM at) AS attempt, (SELECT count(*) FROM ac) AS action, (SELECT id FROM ob) AS outbox_id,
          EXISTS (SELECT 1 FROM outbox_message WHERE event_id = ${event.event_id}) AS recorded`;
      const r = rows[0];
      // The statement's snapshot predates its own insert, so this is a previous run's row.
      if (r.recorded) return 'already_recorded';
      if (Number(r.attempt) !== 1) throw new InvalidTransitionError('attempt', 'not ' + attemptGuard.from.join('|'), attemptEvent);
      if (finishing && Number(r.action) !== 1)
        throw new InvalidTransitionError('action', 'not ' + (actionGuard?.from.join('|') ?? ''), 'finish');
      this.outbox.committed(tx, { id: r.outbox_id, topic: Topics.attemptCompleted.name, key, payload: event });
      return 'recorded';
    });
  }
}

const NO_WINDOW = new Date(0);
