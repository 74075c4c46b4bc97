import { applyMovement, Hold, isNoMovement, Movement, ReservationState } from '@gateway/domain';
import { prismaTx, Tx } from '../database';

/** A reservation as the money paths see it, read under a row lock. */
export interface ReservationView extends Hold {
  id: string;
  actionId: string;
  priceRevisionId: string;
  accountIds: string[];
}

/**
 * The reservation-hold aggregate: a reservation and the budget accounts it holds money on. `move`
 * is the one place a planned `Movement` (libs/domain holds) reaches storage.
 */
export class ReservationHoldRepository {
  /** Locks and reads the action's reservation in one round trip. */
  async lock(tx: Tx, actionId: string): Promise<ReservationView | null> {
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
      }>
    >`SELECT id, action_id, status, reserved_microusd, settled_microusd, unresolved_microusd, released_microusd,
             price_revision_id, workload_account_id, exception_account_id, scope_account_ids
      FROM reservation WHERE action_id = ${actionId} FOR UPDATE`;
    const r = rows[0];
    if (!r) return null;
    return {
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
    };
  }

  /**
   * Applies a movement to the reservation and, identically, to each of its budget accounts (so
   * pending + unresolved + settled on an account always equals the sum over its reservations),
   * and records the action's financial state — one statement. The accounts are locked in the
   * order of `accountIds` (workload → exception → team → environment, the order admission takes),
   * so a team account shared by many workloads cannot deadlock against an admission. The movement
   * is checked against the hold first (`applyMovement` refuses negative buckets and edges the
   * machine lacks).
   */
  async move(tx: Tx, r: ReservationView, m: Movement, reason: string, now: Date): Promise<void> {
    applyMovement(r, m);
    if (isNoMovement(r, m)) return;
    await prismaTx(tx).$executeRaw`
      WITH res AS (
        UPDATE reservation SET
          settled_microusd = settled_microusd + ${m.toSettledMicrousd},
          unresolved_microusd = unresolved_microusd + ${m.toUnresolvedMicrousd} - ${m.fromUnresolvedMicrousd},
          released_microusd = released_microusd + ${m.toReleasedMicrousd},
          status = ${m.status}, status_reason = ${reason}, updated_at = ${now}
        WHERE id = ${r.id}
        RETURNING action_id
      ),
      act AS (
        UPDATE action SET financial_state = ${m.status} WHERE id IN (SELECT action_id FROM res) RETURNING id
      ),
      locked AS (
        SELECT id FROM budget_account WHERE id = ANY(${r.accountIds}::text[]) AND EXISTS (SELECT 1 FROM res)
        ORDER BY array_position(${r.accountIds}::text[], id) FOR UPDATE
      )
      UPDATE budget_account SET
        pending_microusd = pending_microusd - ${m.fromPendingMicrousd},
        settled_microusd = settled_microusd + ${m.toSettledMicrousd},
        unresolved_microusd = unresolved_microusd + ${m.toUnresolvedMicrousd} - ${m.fromUnresolvedMicrousd},
        updated_at = now()
      WHERE id IN (SELECT id FROM locked)`;
  }
}
