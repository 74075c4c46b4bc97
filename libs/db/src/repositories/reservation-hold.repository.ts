import {
  accountDeltas,
  ActionState,
  BUDGET_ACCOUNT_LOCK_ORDER,
  foldMovements,
  Hold,
  isNoMovement,
  Movement,
  ReservationState,
} from '@gateway/domain';
import { prismaTx, Tx } from '../database';

/** A reservation as the money paths see it, read under a row lock. */
export interface ReservationView extends Hold {
  id: string;
  actionId: string;
  priceRevisionId: string;
  accountIds: string[];
  /** the action's state, read under the same lock (settlement: is the action over?) */
  actionStatus: ActionState;
}

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
   * then its reservation, in action id order (the global lock order: action before reservation —
   * `moveMany` updates both, and an extra attempt's admission locks the action, then the reservation).
   */
  async lockMany(tx: Tx, actionIds: readonly string[]): Promise<Map<string, ReservationView>> {
    if (actionIds.length === 0) return new Map();
    const rows = await prismaTx(tx).$queryRaw<
      Array<{
        id: string;
        action_id: string;
        status: string;
        reserved_microusd: bigint;
        settled_microusd: bigint;
        unresolved_microusd: bigint;
        released_microusd: bigint;
        price_revision_id: string;
        workload_account_id: string;
        exception_account_id: string | null;
        scope_account_ids: string[] | null;
        action_status: string;
      }>
    >`SELECT r.id, r.action_id, r.status, r.reserved_microusd, r.settled_microusd, r.unresolved_microusd, r.released_microusd,
             r.price_revision_id, r.workload_account_id, r.exception_account_id, r.scope_account_ids, a.status AS action_status
      FROM action a JOIN reservation r ON r.action_id = a.id
      WHERE a.id = ANY(${[...actionIds]}::text[]) ORDER BY a.id FOR UPDATE OF a, r`;
    return new Map(
      rows.map((r) => [
        r.action_id,
        {
          id: r.id,
          actionId: r.action_id,
          status: r.status as ReservationState,
          reservedMicrousd: BigInt(r.reserved_microusd),
          settledMicrousd: BigInt(r.settled_microusd),
          unresolvedMicrousd: BigInt(r.unresolved_microusd),
          releasedMicrousd: BigInt(r.released_microusd),
          priceRevisionId: r.price_revision_id,
          // The budget accounts' lock order: workload → exception → team → environment (as admission).
          accountIds: [r.workload_account_id, ...(r.exception_account_id ? [r.exception_account_id] : []), ...(r.scope_account_ids ?? [])],
          actionStatus: r.action_status as ActionState,
        },
      ]),
    );
  }

  /**
   * Applies a movement to the reservation and, identically, to each of its budget accounts (so
   * pending + unresolved + settled on an account always equals the sum over its reservations),
   * and records the action's financial state — one statement (`moveMany` with one step). The
   * accounts are locked by scope (workload → exception → team → environment, the order admission
   * takes), so a team account shared by many workloads cannot deadlock against an admission. The movement
   * is checked against the hold first (`applyMovement` refuses negative buckets and edges the
   * machine lacks).
   */
  async move(tx: Tx, r: ReservationView, m: Movement, reason: string, now: Date): Promise<void> {
    await this.moveMany(tx, [{ r, steps: [m], reason }], now);
  }

  /**
   * `move` for a settlement batch, in one statement: each reservation's steps (planned in
   * sequence on it) are checked and folded (`foldMovements`), the reservations and their actions
   * updated, and every budget account moved once by the sum over its reservations
   * (`accountDeltas`), the accounts locked by scope rank then id (`BUDGET_ACCOUNT_LOCK_ORDER`,
   * the order admission takes), after the reservations.
   */
  async moveMany(
    tx: Tx,
    moves: ReadonlyArray<{ r: ReservationView; steps: readonly Movement[]; reason: string }>,
    now: Date,
  ): Promise<void> {
    const folded = moves
      .map(({ r, steps, reason }) => ({ r, reason, movement: foldMovements(r, steps).movement }))
      .filter(
        (f): f is { r: ReservationView; reason: string; movement: Movement } => f.movement !== null && !isNoMovement(f.r, f.movement),
      );
    if (folded.length === 0) return;
    const deltas = accountDeltas(folded.map((f) => ({ accountIds: f.r.accountIds, movement: f.movement })));
    const col = <T>(pick: (f: (typeof folded)[number]) => T) => folded.map(pick);
    // `id = ANY(ids)` beside each join on the batch's values: the rows are found through the
    // primary key whatever the planner guesses of the unnest's size (without it, it hashed a
    // sequential scan of reservation and of action for every batch: cost grew with the tables).
    await prismaTx(tx).$executeRaw`
      WITH v AS (
        SELECT * FROM unnest(${col((f) => f.r.id)}::text[], ${col((f) => f.movement.toSettledMicrousd)}::bigint[],
          ${col((f) => f.movement.toUnresolvedMicrousd - f.movement.fromUnresolvedMicrousd)}::bigint[],
          ${col((f) => f.movement.toReleasedMicrousd)}::bigint[], ${col((f) => f.movement.status)}::text[], ${col((f) => f.reason)}::text[])
          AS v(id, to_settled, unresolved_delta, to_released, status, reason)
      ),
      res AS (
        UPDATE reservation r SET
          settled_microusd = r.settled_microusd + v.to_settled,
          unresolved_microusd = r.unresolved_microusd + v.unresolved_delta,
          released_microusd = r.released_microusd + v.to_released,
          status = v.status, status_reason = v.reason, updated_at = ${now}
        FROM v WHERE r.id = v.id AND r.id = ANY(${col((f) => f.r.id)}::text[])
        RETURNING r.action_id, r.status
      ),
      act AS (
        UPDATE action a SET financial_state = res.status FROM res
        WHERE a.id = res.action_id AND a.id = ANY(${col((f) => f.r.actionId)}::text[])
        RETURNING a.id
      ),
      d AS (
        SELECT * FROM unnest(${deltas.map((d) => d.accountId)}::text[], ${deltas.map((d) => d.fromPendingMicrousd)}::bigint[],
          ${deltas.map((d) => d.toSettledMicrousd)}::bigint[], ${deltas.map((d) => d.unresolvedDeltaMicrousd)}::bigint[])
          AS d(id, from_pending, to_settled, unresolved_delta)
      ),
      locked AS (
        SELECT b.id FROM budget_account b WHERE b.id IN (SELECT id FROM d) AND EXISTS (SELECT 1 FROM res)
        ORDER BY array_position(${[...BUDGET_ACCOUNT_LOCK_ORDER]}::text[], b.scope), b.id FOR UPDATE
      )
      UPDATE budget_account b SET
        pending_microusd = b.pending_microusd - d.from_pending,
        settled_microusd = b.settled_microusd + d.to_settled,
        unresolved_microusd = b.unresolved_microusd + d.unresolved_delta,
        updated_at = now()
      FROM d WHERE b.id = d.id AND b.id IN (SELECT id FROM locked)`;
  }
}
