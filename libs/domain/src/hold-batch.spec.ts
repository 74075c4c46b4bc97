import fc from 'fast-check';
import { accountDeltas, foldMovements } from './hold-batch';
import { applyMovement, Hold, Movement, pendingOf, planMoveToUnresolved, planReleaseRest, planSettle } from './holds';

const hold = (reservedMicrousd: bigint): Hold => ({
  status: 'pending',
  reservedMicrousd,
  settledMicrousd: 0n,
  unresolvedMicrousd: 0n,
  releasedMicrousd: 0n,
});

/** What settlement plans for an attempt of the action: a priced settle or a move to unresolved. */
const step = fc.oneof(
  fc.record({ kind: fc.constant('settle' as const), cost: fc.bigInt({ min: 0n, max: 5_000n }), done: fc.boolean() }),
  fc.record({ kind: fc.constant('unresolved' as const), done: fc.boolean() }),
);

function plan(h: Hold, s: { kind: 'settle' | 'unresolved'; cost?: bigint; done: boolean }): Movement {
  if (s.kind === 'settle') return planSettle(h, { costMicrousd: s.cost ?? 0n, actionDone: s.done }).movement;
  const toUnresolved = planMoveToUnresolved(h).movement;
  if (!s.done) return toUnresolved;
  return planReleaseRest(applyMovement(h, toUnresolved));
}

describe('foldMovements', () => {
  it('is nothing for no steps', () => {
    expect(foldMovements(hold(10n), [])).toEqual({ hold: hold(10n), movement: null });
  });

  it('refuses a step the hold it was planned on cannot take', () => {
    const take: Movement = {
      fromPendingMicrousd: 11n,
      toUnresolvedMicrousd: 0n,
      fromUnresolvedMicrousd: 0n,
      toSettledMicrousd: 11n,
      toReleasedMicrousd: 0n,
      status: 'pending',
    };
    expect(() => foldMovements(hold(10n), [take])).toThrow(RangeError);
  });

  it('leaves the hold where the steps one by one leave it, and the folded movement moves the same money', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10_000n }), fc.array(step, { maxLength: 6 }), (reserved, steps) => {
        let h = hold(reserved);
        const movements: Movement[] = [];
        for (const s of steps) {
          const m = plan(h, s);
          movements.push(m);
          h = applyMovement(h, m);
        }
        const folded = foldMovements(hold(reserved), movements);
        expect(folded.hold).toEqual(h);
        if (folded.movement === null) return expect(steps).toEqual([]);
        const base = hold(reserved);
        expect(base.settledMicrousd + folded.movement.toSettledMicrousd).toBe(h.settledMicrousd);
        expect(base.releasedMicrousd + folded.movement.toReleasedMicrousd).toBe(h.releasedMicrousd);
        expect(base.unresolvedMicrousd + folded.movement.toUnresolvedMicrousd - folded.movement.fromUnresolvedMicrousd).toBe(
          h.unresolvedMicrousd,
        );
        expect(pendingOf(hold(reserved)) - folded.movement.fromPendingMicrousd).toBe(pendingOf(h));
        expect(folded.movement.status).toBe(h.status);
      }),
    );
  });
});

describe('accountDeltas', () => {
  const m = (fromPending: bigint, toSettled: bigint, toUnresolved = 0n): Movement => ({
    fromPendingMicrousd: fromPending,
    toUnresolvedMicrousd: toUnresolved,
    fromUnresolvedMicrousd: 0n,
    toSettledMicrousd: toSettled,
    toReleasedMicrousd: fromPending - toSettled - toUnresolved,
    status: 'settled',
  });

  it('sums the movements of reservations sharing a team account into one row for it', () => {
    expect(
      accountDeltas([
        { accountIds: ['wl-a', 'team-1'], movement: m(100n, 60n) },
        { accountIds: ['wl-b', 'team-1'], movement: m(50n, 50n) },
        { accountIds: ['wl-a', 'team-1'], movement: m(30n, 0n, 30n) },
      ]),
    ).toEqual([
      { accountId: 'wl-a', fromPendingMicrousd: 130n, toSettledMicrousd: 60n, unresolvedDeltaMicrousd: 30n },
      { accountId: 'team-1', fromPendingMicrousd: 180n, toSettledMicrousd: 110n, unresolvedDeltaMicrousd: 30n },
      { accountId: 'wl-b', fromPendingMicrousd: 50n, toSettledMicrousd: 50n, unresolvedDeltaMicrousd: 0n },
    ]);
  });

  it('gives every account the totals of applying the movements one at a time', () => {
    const accounts = ['wl-a', 'wl-b', 'exc-1', 'team-1', 'env-1'];
    const move = fc.record({
      accountIds: fc.subarray(accounts, { minLength: 1 }),
      movement: fc
        .tuple(fc.bigInt({ min: 0n, max: 1_000n }), fc.bigInt({ min: 0n, max: 1_000n }), fc.bigInt({ min: 0n, max: 1_000n }))
        .map(([a, b, c]) => ({
          fromPendingMicrousd: a + b + c,
          toSettledMicrousd: a,
          toUnresolvedMicrousd: b,
          fromUnresolvedMicrousd: c / 2n,
          toReleasedMicrousd: c,
          status: 'settled' as const,
        })),
    });
    fc.assert(
      fc.property(fc.array(move, { maxLength: 20 }), (moves) => {
        const oneByOne = new Map<string, [bigint, bigint, bigint]>();
        for (const { accountIds, movement } of moves) {
          for (const id of accountIds) {
            const [p, s, u] = oneByOne.get(id) ?? [0n, 0n, 0n];
            oneByOne.set(id, [
              p + movement.fromPendingMicrousd,
              s + movement.toSettledMicrousd,
              u + movement.toUnresolvedMicrousd - movement.fromUnresolvedMicrousd,
            ]);
          }
        }
        const deltas = accountDeltas(moves);
        expect(new Set(deltas.map((d) => d.accountId)).size).toBe(deltas.length);
        expect(new Map(deltas.map((d) => [d.accountId, [d.fromPendingMicrousd, d.toSettledMicrousd, d.unresolvedDeltaMicrousd]]))).toEqual(
          oneByOne,
        );
      }),
    );
  });
});
