import type { ReservationState } from '@gateway/domain';
import { Tx } from '../database';

/** A reservation as the money paths see it, read under a row lock. */
export interface ReservationView {
  id: string;
  actionId: string;
  status: ReservationState;
  reservedMicrousd: bigint;
  settledMicrousd: bigint;
  unresolvedMicrousd: bigint;
  releasedMicrousd: bigint;
  priceRevisionId: string;
  accountIds: string[];
}

/** A movement of one reservation between its buckets, mirrored on its budget accounts. */
export interface HoldMovement {
  fromPendingMicrousd: bigint;
  toSettledMicrousd: bigint;
  toUnresolvedMicrousd: bigint;
  fromUnresolvedMicrousd: bigint;
  toReleasedMicrousd: bigint;
  status: ReservationState;
  reason: string;
  now: Date;
}

/** Locks and reads the action's reservation in one round trip. */
export async function lockReservationOf(tx: Tx, actionId: string): Promise<ReservationView | null> {
  const rows = await tx.$queryRaw<
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
    }>
  >`SELECT id, action_id, status, reserved_microusd, settled_microusd, unresolved_microusd, released_microusd,
           price_revision_id, workload_account_id, exception_account_id
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
    accountIds: [r.workload_account_id, ...(r.exception_account_id ? [r.exception_account_id] : [])],
  };
}

/**
 * Applies a movement to the reservation and, identically, to each of its budget accounts, so
 * pending + unresolved + settled on an account always equals the sum over its reservations.
 */
export async function applyHoldMovement(tx: Tx, r: ReservationView, m: HoldMovement): Promise<void> {
  await tx.$executeRaw`
    WITH res AS (
      UPDATE reservation SET
        settled_microusd = settled_microusd + ${m.toSettledMicrousd},
        unresolved_microusd = unresolved_microusd + ${m.toUnresolvedMicrousd} - ${m.fromUnresolvedMicrousd},
        released_microusd = released_microusd + ${m.toReleasedMicrousd},
        status = ${m.status}, status_reason = ${m.reason}, updated_at = ${m.now}
      WHERE id = ${r.id}
      RETURNING id
    )
    UPDATE budget_account SET
      pending_microusd = pending_microusd - ${m.fromPendingMicrousd},
      settled_microusd = settled_microusd + ${m.toSettledMicrousd},
      unresolved_microusd = unresolved_microusd + ${m.toUnresolvedMicrousd} - ${m.fromUnresolvedMicrousd},
      updated_at = now()
    WHERE id = ANY(${r.accountIds}::text[]) AND EXISTS (SELECT 1 FROM res)`;
}
