/**
 * Reconciliation's money decisions as pure functions over one reservation's buckets. A
 * reservation holds `reserved`; what is neither settled, unresolved nor released is still pending.
 * Every plan returns the movement to apply (mirrored on the budget accounts) and the reservation's
 * next state, checked against `reservationMachine`.
 *
 * These are domain rules; they live beside the app until libs/domain takes them.
 */
import { reservationMachine, ReservationState } from './state-machines';

export interface Hold {
  status: ReservationState;
  reservedMicrousd: bigint;
  settledMicrousd: bigint;
  unresolvedMicrousd: bigint;
  releasedMicrousd: bigint;
}

export interface Movement {
  fromPendingMicrousd: bigint;
  toUnresolvedMicrousd: bigint;
  fromUnresolvedMicrousd: bigint;
  toSettledMicrousd: bigint;
  toReleasedMicrousd: bigint;
  status: ReservationState;
}

const ZERO: Omit<Movement, 'status'> = {
  fromPendingMicrousd: 0n,
  toUnresolvedMicrousd: 0n,
  fromUnresolvedMicrousd: 0n,
  toSettledMicrousd: 0n,
  toReleasedMicrousd: 0n,
};

export function pendingOf(h: Hold): bigint {
  const p = h.reservedMicrousd - h.settledMicrousd - h.unresolvedMicrousd - h.releasedMicrousd;
  return p > 0n ? p : 0n;
}

const min = (a: bigint, b: bigint): bigint => (a < b ? a : b);

/**
 * An admitted action whose command can no longer be dispatched: the whole pending hold is
 * released and the reservation voided. Only a pending reservation can be voided (the machine
 * throws otherwise).
 */
export function planVoid(h: Hold): Movement {
  const pending = pendingOf(h);
  return { ...ZERO, fromPendingMicrousd: pending, toReleasedMicrousd: pending, status: reservationMachine.transition(h.status, 'void') };
}

/**
 * Attempts whose dispatcher vanished mid-call: the provider may have billed them, so what is
 * still pending becomes unresolved exposure (never zero, never released). Several orphans of one
 * action share the pending hold; each case gets an equal share, the first one the remainder.
 */
export function planOrphans(h: Hold, orphanCount: number): { movement: Movement; exposuresMicrousd: bigint[] } {
  if (!Number.isInteger(orphanCount) || orphanCount < 1) throw new RangeError('orphanCount must be a positive integer');
  const pending = pendingOf(h);
  const share = pending / BigInt(orphanCount);
  const exposures = Array.from({ length: orphanCount }, (_, i) => (i === 0 ? share + (pending - share * BigInt(orphanCount)) : share));
  const status = pending > 0n && h.status === 'pending' ? reservationMachine.transition('pending', 'mark_unresolved') : h.status;
  return { movement: { ...ZERO, fromPendingMicrousd: pending, toUnresolvedMicrousd: pending, status }, exposuresMicrousd: exposures };
}

export interface CaseResolutionPlan {
  movement: Movement;
  /** the case's exposure that was actually held as unresolved on the reservation */
  heldMicrousd: bigint;
  releasedMicrousd: bigint;
  /** cost beyond everything the reservation still held: recorded, never hidden */
  overrunMicrousd: bigint;
}

/**
 * Resolves one case's exposure: `costMicrousd` is settled (provider evidence) or null (an
 * operator releases it without usage). The case's held exposure pays first; a cost above it
 * takes from what is still pending, and anything beyond is an overrun that is settled anyway
 * because the provider billed it. What the case held beyond its cost is released.
 *
 * When `actionDone` (no attempt of the action can still bring usage) and no other open case
 * needs the rest, the remaining pending hold is released too, and the reservation resolves:
 * `settled` after evidence, `released` after an operator release.
 */
export function planCaseResolution(
  h: Hold,
  input: { caseExposureMicrousd: bigint; costMicrousd: bigint | null; actionDone: boolean; otherOpenExposureMicrousd: bigint },
): CaseResolutionPlan {
  const pending = pendingOf(h);
  const held = min(input.caseExposureMicrousd > 0n ? input.caseExposureMicrousd : 0n, h.unresolvedMicrousd);
  const cost = input.costMicrousd ?? 0n;
  let fromPending = 0n;
  let released = 0n;
  let overrun = 0n;
  if (cost <= held) {
    released = held - cost;
  } else {
    fromPending = min(cost - held, pending);
    overrun = cost - held - fromPending;
  }
  const unresolvedAfter = h.unresolvedMicrousd - held;
  let pendingAfter = pending - fromPending;
  if (input.actionDone && pendingAfter > 0n) {
    released += pendingAfter;
    fromPending += pendingAfter;
    pendingAfter = 0n;
  }
  const outstanding = unresolvedAfter > 0n || pendingAfter > 0n || input.otherOpenExposureMicrousd > 0n || !input.actionDone;
  return {
    movement: {
      fromPendingMicrousd: fromPending,
      toUnresolvedMicrousd: 0n,
      fromUnresolvedMicrousd: held,
      toSettledMicrousd: cost,
      toReleasedMicrousd: released,
      status: outstanding ? h.status : resolvedStatus(h.status, input.costMicrousd === null ? 'release' : 'settle'),
    },
    heldMicrousd: held,
    releasedMicrousd: released,
    overrunMicrousd: overrun,
  };
}

function resolvedStatus(status: ReservationState, event: 'settle' | 'release'): ReservationState {
  switch (status) {
    case 'unresolved':
      return reservationMachine.transition('unresolved', event);
    case 'pending':
      // A pending reservation cannot be "released" by the machine; with nothing outstanding it settled.
      return reservationMachine.transition('pending', 'settle');
    case 'settled':
    case 'voided':
    case 'released':
      return status;
    default: {
      const unreachable: never = status;
      throw new Error(`Unhandled reservation state: ${String(unreachable)}`);
    }
  }
}
