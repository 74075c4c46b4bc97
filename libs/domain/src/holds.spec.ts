import fc from 'fast-check';
import { InvalidTransitionError } from './state-machines';
import { Hold, pendingOf, planCaseResolution, planOrphans, planVoid } from './holds';

const hold = (over: Partial<Hold> = {}): Hold => ({
  status: 'pending',
  reservedMicrousd: 1000n,
  settledMicrousd: 0n,
  unresolvedMicrousd: 0n,
  releasedMicrousd: 0n,
  ...over,
});

/** Applies a movement to a hold the way the repository does (reservation side). */
function apply(h: Hold, m: ReturnType<typeof planVoid>): Hold {
  return {
    status: m.status,
    reservedMicrousd: h.reservedMicrousd,
    settledMicrousd: h.settledMicrousd + m.toSettledMicrousd,
    unresolvedMicrousd: h.unresolvedMicrousd + m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd,
    releasedMicrousd: h.releasedMicrousd + m.toReleasedMicrousd,
  };
}

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

describe('planOrphans', () => {
  it('moves the pending hold to unresolved exposure and marks the reservation unresolved', () => {
    const { movement, exposuresMicrousd } = planOrphans(hold({ settledMicrousd: 100n }), 1);
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
    expect(planOrphans(hold({ reservedMicrousd: 1001n }), 3).exposuresMicrousd).toEqual([335n, 333n, 333n]);
  });

  it('keeps an already unresolved reservation unresolved', () => {
    expect(planOrphans(hold({ status: 'unresolved', unresolvedMicrousd: 400n }), 1).movement).toMatchObject({
      toUnresolvedMicrousd: 600n,
      status: 'unresolved',
    });
  });

  it('leaves a resolved reservation alone (nothing pending, the case still opens with zero exposure)', () => {
    const { movement, exposuresMicrousd } = planOrphans(hold({ status: 'settled', settledMicrousd: 1000n }), 1);
    expect(exposuresMicrousd).toEqual([0n]);
    expect(movement).toMatchObject({ fromPendingMicrousd: 0n, toUnresolvedMicrousd: 0n, status: 'settled' });
  });

  it('property: exposures add up to what was pending', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 12n }), fc.integer({ min: 1, max: 8 }), (reserved, n) => {
        const { exposuresMicrousd, movement } = planOrphans(hold({ reservedMicrousd: reserved }), n);
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

  it('operator release: everything held is released, reservation released, nothing settled', () => {
    const p = planCaseResolution(unresolved, {
      caseExposureMicrousd: 1000n,
      costMicrousd: null,
      actionDone: true,
      otherOpenExposureMicrousd: 0n,
    });
    expect(p.movement).toMatchObject({
      fromUnresolvedMicrousd: 1000n,
      toSettledMicrousd: 0n,
      toReleasedMicrousd: 1000n,
      status: 'released',
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
    const p = planCaseResolution(h, { caseExposureMicrousd: 0n, costMicrousd: null, actionDone: true, otherOpenExposureMicrousd: 0n });
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
        fc.option(fc.bigInt({ min: 0n, max: 2n * 10n ** 9n })),
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
          expect(p.movement.toSettledMicrousd).toBe(cost ?? 0n);
        },
      ),
    );
  });
});
