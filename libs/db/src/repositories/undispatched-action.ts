import type { Logger } from 'pino';
import { actionMachine, planVoid } from '@gateway/domain';
import type { Database } from '../database';
import { ReconciliationRepository, ReconciliationStore } from './reconciliation.repository';
import { ReservationHoldRepository } from './reservation-hold.repository';

/**
 * Why an admitted action can be voided without asking dispatch:
 * - `{ deadlinePassedBefore }` (the sweeper): its dispatch deadline passed before that instant, and
 *   dispatch refuses an expired command, so no dispatcher can start it any more;
 * - `'withdrawn'` (admission): admission did not send its command, or could not confirm it sent it
 *   (the publish failed, or the client had been answered before the reservation committed).
 *   A command that reached the topic after all is refused by dispatch's claim, which needs the
 *   action still `admitted` under the same row lock.
 *
 * Either way a dispatch claim, taken under the action's row lock, decides: with one the action was
 * dispatched and nothing is voided.
 */
export type Undispatchable = { deadlinePassedBefore: Date } | 'withdrawn';

/**
 * `voided`: the reservation's pending hold released, the reservation voided, the in-flight slot
 * returned and the action expired, in one transaction; `claimed`: a dispatcher claimed it first (it
 * runs, and settles as ever); `not_voidable`: no longer admitted (or, for the sweeper, its deadline
 * not past, or its row held by someone else right now: the next sweep re-checks).
 */
export type VoidOutcome = 'voided' | 'claimed' | 'not_voidable';

export interface VoidPorts {
  store: Pick<ReconciliationStore, 'transaction' | 'lockUndispatchedAction' | 'releaseInFlightSlot' | 'setActionStatus'>;
  holds: Pick<ReservationHoldRepository, 'lock' | 'move'>;
  log: Pick<Logger, 'warn'>;
}

const REASONS = {
  deadline: {
    hold: 'voided: command never dispatched before its dispatch deadline',
    action: 'expired: not dispatched before its dispatch deadline; its Idempotency-Key, if any, released',
  },
  withdrawn: {
    hold: 'voided: command withdrawn by admission before any dispatcher claimed it',
    action:
      'expired: withdrawn by admission (its command could not be confirmed sent, its client had been answered, or its client had gone); its Idempotency-Key, if any, released',
  },
} as const;

/**
 * The one place an admitted action that will never be dispatched gives back what it holds (DESIGN
 * §9: no reservation leaks), under the action's row lock. The sweeper calls it for actions past
 * their dispatch deadline; admission calls it at once for an action it withdraws, so the slot and
 * the budget come back now instead of a dispatch deadline later.
 */
export async function voidUndispatchedAction(ports: VoidPorts, actionId: string, why: Undispatchable, now: Date): Promise<VoidOutcome> {
  const { store, holds, log } = ports;
  const reasons = why === 'withdrawn' ? REASONS.withdrawn : REASONS.deadline;
  return store.transaction(async (tx) => {
    const action = await store.lockUndispatchedAction(tx, actionId, why);
    if (!action) return 'not_voidable';
    if (action.claimed) return 'claimed';
    const reservation = await holds.lock(tx, actionId);
    // Quota counters before budget accounts (the global lock order admission follows too).
    await store.releaseInFlightSlot(tx, action.workloadId);
    if (reservation?.status === 'pending') {
      await holds.move(tx, reservation, planVoid(reservation), reasons.hold, now);
    } else if (reservation) {
      log.warn(
        { action_id: actionId, reservation_status: reservation.status },
        'undispatched action whose reservation is no longer pending; expiring without moving money',
      );
    }
    // Nothing was sent, so the Idempotency-Key goes back to the client: a retry with it is a new
    // action (the first can never run now: a claim needs it admitted), not a 409 replay of nothing.
    await store.setActionStatus(tx, actionId, actionMachine.transition(action.status, 'expire'), reasons.action, now, {
      releaseIdempotencyKey: true,
    });
    return 'voided';
  });
}

/**
 * Withdrawing an admitted action that was never claimed (`voidUndispatchedAction(…, 'withdrawn')`):
 * admission's handle when it will not wait for an action's answer, and the route probe's.
 */
export class ActionWithdrawal {
  private readonly ports: VoidPorts;

  constructor(db: Database, log: VoidPorts['log']) {
    this.ports = { store: new ReconciliationRepository(db), holds: new ReservationHoldRepository(), log };
  }

  withdraw(actionId: string, now: Date): Promise<VoidOutcome> {
    return voidUndispatchedAction(this.ports, actionId, 'withdrawn', now);
  }
}
