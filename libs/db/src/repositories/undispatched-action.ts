import type { Logger } from 'pino';
import { actionMachine, planVoid } from '@gateway/domain';
import type { Database } from '../database';
import { StatementGroups } from '../statement-groups';
import { ReconciliationRepository, ReconciliationStore } from './reconciliation.repository';
import { FundedSteps, ReservationHoldRepository } from './reservation-hold.repository';

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
  store: Pick<ReconciliationStore, 'transaction' | 'lockUndispatchedActions' | 'releaseInFlightSlots' | 'setActionStatus'>;
  holds: Pick<ReservationHoldRepository, 'lockMany' | 'moveMany'>;
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
  const [outcome] = await voidUndispatchedActions(ports, [actionId], why, now);
  return outcome;
}

/**
 * `voidUndispatchedAction` for several actions in one transaction, as if each were voided alone
 * in order (an id named again is `not_voidable` the second time: it is no longer admitted). The
 * same statements as for one: the actions locked in id order, the claims read after the locks,
 * the reservations locked, the slots returned per workload, the holds moved in one statement, the
 * actions expired. Answers each id's outcome, in order.
 */
export async function voidUndispatchedActions(
  ports: VoidPorts,
  actionIds: readonly string[],
  why: Undispatchable,
  now: Date,
): Promise<VoidOutcome[]> {
  const { store, holds, log } = ports;
  const reasons = why === 'withdrawn' ? REASONS.withdrawn : REASONS.deadline;
  const ids = [...new Set(actionIds)];
  return store.transaction(async (tx) => {
    const locked = await store.lockUndispatchedActions(tx, ids, why);
    const voidable = ids.filter((id) => locked.get(id)?.claimed === false);
    if (voidable.length > 0) {
      const reservations = await holds.lockMany(tx, voidable);
      // Quota counters before budget accounts (the global lock order admission follows too).
      await store.releaseInFlightSlots(
        tx,
        voidable.map((id) => locked.get(id)!.workloadId),
      );
      const moves: FundedSteps[] = [];
      for (const id of voidable) {
        const reservation = reservations.get(id);
        if (reservation?.status === 'pending') moves.push({ r: reservation, steps: [planVoid(reservation)], reason: reasons.hold });
        else if (reservation)
          log.warn(
            { action_id: id, reservation_status: reservation.status },
            'undispatched action whose reservation is no longer pending; expiring without moving money',
          );
      }
      await holds.moveMany(tx, moves, now);
      // Nothing was sent, so the Idempotency-Key goes back to the client: a retry with it is a new
      // action (the first can never run now: a claim needs it admitted), not a 409 replay of nothing.
      for (const status of new Set(voidable.map((id) => locked.get(id)!.status))) {
        const group = voidable.filter((id) => locked.get(id)!.status === status);
        await store.setActionStatus(tx, group, actionMachine.transition(status, 'expire'), reasons.action, now, {
          releaseIdempotencyKey: true,
        });
      }
    }
    const seen = new Set<string>();
    return actionIds.map((id) => {
      const first = !seen.has(id);
      seen.add(id);
      const lock = first ? locked.get(id) : undefined;
      return !lock ? 'not_voidable' : lock.claimed ? 'claimed' : 'voided';
    });
  });
}

/** How many withdrawals at most go in one transaction. */
const WITHDRAWAL_GROUP_MAX = 64;

/**
 * Withdrawing an admitted action that was never claimed (`voidUndispatchedAction(…, 'withdrawn')`):
 * admission's handle when it will not wait for an action's answer, and the route probe's.
 * Withdrawals that arrive while one runs, or in the same event-loop turn, go together in the next
 * transaction (`StatementGroups`, one after the other): under overload a client leaves mid-statement
 * dozens of times a second, and one transaction of eight round trips for many costs about what one
 * for each did. A group refused for its data (not a lost connection) is run again one by one, so a
 * withdrawal fails only for its own action; a failed one is left to the sweeper.
 */
export class ActionWithdrawal {
  private readonly groups: StatementGroups<{ actionId: string; now: Date }, VoidOutcome>;

  constructor(db: Database, log: VoidPorts['log']) {
    const ports: VoidPorts = { store: new ReconciliationRepository(db), holds: new ReservationHoldRepository(), log };
    this.groups = new StatementGroups(
      (items) =>
        voidUndispatchedActions(
          ports,
          items.map((i) => i.actionId),
          'withdrawn',
          items.reduce((latest, i) => (i.now > latest ? i.now : latest), items[0].now),
        ),
      WITHDRAWAL_GROUP_MAX,
    );
  }

  withdraw(actionId: string, now: Date): Promise<VoidOutcome> {
    return this.groups.submit('withdrawn', { actionId, now });
  }
}
