import {
  AccountDelta,
  accountDeltas,
  ActionState,
  BUDGET_ACCOUNT_LOCK_ORDER,
  foldMovements,
  fundedAccountDeltas,
  FundingGroup,
  fundingAccountsOf,
  Hold,
  isNoMovement,
  Movement,
  pendingOf,
  ReservationState,
} from '@gateway/domain';
import { prismaTx, Tx, txQuery } from '../database';

/** A reservation as the money paths see it, read under a row lock. */
export interface ReservationView extends Hold {
  id: string;
  actionId: string;
  priceRevisionId: string;
  accountIds: string[];
  /** the action's state, read under the same lock (settlement: is the action over?) */
  actionStatus: ActionState;
  /**
   * What the pool holds per funding set (libs/domain `funding.ts`): the reservation's own accounts
   * first, then one group per experiment allowance that funds an extra attempt of the action. One
   * group (the common case, no allowance), or none (a view built without them), is the reservation itself.
   */
  fundingGroups?: FundingGroup[];
}

/** One planned step on a reservation and the funding set of the attempt it is about (null: the reservation's). */
export type FundedSteps = {
  r: ReservationView;
  steps: readonly Movement[];
  reason: string;
  fundings?: ReadonlyArray<readonly string[] | null>;
};

/** As `pg` returns it: bigint columns as decimal strings. */
type LockedRow = {
  id: string;
  action_id: string;
  status: string;
  reserved_microusd: string;
  settled_microusd: string;
  unresolved_microusd: string;
  released_microusd: string;
  price_revision_id: string;
  workload_account_id: string;
  exception_account_id: string | null;
  scope_account_ids: string[] | null;
  action_status: string;
  funding: Array<{ account_ids: string[]; pending: string; unresolved: string }> | null;
};

/** A locked row as the view; the reservation's own funding group is its totals minus the allowance groups. */
function reservationView(r: LockedRow): ReservationView {
  const hold: Hold = {
    status: r.status as ReservationState,
    reservedMicrousd: BigInt(r.reserved_microusd),
    settledMicrousd: BigInt(r.settled_microusd),
    unresolvedMicrousd: BigInt(r.unresolved_microusd),
    releasedMicrousd: BigInt(r.released_microusd),
  };
  // The budget accounts' lock order: workload → exception → team → environment (as admission).
  const accountIds = [r.workload_account_id, ...(r.exception_account_id ? [r.exception_account_id] : []), ...(r.scope_account_ids ?? [])];
  const allowances: FundingGroup[] = (r.funding ?? []).map((f) => ({
    accountIds: f.account_ids,
    pendingMicrousd: BigInt(f.pending),
    unresolvedMicrousd: BigInt(f.unresolved),
  }));
  const own: FundingGroup = {
    accountIds,
    pendingMicrousd: pendingOf(hold) - allowances.reduce((a, g) => a + g.pendingMicrousd, 0n),
    unresolvedMicrousd: hold.unresolvedMicrousd - allowances.reduce((a, g) => a + g.unresolvedMicrousd, 0n),
  };
  return {
    id: r.id,
    actionId: r.action_id,
    ...hold,
    priceRevisionId: r.price_revision_id,
    accountIds,
    actionStatus: r.action_status as ActionState,
    fundingGroups: [own, ...allowances],
  };
}

/**
 * `lockMany`: $1 the action ids. Sent by `pg` on the transaction's connection (`txQuery`), as are
 * MOVE_MANY and the settlement batch's other statements: Prisma's parameter handling of the
 * batch's arrays was ~9 % of the settlement process's CPU (docs/decisions.md, "Batched settlement").
 */
const LOCK_MANY = `
  SELECT r.id, r.action_id, r.status, r.reserved_microusd, r.settled_microusd, r.unresolved_microusd, r.released_microusd,
         r.price_revision_id, r.workload_account_id, r.exception_account_id, r.scope_account_ids, a.status AS action_status,
         (SELECT json_agg(json_build_object('account_ids', f.account_ids, 'pending', f.pending_microusd::text,
            'unresolved', f.unresolved_microusd::text) ORDER BY f.account_id)
          FROM reservation_funding f WHERE f.reservation_id = r.id) AS funding
  FROM action a JOIN reservation r ON r.action_id = a.id
  WHERE a.id = ANY($1::text[]) ORDER BY a.id FOR UPDATE OF a, r`;

/**
 * `moveMany`: $1–$6 per reservation (id, to settled, unresolved delta, to released, status,
 * reason), $7 now, $8–$11 per budget account (id, from pending, to settled, unresolved delta),
 * $12 the accounts' lock order by scope. The accounts are locked once every reservation is updated
 * (`count(*)` reads all of `res`; `EXISTS` stopped at its first row), so a team account shared by
 * every partition's batch is held only for its own update and the commit, not for the
 * reservations' (bench:settlement: lock waiters 0.85–1.35 → 0.1–0.2). The action's money state is
 * its reservation's status (no copy on the action row). `id = ANY(ids)` beside each join on
 * the batch's values: the rows are found through the primary key whatever the planner guesses of
 * the unnest's size (without it, it hashed a sequential scan of reservation and of action for
 * every batch: cost grew with the tables).
 */
const MOVE_MANY = `
  WITH v AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[])
      AS v(id, to_settled, unresolved_delta, to_released, status, reason)
  ),
  res AS (
    UPDATE reservation r SET
      settled_microusd = r.settled_microusd + v.to_settled,
      unresolved_microusd = r.unresolved_microusd + v.unresolved_delta,
      released_microusd = r.released_microusd + v.to_released,
      status = v.status, status_reason = v.reason, updated_at = $7::timestamptz
    FROM v WHERE r.id = v.id AND r.id = ANY($1::text[])
    RETURNING r.id
  ),
  d AS (
    SELECT * FROM unnest($8::text[], $9::bigint[], $10::bigint[], $11::bigint[]) AS d(id, from_pending, to_settled, unresolved_delta)
  ),
  locked AS (
    SELECT b.id FROM budget_account b WHERE b.id IN (SELECT id FROM d) AND (SELECT count(*) FROM res) > 0
    ORDER BY array_position($12::text[], b.scope), b.id FOR UPDATE
  )
  UPDATE budget_account b SET
    pending_microusd = b.pending_microusd - d.from_pending,
    settled_microusd = b.settled_microusd + d.to_settled,
    unresolved_microusd = b.unresolved_microusd + d.unresolved_delta,
    updated_at = now()
  FROM d WHERE b.id = d.id AND b.id IN (SELECT id FROM locked)`;

/**
 * The reservation-hold aggregate: a reservation and the budget accounts it holds money on. `move`
 * is the one place a planned `Movement` (libs/domain holds) reaches storage.
 */
export class ReservationHoldRepository {
  /** Locks and reads the action's reservation in one round trip. */
  async lock(tx: Tx, actionId: string): Promise<ReservationView | null> {
    return (await this.lockMany(tx, [actionId])).get(actionId) ?? null;
  }

  /**
   * Locks and reads the actions' reservations in one round trip, by action id: each action row and
   * then its reservation, in action id order (the global lock order: action before reservation — a
   * sweep and an extra attempt's admission lock the action, then the reservation).
   */
  async lockMany(tx: Tx, actionIds: readonly string[]): Promise<Map<string, ReservationView>> {
    if (actionIds.length === 0) return new Map();
    const rows = await txQuery<LockedRow>(tx, LOCK_MANY, [actionIds]);
    return new Map(rows.map((r) => [r.action_id, reservationView(r)]));
  }

  /**
   * Applies a movement to the reservation and, identically, to each of its budget accounts (so
   * pending + unresolved + settled on an account always equals the sum over its reservations),
   * in one statement (`moveMany` with one step). The accounts are locked by scope (workload → exception → team → environment, the order admission
   * takes), so a team account shared by many workloads cannot deadlock against an admission. The movement
   * is checked against the hold first (`applyMovement` refuses negative buckets and edges the
   * machine lacks). `funding` is that of the attempt the movement is about (null: the reservation's).
   */
  async move(tx: Tx, r: ReservationView, m: Movement, reason: string, now: Date, funding: readonly string[] | null = null): Promise<void> {
    await this.moveMany(tx, [{ r, steps: [m], reason, fundings: [funding] }], now);
  }

  /**
   * `move` for a settlement batch, in one statement: each reservation's steps (planned in
   * sequence on it) are checked and folded (`foldMovements`), the reservations
   * updated, and every budget account moved once by the sum over its reservations
   * (`accountDeltas`), the accounts locked by scope rank then id (`BUDGET_ACCOUNT_LOCK_ORDER`,
   * the order admission takes), after the reservations.
   */
  async moveMany(tx: Tx, moves: ReadonlyArray<FundedSteps>, now: Date): Promise<void> {
    const folded = moves
      .map((m) => ({ ...m, movement: foldMovements(m.r, m.steps).movement }))
      .filter((f): f is FundedSteps & { movement: Movement } => f.movement !== null && !isNoMovement(f.r, f.movement));
    if (folded.length === 0) return;
    const { deltas, allowanceGroups } = ReservationHoldRepository.deltasOf(folded);
    const col = <T>(pick: (f: (typeof folded)[number]) => T) => folded.map(pick);
    await txQuery(tx, MOVE_MANY, [
      col((f) => f.r.id),
      col((f) => f.movement.toSettledMicrousd),
      col((f) => f.movement.toUnresolvedMicrousd - f.movement.fromUnresolvedMicrousd),
      col((f) => f.movement.toReleasedMicrousd),
      col((f) => f.movement.status),
      col((f) => f.reason),
      now,
      deltas.map((d) => d.accountId),
      deltas.map((d) => d.fromPendingMicrousd),
      deltas.map((d) => d.toSettledMicrousd),
      deltas.map((d) => d.unresolvedDeltaMicrousd),
      BUDGET_ACCOUNT_LOCK_ORDER,
    ]);
    // the allowance groups' rows: children of reservations this transaction holds locked
    if (allowanceGroups.length > 0) {
      await prismaTx(tx).$executeRaw`
        UPDATE reservation_funding f SET pending_microusd = v.pending, unresolved_microusd = v.unresolved
        FROM unnest(${allowanceGroups.map((g) => g.reservationId)}::text[], ${allowanceGroups.map((g) => g.accountId)}::text[],
          ${allowanceGroups.map((g) => g.pendingMicrousd)}::bigint[], ${allowanceGroups.map((g) => g.unresolvedMicrousd)}::bigint[])
          AS v(reservation_id, account_id, pending, unresolved)
        WHERE f.reservation_id = v.reservation_id AND f.account_id = v.account_id`;
    }
  }

  /**
   * The budget-account deltas of a batch: each reservation's movement mirrored on its accounts
   * (`accountDeltas`) when the pool has one funding group — every action without an experiment
   * allowance; else each step split across the funding groups by the funding set of the attempt
   * it is about (`fundedAccountDeltas`; `fundingAccountsOf` is the one rule), with the allowance
   * groups after the batch to write back.
   */
  private static deltasOf(folded: ReadonlyArray<FundedSteps & { movement: Movement }>): {
    deltas: AccountDelta[];
    allowanceGroups: Array<{ reservationId: string; accountId: string; pendingMicrousd: bigint; unresolvedMicrousd: bigint }>;
  } {
    if (folded.every((f) => (f.r.fundingGroups?.length ?? 0) <= 1)) {
      return { deltas: accountDeltas(folded.map((f) => ({ accountIds: f.r.accountIds, movement: f.movement }))), allowanceGroups: [] };
    }
    const { deltas, groups } = fundedAccountDeltas(
      folded.map(({ r, steps, fundings }) => ({
        groups: r.fundingGroups?.length
          ? r.fundingGroups
          : [{ accountIds: r.accountIds, pendingMicrousd: pendingOf(r), unresolvedMicrousd: r.unresolvedMicrousd }],
        steps: steps.map((movement, i) => ({ movement, funding: fundingAccountsOf(fundings?.[i] ?? null, r.accountIds) })),
      })),
    );
    const allowanceGroups = groups.flatMap((gs, k) =>
      gs.slice(1).map((g) => ({
        reservationId: folded[k].r.id,
        accountId: g.accountIds[0],
        pendingMicrousd: g.pendingMicrousd,
        unresolvedMicrousd: g.unresolvedMicrousd,
      })),
    );
    return { deltas, allowanceGroups };
  }
}
