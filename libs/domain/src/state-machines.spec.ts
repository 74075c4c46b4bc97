import fc from 'fast-check';
import {
  ExceptionStatus,
  InvalidTransitionError,
  Machine,
  ReservationState,
  actionMachine,
  attemptMachine,
  canApprove,
  defineMachine,
  effectiveExceptionStatus,
  exceptionMachine,
  reservationMachine,
  reservationResolved,
  transitionGuard,
} from './state-machines';

type AnyMachine = Machine<string, string>;
const machines: Array<[string, AnyMachine, string[], string]> = [
  ['action', actionMachine, ['denied', 'answered', 'failed', 'expired'], 'received'],
  ['attempt', attemptMachine, ['settled'], 'claimed'],
  ['reservation', reservationMachine, ['settled', 'voided', 'released'], 'pending'],
  ['exception', exceptionMachine, ['rejected', 'revoked', 'expired'], 'requested'],
];

describe('defineMachine', () => {
  const m = defineMachine<'a' | 'b', 'go' | 'back'>('toy', { a: { go: 'b' }, b: {} });

  it('transitions along declared edges', () => {
    expect(m.transition('a', 'go')).toBe('b');
    expect(m.can('a', 'go')).toBe(true);
    expect(m.can('b', 'go')).toBe(false);
  });

  it('throws InvalidTransitionError naming machine, state and event', () => {
    let caught: unknown;
    try {
      m.transition('b', 'go');
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(InvalidTransitionError);
    const err = caught as InvalidTransitionError;
    expect([err.machine, err.from, err.event]).toEqual(['toy', 'b', 'go']);
    expect(err.message).toContain('toy');
    expect(err.message).toContain("'b'");
    expect(err.message).toContain("'go'");
  });

  it('does not resolve inherited object members as states or events', () => {
    expect(m.can('a', 'constructor' as 'go')).toBe(false);
    expect(m.can('toString' as 'a', 'go')).toBe(false);
    expect(() => m.terminal('toString' as 'a')).toThrow(InvalidTransitionError);
  });

  it('lists states and events', () => {
    expect(m.states).toEqual(['a', 'b']);
    expect(m.events).toEqual(['go']);
  });
});

describe.each(machines)('%s machine', (_name, machine, terminals, initial) => {
  it('declares exactly the expected terminal states', () => {
    expect(machine.states.filter((s) => machine.terminal(s)).sort()).toEqual([...terminals].sort());
  });

  it('property: random event sequences never leave the declared states', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...machine.events), { maxLength: 30 }), (events) => {
        let state = initial;
        for (const event of events) {
          if (machine.can(state, event)) {
            state = machine.transition(state, event);
            expect(machine.states).toContain(state);
          } else {
            expect(() => machine.transition(state, event)).toThrow(InvalidTransitionError);
          }
        }
      }),
    );
  });

  it('property: terminal states accept no event', () => {
    fc.assert(
      fc.property(fc.constantFrom(...terminals), fc.constantFrom(...machine.events), (state, event) => {
        expect(machine.can(state, event)).toBe(false);
        expect(() => machine.transition(state, event)).toThrow(InvalidTransitionError);
      }),
    );
  });

  it('every terminal state is reachable from the initial state', () => {
    const seen = new Set([initial]);
    const queue = [initial];
    while (queue.length) {
      const s = queue.shift()!;
      for (const e of machine.events) {
        if (machine.can(s, e)) {
          const t = machine.transition(s, e);
          if (!seen.has(t)) {
            seen.add(t);
            queue.push(t);
          }
        }
      }
    }
    expect([...seen].sort()).toEqual([...machine.states].sort());
  });
});

describe('action transitions', () => {
  it.each([
    ['received', 'admit', 'admitted'],
    ['received', 'deny', 'denied'],
    ['admitted', 'dispatch', 'dispatched'],
    ['dispatched', 'answer', 'answered'],
    ['admitted', 'fail', 'failed'],
    ['dispatched', 'fail', 'failed'],
    ['admitted', 'expire', 'expired'],
    ['dispatched', 'expire', 'expired'],
  ] as const)('%s -(%s)-> %s', (from, event, to) => {
    expect(actionMachine.transition(from, event)).toBe(to);
  });

  it.each([
    ['received', 'answer'],
    ['received', 'dispatch'],
    ['admitted', 'answer'],
    ['received', 'expire'],
  ] as const)('rejects %s -(%s)->', (from, event) => {
    expect(() => actionMachine.transition(from, event)).toThrow(InvalidTransitionError);
  });
});

describe('attempt transitions', () => {
  it.each([
    ['claimed', 'start', 'in_flight'],
    ['in_flight', 'succeed', 'succeeded'],
    ['in_flight', 'fail', 'failed'],
    ['in_flight', 'cancel', 'cancelled'],
    ['in_flight', 'cut', 'usage_missing'],
    ['succeeded', 'settle', 'settled'],
    ['failed', 'settle', 'settled'],
    ['cancelled', 'settle', 'settled'],
    ['usage_missing', 'settle', 'settled'],
    ['usage_missing', 'require_reconciliation', 'reconciliation_required'],
    ['cancelled', 'require_reconciliation', 'reconciliation_required'],
    ['succeeded', 'require_reconciliation', 'reconciliation_required'],
    ['failed', 'require_reconciliation', 'reconciliation_required'],
    ['reconciliation_required', 'settle', 'settled'],
  ] as const)('%s -(%s)-> %s', (from, event, to) => {
    expect(attemptMachine.transition(from, event)).toBe(to);
  });

  it.each([
    ['claimed', 'settle'],
    ['in_flight', 'settle'],
    ['reconciliation_required', 'require_reconciliation'],
  ] as const)('rejects %s -(%s)->', (from, event) => {
    expect(attemptMachine.can(from, event)).toBe(false);
  });
});

describe('reservation transitions', () => {
  it.each([
    ['pending', 'settle', 'settled'],
    ['pending', 'mark_unresolved', 'unresolved'],
    ['unresolved', 'settle', 'settled'],
    ['pending', 'void', 'voided'],
    ['unresolved', 'release', 'released'],
  ] as const)('%s -(%s)-> %s', (from, event, to) => {
    expect(reservationMachine.transition(from, event)).toBe(to);
  });

  it.each([
    ['pending', 'release'],
    ['unresolved', 'void'],
    ['unresolved', 'mark_unresolved'],
  ] as const)('rejects %s -(%s)->', (from, event) => {
    expect(reservationMachine.can(from, event)).toBe(false);
  });

  it('property: a reservation resolves at most once, and only on a move into a resolved state', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...reservationMachine.events), { maxLength: 30 }), (events) => {
        let state: ReservationState = 'pending';
        let resolutions = 0;
        for (const event of events) {
          if (!reservationMachine.can(state, event)) continue;
          const next = reservationMachine.transition(state, event);
          if (!reservationResolved(state) && reservationResolved(next)) resolutions++;
          state = next;
        }
        expect(resolutions).toBeLessThanOrEqual(1);
        expect(reservationResolved(state)).toBe(resolutions === 1);
        expect(reservationResolved(state)).toBe(reservationMachine.terminal(state));
      }),
    );
  });
});

describe('exception transitions and approval', () => {
  it.each([
    ['requested', 'approve', 'active'],
    ['requested', 'reject', 'rejected'],
    ['requested', 'expire', 'expired'],
    ['active', 'revoke', 'revoked'],
    ['active', 'expire', 'expired'],
  ] as const)('%s -(%s)-> %s', (from, event, to) => {
    expect(exceptionMachine.transition(from, event)).toBe(to);
  });

  it.each([
    [{ requestedBy: 'a', approver: 'b', approverRoles: ['approver'] }, { ok: true }],
    [
      { requestedBy: 'a', approver: 'a', approverRoles: ['approver'] },
      { ok: false, reason: 'self_approval' },
    ],
    [
      { requestedBy: 'a', approver: 'a', approverRoles: [] },
      { ok: false, reason: 'self_approval' },
    ],
    [
      { requestedBy: 'a', approver: 'b', approverRoles: ['viewer'] },
      { ok: false, reason: 'not_an_approver' },
    ],
    [
      { requestedBy: 'a', approver: 'b', approverRoles: [] },
      { ok: false, reason: 'not_an_approver' },
    ],
  ])('canApprove(%j) = %j', (input, expected) => {
    expect(canApprove(input)).toEqual(expected);
  });

  it('property: approval requires a different person holding the approver role', () => {
    fc.assert(
      fc.property(
        fc.string(),
        fc.string(),
        fc.array(fc.constantFrom('approver', 'viewer', 'admin')),
        (requestedBy, approver, approverRoles) => {
          const ok = canApprove({ requestedBy, approver, approverRoles }).ok;
          expect(ok).toBe(requestedBy !== approver && approverRoles.includes('approver'));
        },
      ),
    );
  });

  const expiresAt = new Date('2030-01-01T00:00:00Z');
  const before = new Date('2029-12-31T23:59:59Z');
  it.each([
    ['active', before, 'active'],
    ['active', expiresAt, 'expired'],
    ['requested', before, 'requested'],
    ['requested', expiresAt, 'expired'],
    ['revoked', before, 'revoked'],
    ['rejected', expiresAt, 'rejected'],
    ['expired', before, 'expired'],
  ] as Array<[ExceptionStatus, Date, ExceptionStatus]>)('effective status of %s at %s is %s', (status, now, expected) => {
    expect(effectiveExceptionStatus({ status, expiresAt }, now)).toBe(expected);
  });
});

describe('transitionGuard', () => {
  it.each([
    [attemptMachine, 'succeed', ['in_flight'], 'succeeded'],
    [attemptMachine, 'settle', ['succeeded', 'failed', 'cancelled', 'usage_missing', 'reconciliation_required'], 'settled'],
    [actionMachine, 'answer', ['dispatched'], 'answered'],
    [actionMachine, 'fail', ['admitted', 'dispatched'], 'failed'],
    [actionMachine, 'dispatch', ['admitted'], 'dispatched'],
  ] as const)('%s %s', (machine, event, from, to) => {
    const g = transitionGuard(machine as never, event as never);
    expect([...g.from].sort()).toEqual([...from].sort());
    expect(g.to).toBe(to);
  });

  it('agrees with transition() for every state and event of every machine', () => {
    for (const m of [actionMachine, attemptMachine, reservationMachine, exceptionMachine] as Array<Machine<string, string>>) {
      for (const e of m.events) {
        let guard: { from: string[]; to: string } | null = null;
        try {
          guard = transitionGuard(m, e);
        } catch {
          continue; // events whose target depends on the start state are not guardable
        }
        for (const s of m.states) expect(guard.from.includes(s)).toBe(m.can(s, e));
        for (const s of guard.from) expect(m.transition(s, e)).toBe(guard.to);
      }
    }
  });
});
