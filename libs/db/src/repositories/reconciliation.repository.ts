import type { ActionState } from '@gateway/domain';
import { Database, Tx, prismaTx, txQuery } from '../database';
import { Prisma } from '../generated/prisma/client';
import { AttemptView, priceRevisionOf, toAttemptView } from './attempt.repository';
import type { Undispatchable } from './undispatched-action';

/** The attempt fields reconciliation reads (the attempt aggregate's view). */
export type ReconciliationAttemptView = AttemptView;

/** The action fields reconciliation reads: ids, counts, deadlines, never content. */
export interface ReconciliationActionView {
  id: string;
  /** the admission request id (null on actions admitted before it was stored) */
  requestId: string | null;
  workloadId: string;
  environment: string;
  routeId: string;
  routeVersion: number;
  modelAlias: string;
  streamMode: 'none' | 'sse';
  requestedCandidates: number | null;
  effectiveCandidates: number;
  status: ActionState;
  deadlineAt: Date;
  dispatchDeadlineAt: Date;
  /** the quota scopes admission recorded (absent/null: admitted before they were) */
  quotaScope?: string | null;
}

export interface BudgetAccountView {
  id: string;
  scope: string;
  scopeId: string;
  periodStart: Date;
  budgetMicrousd: bigint;
  pendingMicrousd: bigint;
  unresolvedMicrousd: bigint;
  settledMicrousd: bigint;
  updatedAt: Date;
}

/** An admitted action locked for a void: what the void needs of it, and whether a dispatcher claimed it. */
export interface UndispatchedActionLock {
  workloadId: string;
  status: ActionState;
  claimed: boolean;
}

/** The operations reconciliation's use cases need; the class below implements them on Postgres. */
export interface ReconciliationStore {
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  admittedPastDispatchDeadline(cutoff: Date, limit: number): Promise<string[]>;
  actionsWithInFlightAttemptsPastDeadline(cutoff: Date, limit: number): Promise<string[]>;
  lockUndispatchedActions(tx: Tx, actionIds: readonly string[], why: Undispatchable): Promise<Map<string, UndispatchedActionLock>>;
  lockOrphanedAttempts(tx: Tx, actionId: string, cutoff: Date): Promise<ReconciliationAttemptView[]>;
  lockAction(tx: Tx, actionId: string): Promise<ReconciliationActionView | null>;
  setActionStatus(
    tx: Tx,
    actionIds: readonly string[],
    status: ActionState,
    reason: string,
    now: Date,
    opts?: { releaseIdempotencyKey?: boolean },
  ): Promise<void>;
  releaseInFlightSlots(tx: Tx, workloadIds: readonly string[]): Promise<void>;
  budgetAccounts(workloadId: string | null, limit: number): Promise<BudgetAccountView[]>;
}

/**
 * What a provider-usage export line is compared with: the attempt it names (by provider request
 * id, or by the gateway's attempt id where the provider echoes it), the price its reservation
 * holds, its ledger row's usage when settled, and an open case about its missing evidence.
 */
export interface ExportMatch {
  attemptId: string;
  actionId: string;
  attemptStatus: string;
  providerRequestId: string | null;
  priceRevisionId: string | null;
  /** an open case of the attempt other than an export mismatch (what the export can resolve) */
  openCaseId: string | null;
  ledger: {
    inputTokens: number;
    cachedInputTokens: number;
    outputTokensTotal: number;
    reasoningTokens: number;
    costMicrousd: bigint;
  } | null;
}

const NO_WINDOW = new Date(0);

/** The case reason of an export line that disagrees with a settled ledger row. */
export const EXPORT_MISMATCH = 'export_mismatch';

/**
 * Reconciliation's action-side reads and writes: the sweeper's locked look-ups (actions whose
 * command can no longer be dispatched, attempts whose dispatcher died), action state, in-flight
 * slots and exposure per budget account. Cases, ledger rows, holds and attempt transitions have
 * their own repositories (case, ledger, reservation-hold, attempt). Every write takes the caller's transaction, so one use case commits the state change,
 * the budget movement and its outbox event together.
 */
export class ReconciliationRepository implements ReconciliationStore {
  constructor(private readonly db: Database) {}

  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  /** Candidates only; the decision is re-checked under a row lock. */
  async admittedPastDispatchDeadline(cutoff: Date, limit: number): Promise<string[]> {
    const rows = await this.db.prisma.action.findMany({
      where: { status: 'admitted', dispatchDeadlineAt: { lt: cutoff } },
      select: { id: true },
      orderBy: { dispatchDeadlineAt: 'asc' },
      take: limit,
    });
    return rows.map((r) => r.id);
  }

  /**
   * Candidates only; the decision is re-checked under a row lock. `ended_at IS NULL` is implied by
   * `in_flight` (the table's check `attempt_in_flight_unended`) and is what the partial index
   * `attempt_unended_action_id_idx` holds, so the sweep reads only the unended attempts.
   */
  async actionsWithInFlightAttemptsPastDeadline(cutoff: Date, limit: number): Promise<string[]> {
    const rows = await this.db.prisma.$queryRaw<Array<{ action_id: string }>>`
      SELECT DISTINCT t.action_id FROM attempt t JOIN action a ON a.id = t.action_id
      WHERE t.status = 'in_flight' AND t.ended_at IS NULL AND a.deadline_at < ${cutoff}
      LIMIT ${limit}`;
    return rows.map((r) => r.action_id);
  }

  /**
   * Locks the actions still admitted (in id order, the global lock order) and, for the sweeper,
   * past their dispatch deadline; the others are left out of the answer. The sweeper skips a row
   * someone else holds (whoever holds it decides, and the next sweep re-checks); admission
   * withdrawing its own actions waits for the rows, so a dispatcher claiming one at that moment is
   * seen (the action is then no longer admitted).
   */
  async lockUndispatchedActions(tx: Tx, actionIds: readonly string[], why: Undispatchable): Promise<Map<string, UndispatchedActionLock>> {
    const locks = new Map<string, UndispatchedActionLock>();
    if (actionIds.length === 0) return locks;
    // Through pg, not Prisma: admission runs this for the clients that left during their
    // reservation, dozens a second under overload, on its own event loop.
    const rows = await txQuery<{ id: string; workload_id: string; status: ActionState }>(
      tx,
      why === 'withdrawn'
        ? `SELECT id, workload_id, status FROM action WHERE id = ANY($1::text[]) AND status = 'admitted' ORDER BY id FOR UPDATE`
        : `SELECT id, workload_id, status FROM action
           WHERE id = ANY($1::text[]) AND status = 'admitted' AND dispatch_deadline_at < $2
           ORDER BY id FOR UPDATE SKIP LOCKED`,
      why === 'withdrawn' ? [actionIds] : [actionIds, why.deadlinePassedBefore],
    );
    if (rows.length === 0) return locks;
    // A statement of its own, after the locks: its snapshot sees a claim that committed while this
    // waited for a row (one statement's snapshot would predate it).
    const claimed = new Set(
      (
        await txQuery<{ action_id: string }>(tx, 'SELECT action_id FROM dispatch_claim WHERE action_id = ANY($1::text[])', [
          rows.map((r) => r.id),
        ])
      ).map((r) => r.action_id),
    );
    for (const r of rows) locks.set(r.id, { workloadId: r.workload_id, status: r.status, claimed: claimed.has(r.id) });
    return locks;
  }

  /** Locks the action's attempts still in flight past the action deadline; skips rows being written. */
  async lockOrphanedAttempts(tx: Tx, actionId: string, cutoff: Date): Promise<ReconciliationAttemptView[]> {
    const rows = await prismaTx(tx).$queryRaw<Array<{ id: string }>>`
      SELECT t.id FROM attempt t JOIN action a ON a.id = t.action_id
      WHERE t.action_id = ${actionId} AND t.status = 'in_flight' AND t.ended_at IS NULL AND a.deadline_at < ${cutoff}
      ORDER BY t.attempt_no
      FOR UPDATE OF t SKIP LOCKED`;
    if (rows.length === 0) return [];
    const attempts = await prismaTx(tx).attempt.findMany({ where: { id: { in: rows.map((r) => r.id) } }, orderBy: { attemptNo: 'asc' } });
    return attempts.map(toAttemptView);
  }

  async lockAction(tx: Tx, actionId: string): Promise<ReconciliationActionView | null> {
    const rows = await prismaTx(tx).$queryRaw<Array<{ id: string }>>`SELECT id FROM action WHERE id = ${actionId} FOR UPDATE`;
    if (rows.length === 0) return null;
    return this.readAction(tx, actionId);
  }

  /**
   * `releaseIdempotencyKey`: the action never reached a provider (an undispatched void), so its
   * Idempotency-Key is freed and a retry with it is admitted as a new action instead of being
   * refused as a replay of a result that will never exist.
   */
  async setActionStatus(
    tx: Tx,
    actionIds: readonly string[],
    status: ActionState,
    reason: string,
    now: Date,
    opts: { releaseIdempotencyKey?: boolean } = {},
  ): Promise<void> {
    if (actionIds.length === 0) return;
    await txQuery(
      tx,
      `UPDATE action SET status = $2, status_reason = $3, updated_at = $4${opts.releaseIdempotencyKey ? ', idempotency_key = NULL' : ''}
       WHERE id = ANY($1::text[])`,
      [actionIds, status, reason, now],
    );
  }

  /**
   * The workloads' in-flight counters (admission takes one slot per action): one slot back per
   * entry (a workload named twice gets two), never below zero, the counters locked in workload id
   * order (the order admission's statements take them in).
   */
  async releaseInFlightSlots(tx: Tx, workloadIds: readonly string[]): Promise<void> {
    if (workloadIds.length === 0) return;
    await txQuery(
      tx,
      `WITH n AS (SELECT scope_id, count(*)::int AS slots FROM unnest($1::text[]) AS scope_id GROUP BY scope_id),
            c AS (SELECT q.scope_id, q.instance_id, n.slots FROM quota_counter q JOIN n ON n.scope_id = q.scope_id
                  WHERE q.scope = 'workload' AND q.window_start = $2
                  ORDER BY q.scope_id, q.instance_id FOR UPDATE OF q)
       UPDATE quota_counter q SET in_flight = GREATEST(q.in_flight - c.slots, 0), updated_at = now()
       FROM c WHERE q.scope = 'workload' AND q.scope_id = c.scope_id AND q.window_start = $2 AND q.instance_id = c.instance_id`,
      [workloadIds, NO_WINDOW],
    );
  }

  /** The workload's own accounts, its exceptions' and its hedge policies' experiment allowances; every account when no workload is given. */
  async budgetAccounts(workloadId: string | null, limit: number): Promise<BudgetAccountView[]> {
    const where = workloadId
      ? Prisma.sql`WHERE (b.scope = 'workload' AND b.scope_id = ${workloadId})
          OR (b.scope = 'exception' AND b.scope_id IN (SELECT id FROM candidate_exception WHERE workload_id = ${workloadId}))
          OR CASE WHEN b.scope = 'experiment_allowance' THEN (b.scope_id::jsonb ->> 0) = ${workloadId} ELSE false END`
      : Prisma.empty;
    const rows = await this.db.prisma.$queryRaw<
      Array<{
        id: string;
        scope: string;
        scope_id: string;
        period_start: Date;
        budget_microusd: bigint;
        pending_microusd: bigint;
        unresolved_microusd: bigint;
        settled_microusd: bigint;
        updated_at: Date;
      }>
    >`
      SELECT b.id, b.scope, b.scope_id, b.period_start, b.budget_microusd, b.pending_microusd,
             b.unresolved_microusd, b.settled_microusd, b.updated_at
      FROM budget_account b ${where}
      ORDER BY b.scope DESC, b.scope_id, b.period_start DESC
      LIMIT ${limit}`;
    return rows.map((b) => ({
      id: b.id,
      scope: b.scope,
      scopeId: b.scope_id,
      periodStart: b.period_start,
      budgetMicrousd: BigInt(b.budget_microusd),
      pendingMicrousd: BigInt(b.pending_microusd),
      unresolvedMicrousd: BigInt(b.unresolved_microusd),
      settledMicrousd: BigInt(b.settled_microusd),
      updatedAt: b.updated_at,
    }));
  }

  async attemptsForExport(providerRequestIds: readonly string[], attemptIds: readonly string[]): Promise<ExportMatch[]> {
    if (providerRequestIds.length === 0 && attemptIds.length === 0) return [];
    const rows = await this.db.prisma.$queryRaw<
      Array<{
        id: string;
        action_id: string;
        status: string;
        provider_request_id: string | null;
        price_revision_id: string | null;
        attempt_price_revision_id: string | null;
        open_case_id: string | null;
        input_tokens: number | null;
        cached_input_tokens: number | null;
        output_tokens_total: number | null;
        reasoning_tokens: number | null;
        cost_microusd: bigint | null;
      }>
    >`
      SELECT at.id, at.action_id, at.status, at.provider_request_id, r.price_revision_id,
             at.price_revision_id AS attempt_price_revision_id, oc.id AS open_case_id,
             le.input_tokens, le.cached_input_tokens, le.output_tokens_total, le.reasoning_tokens, le.cost_microusd
      FROM attempt at
      LEFT JOIN reservation r ON r.action_id = at.action_id
      LEFT JOIN ledger_entry le ON le.attempt_id = at.id
      LEFT JOIN LATERAL (
        SELECT c.id FROM reconciliation_case c
        WHERE c.attempt_id = at.id AND c.status = 'open' AND c.reason <> ${EXPORT_MISMATCH}
        ORDER BY c.opened_at, c.id LIMIT 1
      ) oc ON true
      WHERE at.provider_request_id = ANY(${[...providerRequestIds]}::text[]) OR at.id = ANY(${[...attemptIds]}::text[])`;
    return rows.map((r) => ({
      attemptId: r.id,
      actionId: r.action_id,
      attemptStatus: r.status,
      providerRequestId: r.provider_request_id,
      priceRevisionId: priceRevisionOf(r.attempt_price_revision_id, r.price_revision_id),
      openCaseId: r.open_case_id,
      ledger:
        r.cost_microusd === null
          ? null
          : {
              inputTokens: r.input_tokens ?? 0,
              cachedInputTokens: r.cached_input_tokens ?? 0,
              outputTokensTotal: r.output_tokens_total ?? 0,
              reasoningTokens: r.reasoning_tokens ?? 0,
              costMicrousd: BigInt(r.cost_microusd),
            },
    }));
  }

  private async readAction(tx: Tx, actionId: string): Promise<ReconciliationActionView> {
    const a = await prismaTx(tx).action.findUniqueOrThrow({ where: { id: actionId } });
    return {
      id: a.id,
      requestId: a.requestId,
      workloadId: a.workloadId,
      environment: a.environment,
      routeId: a.routeId,
      routeVersion: a.routeVersion,
      modelAlias: a.modelAlias,
      streamMode: a.streamMode === 'sse' ? 'sse' : 'none',
      requestedCandidates: a.requestedCandidates,
      effectiveCandidates: a.effectiveCandidates,
      status: a.status as ActionState,
      deadlineAt: a.deadlineAt,
      dispatchDeadlineAt: a.dispatchDeadlineAt,
      quotaScope: a.quotaScope,
    };
  }
}
