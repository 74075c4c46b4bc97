import fc from 'fast-check';
import { InvalidTransitionError } from './state-machines';
import {
  applyMovement,
  combineMovements,
  Hold,
  Movement,
  pendingOf,
  planCaseResolution,
  planMoveToUnresolved,
  planReleaseRest,
  planReserve,
  planSettle,
  planVoid,
} from './holds';

const hold = (over: Partial<Hold> = {}): Hold => ({
  status: 'pending',
  reservedMicrousd: 1000n,
  settledMicrousd: 0n,
  unresolvedMicrousd: 0n,
  releasedMicrousd: 0n,
  ...over,
});

const apply = applyMovement;

describe('pendingOf', () => {
  it.each([
    [hold(), 1000n],
    [hold({ settledMicrousd: 300n, unresolvedMicrousd: 200n, releasedMicrousd: 100n }), 400n],
    [hold({ settledMicrousd: 1500n }), 0n],
  ])('pending of case %#', (h, expected) => expect(pendingOf(h)).toBe(expected));
});

describe('planVoid', () => {
  it('releases the whole pending hold and voids the reservation', () => {
    const m = planVoid(hold());
    expect(m).toEqual({
      fromPendingMicrousd: 1000n,
      toUnresolvedMicrousd: 0n,
      fromUnresolvedMicrousd: 0n,
      toSettledMicrousd: 0n,
      toReleasedMicrousd: 1000n,
      status: 'voided',
    });
    expect(pendingOf(apply(hold(), m))).toBe(0n);
  });

  it.each(['unresolved', 'settled', 'voided', 'released'] as const)('refuses a %s reservation (voids once)', (status) => {
    expect(() => planVoid(hold({ status }))).toThrow(InvalidTransitionError);
  });
});

describe('planMoveToUnresolved', () => {
  it('moves the pending hold to unresolved exposure and marks the reservation unresolved', () => {
    const { movement, exposuresMicrousd } = planMoveToUnresolved(hold({ settledMicrousd: 100n }));
    expect(exposuresMicrousd).toEqual([900n]);
    expect(movement).toMatchObject({
      fromPendingMicrousd: 900n,
      toUnresolvedMicrousd: 900n,
      toReleasedMicrousd: 0n,
      toSettledMicrousd: 0n,
      status: 'unresolved',
    });
  });

  it('shares the hold between several orphans of one action, remainder to the first', () => {
    expect(planMoveToUnresolved(hold({ reservedMicrousd: 1001n }), [null, null, null]).exposuresMicrousd).toEqual([335n, 333n, 333n]);
  });

  it('keeps an already unresolved reservation unresolved', () => {
    expect(planMoveToUnresolved(hold({ status: 'unresolved', unresolvedMicrousd: 400n })).movement).toMatchObject({
      toUnresolvedMicrousd: 600n,
      status: 'unresolved',
    });
  });

  it('leaves a resolved reservation alone (nothing pending, the case still opens with zero exposure)', () => {
    const { movement, exposuresMicrousd } = planMoveToUnresolved(hold({ status: 'settled', settledMicrousd: 1000n }));
    expect(exposuresMicrousd).toEqual([0n]);
    expect(movement).toMatchObject({ fromPendingMicrousd: 0n, toUnresolvedMicrousd: 0n, status: 'settled' });
  });

  it("per attempt: each moves only its own hold; the rest of the pool stays pending (a hedge's 1 000 out of 2 500)", () => {
    const pool = hold({ reservedMicrousd: 2500n });
    const { movement, exposuresMicrousd } = planMoveToUnresolved(pool, [1000n]);
    expect(exposuresMicrousd).toEqual([1000n]);
    expect(movement).toMatchObject({
      fromPendingMicrousd: 1000n,
      toUnresolvedMicrousd: 1000n,
      toReleasedMicrousd: 0n,
      status: 'unresolved',
    });
    expect(pendingOf(applyMovement(pool, movement))).toBe(1500n);
  });

  it('per attempt: an attempt whose hold exceeds what is left of the pool moves what is left, never more', () => {
    // the primary settled 1 800 of a 2 000 pool (its 1 000 + a hedge's 1 000): the hedge moves 200
    expect(planMoveToUnresolved(hold({ reservedMicrousd: 2000n, settledMicrousd: 1800n }), [1000n]).exposuresMicrousd).toEqual([200n]);
    // two orphans in order: the first takes its hold, the second what is left
    expect(planMoveToUnresolved(hold({ reservedMicrousd: 1500n }), [1000n, 1000n]).exposuresMicrousd).toEqual([1000n, 500n]);
  });

  it('per attempt: attempts without a recorded hold share what the known holds leave', () => {
    expect(planMoveToUnresolved(hold({ reservedMicrousd: 3001n }), [1000n, null, null]).exposuresMicrousd).toEqual([1000n, 1001n, 1000n]);
    expect(() => planMoveToUnresolved(hold(), [])).toThrow(RangeError);
    expect(() => planMoveToUnresolved(hold(), [-1n])).toThrow(RangeError);
  });

  it('property: per-attempt exposures never exceed their hold, add up to what moved, and never exceed the pool', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 9n }),
        fc.array(fc.bigInt({ min: 0n, max: 10n ** 9n }), { minLength: 1, maxLength: 5 }),
        (reserved, holds) => {
          const { exposuresMicrousd, movement } = planMoveToUnresolved(hold({ reservedMicrousd: reserved }), holds);
          exposuresMicrousd.forEach((e, i) => expect(e >= 0n && e <= holds[i]).toBe(true));
          const total = exposuresMicrousd.reduce((a, b) => a + b, 0n);
          expect(movement.toUnresolvedMicrousd).toBe(total);
          expect(total).toBe(holds.reduce((a, b) => a + b, 0n) < reserved ? holds.reduce((a, b) => a + b, 0n) : reserved);
        },
      ),
    );
  });

  it('property: exposures add up to what was pending', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 12n }), fc.integer({ min: 1, max: 8 }), (reserved, n) => {
        const { exposuresMicrousd, movement } = planMoveToUnresolved(hold({ reservedMicrousd: reserved }), Array<null>(n).fill(null));
        expect(exposuresMicrousd.reduce((a, b) => a + b, 0n)).toBe(reserved);
        expect(exposuresMicrousd.every((e) => e >= 0n)).toBe(true);
        expect(movement.toUnresolvedMicrousd).toBe(reserved);
      }),
    );
  });
});

describe('planCaseResolution', () => {
  const unresolved = hold({ status: 'unresolved', unresolvedMicrousd: 1000n });

  it('evidence below the exposure: settles the cost, releases the rest, reservation settled', () => {
    const p = planCaseResolution(unresolved, {
      caseExposureMicrousd: 1000n,
      costMicrousd: 260n,
      actionDone: true,
      otherOpenExposureMicrousd: 0n,
    });
    expect(p.movement).toEqual({
      fromPendingMicrousd: 0n,
      toUnresolvedMicrousd: 0n,
      fromUnresolvedMicrousd: 1000n,
      toSettledMicrousd: 260n,
      toReleasedMicrousd: 740n,
      status: 'settled',
    });
    expect(p.overrunMicrousd).toBe(0n);
    const after = apply(unresolved, p.movement);
    expect(after.unresolvedMicrousd).toBe(0n);
    expect(pendingOf(after)).toBe(0n);
  });

  it('operator release at the attested full exposure: settled, never booked as zero', () => {
    const p = planCaseResolution(unresolved, {
      caseExposureMicrousd: 1000n,
      costMicrousd: 1000n,
      actionDone: true,
      otherOpenExposureMicrousd: 0n,
    });
    expect(p.movement).toMatchObject({
      fromUnresolvedMicrousd: 1000n,
      toSettledMicrousd: 1000n,
      toReleasedMicrousd: 0n,
      status: 'settled',
    });
  });

  it('evidence above the exposure takes from pending first, then records an overrun', () => {
    const h = hold({ status: 'unresolved', reservedMicrousd: 1000n, unresolvedMicrousd: 600n });
    const p = planCaseResolution(h, { caseExposureMicrousd: 600n, costMicrousd: 1200n, actionDone: true, otherOpenExposureMicrousd: 0n });
    expect(p.movement).toMatchObject({
      fromPendingMicrousd: 400n,
      fromUnresolvedMicrousd: 600n,
      toSettledMicrousd: 1200n,
      toReleasedMicrousd: 0n,
      status: 'settled',
    });
    expect(p.overrunMicrousd).toBe(200n);
  });

  it('keeps the reservation open while other cases of the action still hold exposure', () => {
    const h = hold({ status: 'unresolved', unresolvedMicrousd: 1000n });
    const p = planCaseResolution(h, { caseExposureMicrousd: 500n, costMicrousd: 100n, actionDone: true, otherOpenExposureMicrousd: 500n });
    expect(p.movement).toMatchObject({ fromUnresolvedMicrousd: 500n, toReleasedMicrousd: 400n, status: 'unresolved' });
  });

  it('does not release pending while attempts of the action may still bring usage', () => {
    const h = hold({ status: 'unresolved', unresolvedMicrousd: 300n });
    const p = planCaseResolution(h, { caseExposureMicrousd: 300n, costMicrousd: 100n, actionDone: false, otherOpenExposureMicrousd: 0n });
    expect(p.movement).toMatchObject({ fromPendingMicrousd: 0n, toReleasedMicrousd: 200n, status: 'unresolved' });
  });

  it('releases the leftover pending hold once the action is done', () => {
    const h = hold({ status: 'unresolved', unresolvedMicrousd: 300n });
    const p = planCaseResolution(h, { caseExposureMicrousd: 300n, costMicrousd: 100n, actionDone: true, otherOpenExposureMicrousd: 0n });
    expect(p.movement).toMatchObject({ fromPendingMicrousd: 700n, toReleasedMicrousd: 900n, status: 'settled' });
  });

  it('a zero-exposure case on a settled reservation moves nothing', () => {
    const h = hold({ status: 'settled', settledMicrousd: 400n, releasedMicrousd: 600n });
    const p = planCaseResolution(h, { caseExposureMicrousd: 0n, costMicrousd: 0n, actionDone: true, otherOpenExposureMicrousd: 0n });
    expect(p.movement).toEqual({
      fromPendingMicrousd: 0n,
      toUnresolvedMicrousd: 0n,
      fromUnresolvedMicrousd: 0n,
      toSettledMicrousd: 0n,
      toReleasedMicrousd: 0n,
      status: 'settled',
    });
  });

  it('property: never releases more than was held, and settled + unresolved + released never exceed reserved + overrun', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 9n }),
        fc.bigInt({ min: 0n, max: 10n ** 9n }),
        fc.bigInt({ min: 0n, max: 10n ** 9n }),
        fc.bigInt({ min: 0n, max: 2n * 10n ** 9n }),
        fc.boolean(),
        (reserved, unresolvedRaw, exposure, cost, done) => {
          const unresolvedAmt = unresolvedRaw > reserved ? reserved : unresolvedRaw;
          const h = hold({ status: 'unresolved', reservedMicrousd: reserved, unresolvedMicrousd: unresolvedAmt });
          const p = planCaseResolution(h, {
            caseExposureMicrousd: exposure,
            costMicrousd: cost,
            actionDone: done,
            otherOpenExposureMicrousd: 0n,
          });
          const after = apply(h, p.movement);
          expect(after.unresolvedMicrousd).toBeGreaterThanOrEqual(0n);
          expect(p.movement.fromPendingMicrousd).toBeLessThanOrEqual(pendingOf(h));
          expect(after.settledMicrousd + after.unresolvedMicrousd + after.releasedMicrousd).toBeLessThanOrEqual(
            reserved + p.overrunMicrousd,
          );
          expect(p.movement.toSettledMicrousd).toBe(cost);
        },
      ),
    );
  });
});

describe('planSettle', () => {
  it('settles the cost from pending and keeps the rest while the action may still bring usage', () => {
    const p = planSettle(hold(), { costMicrousd: 300n, actionDone: false });
    expect(p.movement).toEqual({
      fromPendingMicrousd: 300n,
      toUnresolvedMicrousd: 0n,
      fromUnresolvedMicrousd: 0n,
      toSettledMicrousd: 300n,
      toReleasedMicrousd: 0n,
      status: 'pending',
    });
  });

  it('releases the unused hold and settles the reservation when the action is done', () => {
    const p = planSettle(hold(), { costMicrousd: 300n, actionDone: true });
    expect(p.movement).toMatchObject({ fromPendingMicrousd: 1000n, toSettledMicrousd: 300n, toReleasedMicrousd: 700n, status: 'settled' });
    expect(p.releasedMicrousd).toBe(700n);
  });

  it('settles an overrun in full and reports it', () => {
    const p = planSettle(hold(), { costMicrousd: 1500n, actionDone: true });
    expect(p.movement).toMatchObject({ fromPendingMicrousd: 1000n, toSettledMicrousd: 1500n, toReleasedMicrousd: 0n, status: 'settled' });
    expect(p.overrunMicrousd).toBe(500n);
  });

  it('keeps an unresolved reservation unresolved while exposure remains', () => {
    const h = hold({ status: 'unresolved', unresolvedMicrousd: 400n });
    expect(planSettle(h, { costMicrousd: 100n, actionDone: true }).movement).toMatchObject({
      toReleasedMicrousd: 500n,
      status: 'unresolved',
    });
  });
});

describe('planReserve and planReleaseRest', () => {
  it('a fresh hold is all pending', () => {
    expect(pendingOf(planReserve(800n))).toBe(800n);
  });

  it('releases what is pending; settles when nothing is unresolved', () => {
    expect(planReleaseRest(hold({ settledMicrousd: 200n }))).toMatchObject({
      fromPendingMicrousd: 800n,
      toReleasedMicrousd: 800n,
      status: 'settled',
    });
    expect(planReleaseRest(hold({ status: 'unresolved', unresolvedMicrousd: 200n }))).toMatchObject({ status: 'unresolved' });
  });
});

/** Any sequence of plans on one hold, as settlement, the sweeper and case resolution would run them. */
type Step =
  | { kind: 'settle'; cost: bigint; done: boolean }
  | { kind: 'unresolve'; holds: Array<bigint | null> }
  | { kind: 'void' }
  | { kind: 'releaseRest' }
  | { kind: 'resolveCase'; exposure: bigint; cost: bigint; done: boolean };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('settle' as const), cost: fc.bigInt({ min: 0n, max: 3000n }), done: fc.boolean() }),
  fc.record({
    kind: fc.constant('unresolve' as const),
    holds: fc.array(fc.option(fc.bigInt({ min: 0n, max: 3000n }), { nil: null }), { minLength: 1, maxLength: 3 }),
  }),
  fc.record({ kind: fc.constant('void' as const) }),
  fc.record({ kind: fc.constant('releaseRest' as const) }),
  fc.record({
    kind: fc.constant('resolveCase' as const),
    exposure: fc.bigInt({ min: 0n, max: 3000n }),
    cost: fc.bigInt({ min: 0n, max: 3000n }),
    done: fc.boolean(),
  }),
);

function plan(h: Hold, s: Step): { movement: Movement; overrun: bigint } | null {
  switch (s.kind) {
    case 'settle': {
      const p = planSettle(h, { costMicrousd: s.cost, actionDone: s.done });
      return { movement: p.movement, overrun: p.overrunMicrousd };
    }
    case 'unresolve':
      return { movement: planMoveToUnresolved(h, s.holds).movement, overrun: 0n };
    case 'void':
      return h.status === 'pending' ? { movement: planVoid(h), overrun: 0n } : null;
    case 'releaseRest':
      return { movement: planReleaseRest(h), overrun: 0n };
    case 'resolveCase': {
      const p = planCaseResolution(h, {
        caseExposureMicrousd: s.exposure,
        costMicrousd: s.cost,
        actionDone: s.done,
        otherOpenExposureMicrousd: 0n,
      });
      return { movement: p.movement, overrun: p.overrunMicrousd };
    }
  }
}

describe('hold planner properties', () => {
  it('buckets never go negative, reserved + overrun = settled + unresolved + released + pending, every state change is a machine edge', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 5000n }), fc.array(step, { maxLength: 12 }), (reserved, steps) => {
        let h = planReserve(reserved);
        let overrun = 0n;
        for (const s of steps) {
          const p = plan(h, s);
          if (!p) continue;
          // applyMovement checks the state change against reservationMachine and refuses negative buckets.
          h = applyMovement(h, p.movement);
          overrun += p.overrun;
          for (const v of [h.settledMicrousd, h.unresolvedMicrousd, h.releasedMicrousd, pendingOf(h)]) expect(v).toBeGreaterThanOrEqual(0n);
          expect(h.settledMicrousd + h.unresolvedMicrousd + h.releasedMicrousd + pendingOf(h)).toBe(reserved + overrun);
        }
      }),
    );
  });

  it('two plans combined apply like the two applied in turn', () => {
    const h = hold();
    const first = planMoveToUnresolved(h).movement;
    const second = planReleaseRest(applyMovement(h, first));
    expect(applyMovement(h, combineMovements(first, second))).toEqual(applyMovement(applyMovement(h, first), second));
  });

  it('refuses a movement that takes more than is pending or leaves the machine', () => {
    expect(() => applyMovement(hold({ settledMicrousd: 900n }), planVoid(hold()))).toThrow(RangeError);
    expect(() =>
      applyMovement(hold({ status: 'settled' }), { ...planVoid(hold()), fromPendingMicrousd: 0n, toReleasedMicrousd: 0n }),
    ).toThrow(RangeError);
  });
});
