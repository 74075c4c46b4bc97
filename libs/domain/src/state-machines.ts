/**
 * Lifecycles of the gateway's records as explicit transition tables.
 *
 * Persistence adapters call `transition` before writing a status column, so an illegal
 * move (e.g. settling a reservation twice) fails loudly in code instead of silently
 * corrupting the ledger. Terminal states have no outgoing edges by construction.
 */

export class InvalidTransitionError extends Error {
  constructor(
    public readonly machine: string,
    public readonly from: string,
    public readonly event: string,
  ) {
    super(`${machine}: event '${event}' is not allowed in state '${from}'`);
    this.name = 'InvalidTransitionError';
  }
}

export interface Machine<S extends string, E extends string> {
  readonly name: string;
  readonly states: readonly S[];
  readonly events: readonly E[];
  transition(from: S, event: E): S;
  can(from: S, event: E): boolean;
  terminal(state: S): boolean;
}

export function defineMachine<S extends string, E extends string>(
  name: string,
  transitions: Record<S, Partial<Record<E, S>>>,
): Machine<S, E> {
  // Own-property lookups only: a state or event named like an Object.prototype member
  // ('constructor', 'toString') must not resolve to something inherited.
  const has = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);
  const edges = (from: S): Partial<Record<E, S>> | undefined => (has(transitions, from) ? transitions[from] : undefined);

  const states = Object.keys(transitions) as S[];
  const events = [...new Set(states.flatMap((s) => Object.keys(transitions[s]) as E[]))];

  const can = (from: S, event: E): boolean => {
    const out = edges(from);
    return out !== undefined && has(out, event);
  };

  return {
    name,
    states,
    events,
    can,
    transition(from, event) {
      if (!can(from, event)) throw new InvalidTransitionError(name, from, event);
      return edges(from)![event] as S;
    },
    terminal(state) {
      const out = edges(state);
      if (out === undefined) throw new InvalidTransitionError(name, state, '(terminal check)');
      return Object.keys(out).length === 0;
    },
  };
}

/**
 * For a compare-and-set in storage (`UPDATE … SET status = to WHERE status = ANY(from)`): the
 * states an event may leave from, and the one state it leads to. Throws when the event leads to
 * different states depending on where it starts, since one conditional update cannot express that.
 */
export function transitionGuard<S extends string, E extends string>(machine: Machine<S, E>, event: E): { from: S[]; to: S } {
  const from = machine.states.filter((s) => machine.can(s, event));
  const targets = [...new Set(from.map((s) => machine.transition(s, event)))];
  if (targets.length !== 1) throw new InvalidTransitionError(machine.name, from.join('|') || '(none)', event);
  return { from, to: targets[0] };
}

// ---------------------------------------------------------------------------------------
// Action: one application call as seen by the gateway, from receipt to a final answer.

export type ActionState = 'received' | 'admitted' | 'denied' | 'dispatched' | 'answered' | 'failed' | 'expired';
export type ActionEvent = 'admit' | 'deny' | 'dispatch' | 'answer' | 'fail' | 'expire';

export const actionMachine = defineMachine<ActionState, ActionEvent>('action', {
  received: { admit: 'admitted', deny: 'denied' },
  admitted: { dispatch: 'dispatched', fail: 'failed', expire: 'expired' },
  dispatched: { answer: 'answered', fail: 'failed', expire: 'expired' },
  denied: {},
  answered: {},
  failed: {},
  expired: {},
});

// ---------------------------------------------------------------------------------------
// Attempt: one upstream provider call. Every non-settled outcome must still end in
// `settled`, possibly via reconciliation, because money was (or may have been) spent.

export type AttemptState =
  'claimed' | 'in_flight' | 'succeeded' | 'failed' | 'cancelled' | 'usage_missing' | 'reconciliation_required' | 'settled';
export type AttemptEvent = 'start' | 'succeed' | 'fail' | 'cancel' | 'cut' | 'settle' | 'require_reconciliation';

export const attemptMachine = defineMachine<AttemptState, AttemptEvent>('attempt', {
  claimed: { start: 'in_flight' },
  in_flight: { succeed: 'succeeded', fail: 'failed', cancel: 'cancelled', cut: 'usage_missing' },
  succeeded: { settle: 'settled', require_reconciliation: 'reconciliation_required' },
  failed: { settle: 'settled', require_reconciliation: 'reconciliation_required' },
  cancelled: { settle: 'settled', require_reconciliation: 'reconciliation_required' },
  usage_missing: { settle: 'settled', require_reconciliation: 'reconciliation_required' },
  reconciliation_required: { settle: 'settled' },
  settled: {},
});

/**
 * Attempt states after which no usage will come through settlement: settled, or handed to
 * reconciliation. An action is done for settlement when none of its attempts is outside these
 * (the settle use case and the attempt repository's counts both read this list).
 */
export const SETTLEMENT_DONE_STATES: readonly AttemptState[] = ['settled', 'reconciliation_required'];

export function awaitsSettlement(status: AttemptState): boolean {
  return !SETTLEMENT_DONE_STATES.includes(status);
}

// ---------------------------------------------------------------------------------------
// Reservation: a two-phase hold on budget (cf. pending transfers in double-entry ledgers).
// A hold resolves exactly once — settled, voided or released — so budget is never freed
// or charged twice. `unresolved` keeps counting against the budget until an operator or
// late usage data resolves it.

export type ReservationState = 'pending' | 'unresolved' | 'settled' | 'voided' | 'released';
export type ReservationEvent = 'settle' | 'mark_unresolved' | 'void' | 'release';

export const reservationMachine = defineMachine<ReservationState, ReservationEvent>('reservation', {
  pending: { settle: 'settled', mark_unresolved: 'unresolved', void: 'voided' },
  unresolved: { settle: 'settled', release: 'released' },
  settled: {},
  voided: {},
  released: {},
});

export function reservationResolved(state: ReservationState): boolean {
  switch (state) {
    case 'settled':
    case 'voided':
    case 'released':
      return true;
    case 'pending':
    case 'unresolved':
      return false;
    default: {
      const unreachable: never = state;
      throw new Error(`Unhandled reservation state: ${String(unreachable)}`);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Policy exception: a time-boxed, four-eyes-approved raise of a workload limit.

export type ExceptionStatus = 'requested' | 'active' | 'rejected' | 'revoked' | 'expired';
export type ExceptionEvent = 'approve' | 'reject' | 'revoke' | 'expire';

export const exceptionMachine = defineMachine<ExceptionStatus, ExceptionEvent>('exception', {
  requested: { approve: 'active', reject: 'rejected', expire: 'expired' },
  active: { revoke: 'revoked', expire: 'expired' },
  rejected: {},
  revoked: {},
  expired: {},
});

export const APPROVER_ROLE = 'approver';

export type ApprovalDenial = 'self_approval' | 'not_an_approver';

export function canApprove(input: {
  requestedBy: string;
  approver: string;
  approverRoles: readonly string[];
}): { ok: true } | { ok: false; reason: ApprovalDenial } {
  // Self-approval is reported first: it is the more specific problem, and holding the
  // role does not cure it.
  if (input.approver === input.requestedBy) return { ok: false, reason: 'self_approval' };
  if (!input.approverRoles.includes(APPROVER_ROLE)) return { ok: false, reason: 'not_an_approver' };
  return { ok: true };
}

/**
 * Status as of `now`. Expiry is a time fact that a sweeper records later, so readers must
 * not trust a stored `active` (or a still-open `requested`) past `expiresAt`.
 */
export function effectiveExceptionStatus(exception: { status: ExceptionStatus; expiresAt: Date }, now: Date): ExceptionStatus {
  const past = now.getTime() >= exception.expiresAt.getTime();
  switch (exception.status) {
    case 'active':
    case 'requested':
      return past ? 'expired' : exception.status;
    case 'rejected':
    case 'revoked':
    case 'expired':
      return exception.status;
    default: {
      const unreachable: never = exception.status;
      throw new Error(`Unhandled exception status: ${String(unreachable)}`);
    }
  }
}
