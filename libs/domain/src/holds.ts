/**
 * Hold arithmetic: the one home of every money movement on a reservation (DESIGN §7
 * Reservation). A reservation holds `reserved`; what is neither settled, unresolved nor released
 * is still pending. Every planner returns the `Movement` to apply (mirrored on the reservation's
 * budget accounts by one repository function) and the reservation's next state, checked against
 * `reservationMachine`.
 *
 * Overruns: a provider may bill more than the hold still covered. That cost is settled anyway
 * (never clipped); the planner reports it, so `reserved + overrun = settled + unresolved +
 * released + pending` holds after every plan.
 */
import { reservationMachine, ReservationEvent, ReservationState } from './state-machines';

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

const min = (a: bigint, b: bigint): bigint => (a < b ? a : b);
const nonNegative = (a: bigint): bigint => (a > 0n ? a : 0n);

export function pendingOf(h: Hold): bigint {
  return nonNegative(h.reservedMicrousd - h.settledMicrousd - h.unresolvedMicrousd - h.releasedMicrousd);
}

/** True when the movement changes nothing (no money and no state). */
export function isNoMovement(h: Hold, m: Movement): boolean {
  return (
    m.status === h.status &&
    m.fromPendingMicrousd === 0n &&
    m.toUnresolvedMicrousd === 0n &&
    m.fromUnresolvedMicrousd === 0n &&
    m.toSettledMicrousd === 0n &&
    m.toReleasedMicrousd === 0n
  );
}

/**
 * The hold after `m`, exactly as storage applies it to the reservation row. Throws when a
 * bucket would go negative or the state change is not an edge of `reservationMachine`, so a
 * wrong plan fails here, in tests and in-memory stores, rather than in a budget.
 */
export function applyMovement(h: Hold, m: Movement): Hold {
  checkStatusChange(h.status, m.status);
  const pending = pendingOf(h);
  if (m.fromPendingMicrousd > pending) throw new RangeError(`movement takes ${m.fromPendingMicrousd} from pending ${pending}`);
  const next: Hold = {
    status: m.status,
    reservedMicrousd: h.reservedMicrousd,
    settledMicrousd: h.settledMicrousd + m.toSettledMicrousd,
    unresolvedMicrousd: h.unresolvedMicrousd + m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd,
    releasedMicrousd: h.releasedMicrousd + m.toReleasedMicrousd,
  };
  for (const v of [
    m.fromPendingMicrousd,
    m.toUnresolvedMicrousd,
    m.fromUnresolvedMicrousd,
    m.toSettledMicrousd,
    m.toReleasedMicrousd,
    next.unresolvedMicrousd,
  ]) {
    if (v < 0n) throw new RangeError('a hold bucket or movement would be negative');
  }
  return next;
}

/** Same state, or one edge of `reservationMachine`. */
export function checkStatusChange(from: ReservationState, to: ReservationState): void {
  if (from === to) return;
  const ok = (reservationMachine.events as readonly ReservationEvent[]).some(
    (e) => reservationMachine.can(from, e) && reservationMachine.transition(from, e) === to,
  );
  if (!ok) throw new RangeError(`reservation cannot move from ${from} to ${to}`);
}

/** The hold admission places: the whole worst case pending. */
export function planReserve(reservedMicrousd: bigint): Hold {
  if (reservedMicrousd < 0n) throw new RangeError('reservedMicrousd must not be negative');
  return { status: 'pending', reservedMicrousd, settledMicrousd: 0n, unresolvedMicrousd: 0n, releasedMicrousd: 0n };
}

export interface SettlePlan {
  movement: Movement;
  /** cost beyond what was still pending: settled anyway, because the provider billed it */
  overrunMicrousd: bigint;
  releasedMicrousd: bigint;
}

/**
 * An attempt settled from provider evidence: its cost comes out of what is pending. When
 * `actionDone` (no attempt of the action can still bring usage), the rest of the pending hold is
 * released in the same movement, and the reservation resolves as settled unless unresolved
 * exposure remains.
 */
export function planSettle(h: Hold, input: { costMicrousd: bigint; actionDone: boolean }): SettlePlan {
  if (input.costMicrousd < 0n) throw new RangeError('costMicrousd must not be negative');
  const pending = pendingOf(h);
  const fromPendingForCost = min(input.costMicrousd, pending);
  const overrun = input.costMicrousd - fromPendingForCost;
  const release = input.actionDone ? pending - fromPendingForCost : 0n;
  return {
    movement: {
      ...ZERO,
      fromPendingMicrousd: fromPendingForCost + release,
      toSettledMicrousd: input.costMicrousd,
      toReleasedMicrousd: release,
      status: input.actionDone && h.unresolvedMicrousd === 0n ? settledStatus(h.status) : h.status,
    },
    overrunMicrousd: overrun,
    releasedMicrousd: release,
  };
}

/**
 * Usage is unknown (no usage, a cut stream, excess candidates, an orphaned call): the attempts'
 * exposure becomes unresolved (never zero, never released, never inferred from another attempt's
 * usage). Several attempts of one action (primary, hedge, retry, fallback) share the pending pool,
 * and each moves only ITS OWN exposure: its own hold (`attemptHoldsMicrousd[i]`, what admission or
 * the extra-attempt admission added to the pool for it), or what is left of the pool if less. The
 * rest of the pool stays pending for the other attempts, and is released only once the action is
 * over and no attempt awaits settlement (`planSettle`/`planReleaseRest` with `actionDone`).
 *
 * A null hold is an attempt recorded before holds were per attempt (the only attempt of its
 * action): such attempts share what the known holds leave, equally, the first the remainder — for
 * one attempt, the whole pending pool, as before.
 */
export function planMoveToUnresolved(
  h: Hold,
  attemptHoldsMicrousd: ReadonlyArray<bigint | null> = [null],
): { movement: Movement; exposuresMicrousd: bigint[] } {
  if (attemptHoldsMicrousd.length < 1) throw new RangeError('at least one attempt moves to unresolved');
  for (const held of attemptHoldsMicrousd) if (held !== null && held < 0n) throw new RangeError('an attempt hold must not be negative');
  let left = pendingOf(h);
  const exposures = attemptHoldsMicrousd.map((held) => {
    if (held === null) return 0n;
    const own = min(held, left);
    left -= own;
    return own;
  });
  const unknown = attemptHoldsMicrousd.flatMap((held, i) => (held === null ? [i] : []));
  if (unknown.length > 0) {
    const share = left / BigInt(unknown.length);
    unknown.forEach((i, k) => (exposures[i] = k === 0 ? share + (left - share * BigInt(unknown.length)) : share));
  }
  const moved = exposures.reduce((a, b) => a + b, 0n);
  const status = moved > 0n && h.status === 'pending' ? reservationMachine.transition('pending', 'mark_unresolved') : h.status;
  return { movement: { ...ZERO, fromPendingMicrousd: moved, toUnresolvedMicrousd: moved, status }, exposuresMicrousd: exposures };
}

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
 * When the action is over and nothing else is outstanding, the rest of the pending hold is
 * released (settlement of an attempt without usage evidence needs this after its case opened).
 */
export function planReleaseRest(h: Hold): Movement {
  const pending = pendingOf(h);
  return {
    ...ZERO,
    fromPendingMicrousd: pending,
    toReleasedMicrousd: pending,
    status: h.unresolvedMicrousd === 0n ? settledStatus(h.status) : h.status,
  };
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
 * Resolves one case's exposure at `costMicrousd`: the provider's evidence (usage import) or the
 * amount an operator attests after comparing evidence (release). Either way the amount is
 * settled, never released as if it were zero. The case's held exposure pays first; a cost above
 * it takes from what is still pending, and anything beyond is an overrun that is settled anyway.
 * What the case held beyond its cost is released.
 *
 * When `actionDone` (no attempt of the action can still bring usage) and no other open case
 * needs the rest, the remaining pending hold is released too, and the reservation resolves as
 * settled.
 */
export function planCaseResolution(
  h: Hold,
  input: { caseExposureMicrousd: bigint; costMicrousd: bigint; actionDone: boolean; otherOpenExposureMicrousd: bigint },
): CaseResolutionPlan {
  if (input.costMicrousd < 0n) throw new RangeError('costMicrousd must not be negative');
  const pending = pendingOf(h);
  const held = min(nonNegative(input.caseExposureMicrousd), h.unresolvedMicrousd);
  const cost = input.costMicrousd;
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
      status: outstanding ? h.status : settledStatus(h.status),
    },
    heldMicrousd: held,
    releasedMicrousd: released,
    overrunMicrousd: overrun,
  };
}

/** Two movements on the same hold as one write: `second` was planned on the hold after `first`. */
export function combineMovements(first: Movement, second: Movement): Movement {
  return {
    fromPendingMicrousd: first.fromPendingMicrousd + second.fromPendingMicrousd,
    toUnresolvedMicrousd: first.toUnresolvedMicrousd + second.toUnresolvedMicrousd,
    fromUnresolvedMicrousd: first.fromUnresolvedMicrousd + second.fromUnresolvedMicrousd,
    toSettledMicrousd: first.toSettledMicrousd + second.toSettledMicrousd,
    toReleasedMicrousd: first.toReleasedMicrousd + second.toReleasedMicrousd,
    status: second.status,
  };
}

/** The state a hold ends in once nothing about it is outstanding. */
function settledStatus(status: ReservationState): ReservationState {
  switch (status) {
    case 'pending':
    case 'unresolved':
      return reservationMachine.transition(status, 'settle');
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
