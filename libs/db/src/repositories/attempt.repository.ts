import type { AttemptRole, FinancialState, UsageSource } from '@gateway/contracts';
import {
  attemptMachine,
  AttemptEvent,
  AttemptState,
  InvalidTransitionError,
  SETTLEMENT_DONE_STATES,
  transitionGuard,
} from '@gateway/domain';
import { prismaTx, Tx, txQuery } from '../database';

export interface AttemptView {
  id: string;
  actionId: string;
  attemptNo: number;
  role: AttemptRole;
  routeId: string;
  routeVersion: number;
  status: AttemptState;
  providerRequestId: string | null;
  returnedCandidates: number | null;
  startedAt: Date;
  /** the attempt's own hold (issue 10; null: recorded before holds were per attempt) */
  holdMicrousd: bigint | null;
  /** whether this attempt won the action's compare-and-set, and the hedge policy revision it ran under */
  winner: boolean;
  policyRevisionId: string | null;
  /** the price revision this attempt is priced at (null: recorded before attempts carried one; `priceRevisionOf`) */
  priceRevisionId: string | null;
  /** the accounts its hold sits on when not the reservation's (an allowance-funded extra attempt; `fundingAccountsOf`) */
  fundingAccountIds?: string[] | null;
}

/** An attempt as settlement locks it: its state and the price revision it is priced at. */
export interface LockedAttempt {
  status: AttemptState;
  priceRevisionId: string | null;
  /** the accounts its hold sits on when not the reservation's (libs/domain `fundingAccountsOf`) */
  fundingAccountIds?: string[] | null;
}

/**
 * Which price applies to an attempt (the one rule, issue 10): the revision recorded on the attempt
 * — the reservation's for the primary, its own route's in force for a hedge, retry or fallback —
 * else, on an attempt recorded before attempts carried one (migration 20261202160000 back-fills
 * them), its reservation's.
 */
export function priceRevisionOf(attemptRevision: string | null | undefined, reservationRevision: string): string;
export function priceRevisionOf(attemptRevision: string | null | undefined, reservationRevision: string | null): string | null;
export function priceRevisionOf(attemptRevision: string | null | undefined, reservationRevision: string | null): string | null {
  return attemptRevision ?? reservationRevision;
}

/** What a late piece of evidence records on the attempt row. */
export interface AttemptEvidence {
  usageSource: Extract<UsageSource, 'provider_export' | 'operator_release' | 'provider_response' | 'stream_final_chunk'>;
  providerRequestId?: string | null;
  inputTokens?: number;
  cachedInputTokens?: number;
  outputTokensTotal?: number;
  reasoningTokens?: number;
}

/** Where an attempt's money stands after an event: only settling and needing evidence decide it. */
function financialStateAfter(event: AttemptEvent): FinancialState | null {
  switch (event) {
    case 'settle':
      return 'settled';
    case 'require_reconciliation':
      return 'unresolved';
    case 'start':
    case 'succeed':
    case 'fail':
    case 'cancel':
    case 'cut':
      return null;
    default: {
      const unreachable: never = event;
      throw new Error(`Unhandled attempt event: ${String(unreachable)}`);
    }
  }
}

/** The attempt aggregate as settlement and reconciliation move it. */
export class AttemptRepository {
  /** Locks the attempt row first (the global lock order in docs/architecture.md); false when it does not exist. */
  async lockAttempt(tx: Tx, attemptId: string): Promise<boolean> {
    const rows = await prismaTx(tx).$queryRaw<Array<{ id: string }>>`SELECT id FROM attempt WHERE id = ${attemptId} FOR UPDATE`;
    return rows.length === 1;
  }

  /**
   * Locks a batch's attempts in id order (the global lock order, then id) and returns the status
   * and price revision of each that exists (read with the lock: pricing costs no extra query).
   */
  async lockAttempts(tx: Tx, attemptIds: readonly string[]): Promise<Map<string, LockedAttempt>> {
    if (attemptIds.length === 0) return new Map();
    const rows = await txQuery<{ id: string; status: string; price_revision_id: string | null; funding_account_ids: string[] | null }>(
      tx,
      'SELECT id, status, price_revision_id, funding_account_ids FROM attempt WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE',
      [attemptIds],
    );
    return new Map(
      rows.map((r) => [
        r.id,
        { status: r.status as AttemptState, priceRevisionId: r.price_revision_id, fundingAccountIds: r.funding_account_ids },
      ]),
    );
  }

  async byId(tx: Tx, attemptId: string): Promise<AttemptView | null> {
    const a = await prismaTx(tx).attempt.findUnique({ where: { id: attemptId } });
    return a ? toAttemptView(a) : null;
  }

  /**
   * Compare-and-set on the states libs/domain allows for `event` (throws when the attempt is
   * elsewhere); records the attempt's financial state and any late evidence with it.
   */
  async transition(tx: Tx, attemptId: string, event: AttemptEvent, reason: string, now: Date, evidence?: AttemptEvidence): Promise<void> {
    const guard = transitionGuard(attemptMachine, event);
    const e = evidence;
    const updated = await prismaTx(tx).$executeRaw`
      UPDATE attempt SET status = ${guard.to}, status_reason = ${reason}, updated_at = ${now},
        financial_state = COALESCE(${financialStateAfter(event)}, financial_state),
        usage_source = COALESCE(${e?.usageSource ?? null}, usage_source),
        provider_request_id = COALESCE(${e?.providerRequestId ?? null}, provider_request_id),
        input_tokens = COALESCE(${e?.inputTokens ?? null}::int, input_tokens),
        cached_input_tokens = COALESCE(${e?.cachedInputTokens ?? null}::int, cached_input_tokens),
        output_tokens_total = COALESCE(${e?.outputTokensTotal ?? null}::int, output_tokens_total),
        reasoning_tokens = COALESCE(${e?.reasoningTokens ?? null}::int, reasoning_tokens)
      WHERE id = ${attemptId} AND status = ANY(${guard.from}::text[])`;
    if (updated !== 1) throw new InvalidTransitionError('attempt', `${attemptId} not in ${guard.from.join('|')}`, event);
  }

  /**
   * `transition` for a batch, without evidence: one compare-and-set statement per event kind
   * (`id = ANY(ids)` keeps the lookup on the primary key, as in `ReservationHoldRepository.moveMany`).
   * Throws when any attempt is not in a state its event allows (nothing of the batch commits).
   */
  async transitionMany(tx: Tx, items: ReadonlyArray<{ attemptId: string; event: AttemptEvent; reason: string }>, now: Date): Promise<void> {
    for (const event of new Set(items.map((i) => i.event))) {
      const mine = items.filter((i) => i.event === event);
      const guard = transitionGuard(attemptMachine, event);
      const ids = mine.map((i) => i.attemptId);
      const [{ updated }] = await txQuery<{ updated: number }>(tx, TRANSITION_MANY, [
        guard.to,
        now,
        financialStateAfter(event),
        ids,
        mine.map((i) => i.reason),
        guard.from,
      ]);
      if (updated !== mine.length) {
        throw new InvalidTransitionError('attempt', `${mine.length - updated} of ${mine.length} not in ${guard.from.join('|')}`, event);
      }
    }
  }

  /**
   * Each attempt's own hold (what its admission added to the reservation's pending pool; null on
   * attempts recorded before holds were per attempt): what it moves to unresolved when it ends
   * without usage evidence (libs/domain `planMoveToUnresolved`).
   */
  async holdsOf(tx: Tx, attemptIds: readonly string[]): Promise<Map<string, bigint | null>> {
    if (attemptIds.length === 0) return new Map();
    const rows = await prismaTx(tx).$queryRaw<Array<{ id: string; hold_microusd: bigint | null }>>`
      SELECT id, hold_microusd FROM attempt WHERE id = ANY(${[...attemptIds]}::text[])`;
    return new Map(rows.map((r) => [r.id, r.hold_microusd === null ? null : BigInt(r.hold_microusd)]));
  }

  /** For each action: its attempts that may still bring usage through settlement. */
  async awaitingSettlementByAction(tx: Tx, actionIds: readonly string[]): Promise<Map<string, number>> {
    if (actionIds.length === 0) return new Map();
    const rows = await txQuery<{ action_id: string; n: number }>(
      tx,
      `SELECT action_id, (count(*) FILTER (WHERE NOT (status = ANY($1::text[]))))::int AS n
       FROM attempt WHERE action_id = ANY($2::text[]) GROUP BY action_id`,
      [SETTLEMENT_DONE_STATES, actionIds],
    );
    return new Map(rows.map((r) => [r.action_id, Number(r.n)]));
  }

  /** Attempts of the action that may still bring usage through settlement (domain `awaitsSettlement`). */
  async awaitingSettlement(tx: Tx, actionId: string): Promise<number> {
    return (await this.awaitingSettlementByAction(tx, [actionId])).get(actionId) ?? 0;
  }
}

/**
 * `transitionMany`'s compare-and-set for one event kind: $1 the state to, $2 now, $3 the financial
 * state after (null: unchanged), $4/$5 the attempts and their reasons, $6 the states from.
 */
const TRANSITION_MANY = `
  WITH u AS (
    UPDATE attempt a SET status = $1::text, status_reason = v.reason, updated_at = $2::timestamptz,
      financial_state = COALESCE($3::text, a.financial_state)
    FROM unnest($4::text[], $5::text[]) AS v(id, reason)
    WHERE a.id = v.id AND a.id = ANY($4::text[]) AND a.status = ANY($6::text[])
    RETURNING 1
  )
  SELECT count(*)::int AS updated FROM u`;

export function toAttemptView(a: {
  id: string;
  actionId: string;
  attemptNo: number;
  role: string;
  routeId: string;
  routeVersion: number;
  status: string;
  providerRequestId: string | null;
  returnedCandidates: number | null;
  startedAt: Date;
  holdMicrousd: bigint | null;
  winner: boolean;
  hedgePolicyRevisionId: string | null;
  priceRevisionId: string | null;
  fundingAccountIds?: string[] | null;
}): AttemptView {
  return {
    id: a.id,
    actionId: a.actionId,
    attemptNo: a.attemptNo,
    role: a.role as AttemptRole,
    routeId: a.routeId,
    routeVersion: a.routeVersion,
    status: a.status as AttemptState,
    providerRequestId: a.providerRequestId,
    returnedCandidates: a.returnedCandidates,
    startedAt: a.startedAt,
    holdMicrousd: a.holdMicrousd,
    winner: a.winner,
    policyRevisionId: a.hedgePolicyRevisionId,
    priceRevisionId: a.priceRevisionId,
    fundingAccountIds: a.fundingAccountIds?.length ? a.fundingAccountIds : null,
  };
}
