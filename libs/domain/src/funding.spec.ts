import fc from 'fast-check';
import {
  allowanceFunding,
  allowanceFundingOf,
  allowanceScopeId,
  applyToGroup,
  FundingGroup,
  fundedAccountDeltas,
  fundingAccountsOf,
  splitMovement,
} from './funding';
import { accountDeltas } from './hold-batch';
import { applyMovement, Hold, Movement, pendingOf, planCaseResolution, planMoveToUnresolved, planReleaseRest, planSettle } from './holds';

const OWN = ['w1', 'x1', 'team', 'env'];
const ALLOWANCE = allowanceFunding('a1', ['team', 'env']);

const group = (accountIds: readonly string[], pendingMicrousd: bigint, unresolvedMicrousd = 0n): FundingGroup => ({
  accountIds,
  pendingMicrousd,
  unresolvedMicrousd,
});

/** A pool of `pending` no attempt has touched yet. */
const pool = (pending: bigint): Hold => ({
  status: 'pending',
  reservedMicrousd: pending,
  settledMicrousd: 0n,
  unresolvedMicrousd: 0n,
  releasedMicrousd: 0n,
});

describe('fundingAccountsOf', () => {
  it("is the reservation's accounts when the attempt recorded none (primary, no allowance, older rows)", () => {
    expect(fundingAccountsOf(null, OWN)).toEqual(OWN);
  });
  it("is the attempt's own set when it recorded one", () => {
    expect(fundingAccountsOf(ALLOWANCE, OWN)).toEqual(['a1', 'team', 'env']);
  });
});

describe('allowanceFunding', () => {
  it('holds the allowance instead of the workload and exception accounts, and still the org-wide ones', () => {
    expect(allowanceFunding('a1', ['team', 'env'])).toEqual(['a1', 'team', 'env']);
    expect(allowanceFunding('a1', [])).toEqual(['a1']);
  });
});

describe('allowanceFundingOf', () => {
  const policy = { workloadId: 'wl', routeId: null, experimentAllowance: { budgetMicrousd: 5_000_000n, period: 'month' as const } };
  it("is the lineage's account for the period now falls in, at the revision's budget", () => {
    expect(allowanceFundingOf(policy, new Date('2026-12-02T21:00:00Z'))).toEqual({
      scopeId: allowanceScopeId('wl', null),
      periodStart: new Date('2026-12-01T00:00:00Z'),
      budgetMicrousd: 5_000_000n,
    });
    expect(
      allowanceFundingOf({ ...policy, experimentAllowance: { budgetMicrousd: 1n, period: 'day' } }, new Date('2026-12-02T21:00:00Z'))
        ?.periodStart,
    ).toEqual(new Date('2026-12-02T00:00:00Z'));
  });
  it('is none without an allowance (extra attempts draw on the reservation, as before)', () => {
    expect(allowanceFundingOf({ ...policy, experimentAllowance: null }, new Date())).toBeNull();
  });
});

describe('allowanceScopeId', () => {
  it('is per policy lineage: the workload-wide policy and a route override differ', () => {
    expect(allowanceScopeId('wl', null)).not.toBe(allowanceScopeId('wl', 'r1'));
    expect(allowanceScopeId('wl', 'r1')).not.toBe(allowanceScopeId('wl', 'r2'));
  });
  it('is unambiguous whatever the ids contain, and holds no NUL', () => {
    expect(allowanceScopeId('a","b', null)).not.toBe(allowanceScopeId('a', 'b'));
    expect(allowanceScopeId('w', 'null')).not.toBe(allowanceScopeId('w', null));
    expect(allowanceScopeId('w\u0000', 'r\u0000')).not.toContain('\u0000');
    expect(() => allowanceScopeId('', null)).toThrow(RangeError);
  });
});

describe('splitMovement', () => {
  it("settles a hedge's cost on the allowance group only, its hold leaving the allowance's pending", () => {
    // primary held 100 on its own accounts, the hedge 100 on the allowance
    const groups = [group(OWN, 100n), group(ALLOWANCE, 100n)];
    const m = planSettle(pool(200n), { costMicrousd: 30n, actionDone: false }).movement;
    const [own, allowance] = splitMovement(groups, m, 1);
    expect(allowance).toMatchObject({ fromPendingMicrousd: 30n, toSettledMicrousd: 30n });
    expect(own).toMatchObject({ fromPendingMicrousd: 0n, toSettledMicrousd: 0n });
  });

  it('moves an attempt to unresolved on its own group', () => {
    const groups = [group(OWN, 100n), group(ALLOWANCE, 80n)];
    const m = planMoveToUnresolved(pool(180n), [80n]).movement;
    const parts = splitMovement(groups, m, 1);
    expect(parts[1]).toMatchObject({ fromPendingMicrousd: 80n, toUnresolvedMicrousd: 80n });
    expect(parts[0]).toMatchObject({ fromPendingMicrousd: 0n, toUnresolvedMicrousd: 0n });
  });

  it("releases the rest of every group when the action is over, and a cost beyond the hold is the attempt's funder's", () => {
    const groups = [group(OWN, 100n), group(ALLOWANCE, 50n)];
    const m = planSettle(pool(150n), { costMicrousd: 70n, actionDone: true }).movement;
    const [own, allowance] = splitMovement(groups, m, 1);
    // the allowance pays the whole 70 (its attempt billed it); the workload's hold is all given back
    expect(allowance).toMatchObject({ fromPendingMicrousd: 50n, toSettledMicrousd: 70n });
    expect(own).toMatchObject({ fromPendingMicrousd: 100n, toSettledMicrousd: 0n, toReleasedMicrousd: 100n });
    const deltas = accountDeltas([
      { accountIds: OWN, movement: own },
      { accountIds: ALLOWANCE, movement: allowance },
    ]);
    const used = (id: string) => {
      const d = deltas.find((x) => x.accountId === id)!;
      return -d.fromPendingMicrousd + d.toSettledMicrousd + d.unresolvedDeltaMicrousd;
    };
    expect(used('w1')).toBe(-100n);
    expect(used('a1')).toBe(20n); // 50 held, 70 settled
    expect(used('team')).toBe(-80n); // what the unsplit movement does to an account holding both
  });

  it('refuses a movement the groups do not hold, and an own index that names no group', () => {
    const m = planSettle(pool(100n), { costMicrousd: 0n, actionDone: true }).movement;
    expect(() => splitMovement([group(OWN, 10n)], m, 0)).toThrow(RangeError);
    expect(() => splitMovement([group(OWN, 100n)], m, 1)).toThrow(RangeError);
    expect(() => splitMovement([group(OWN, 100n)], m, -1)).toThrow(RangeError);
  });

  it('with one group is the movement itself (no allowance: behaviour unchanged)', () => {
    const m = planSettle(pool(100n), { costMicrousd: 40n, actionDone: true }).movement;
    expect(splitMovement([group(OWN, 100n)], m, 0)).toEqual([m]);
  });

  /**
   * Any sequence settlement, the sweeper and case resolution plan on a pool of a primary (own
   * accounts) and extra attempts (some on the allowance): after every step the groups hold exactly
   * the reservation's pending and unresolved, no group goes negative, an account shared by every
   * group (team) moves exactly as the unsplit mirror would move it, and each account's used amount
   * is the sum of what its groups held and settled.
   */
  it('keeps every account the sum of its holds over any sequence of plans', () => {
    const stepArb = fc.oneof(
      fc.record({ kind: fc.constant('settle' as const), cost: fc.bigInt({ min: 0n, max: 300n }), done: fc.boolean() }),
      fc.record({ kind: fc.constant('unresolved' as const) }),
      fc.record({ kind: fc.constant('resolve' as const), cost: fc.bigInt({ min: 0n, max: 300n }), done: fc.boolean() }),
      fc.record({ kind: fc.constant('release' as const) }),
    );
    fc.assert(
      fc.property(
        fc.array(fc.record({ hold: fc.bigInt({ min: 0n, max: 200n }), allowance: fc.boolean() }), { minLength: 1, maxLength: 4 }),
        fc.array(fc.record({ step: stepArb, attempt: fc.nat() }), { maxLength: 8 }),
        (attempts, steps) => {
          attempts[0].allowance = false; // the primary is always the reservation's own
          let groups = [group(OWN, 0n), group(ALLOWANCE, 0n)];
          for (const a of attempts)
            groups[a.allowance ? 1 : 0] = {
              ...groups[a.allowance ? 1 : 0],
              pendingMicrousd: groups[a.allowance ? 1 : 0].pendingMicrousd + a.hold,
            };
          let h: Hold = pool(attempts.reduce((s, a) => s + a.hold, 0n));
          const used = new Map<string, bigint>([...OWN, ...ALLOWANCE].map((id) => [id, 0n]));
          const settled = new Map<string, bigint>([...OWN, ...ALLOWANCE].map((id) => [id, 0n]));
          const costOf = [0n, 0n]; // what the attempts of each group were settled at
          for (const a of attempts) for (const id of a.allowance ? ALLOWANCE : OWN) used.set(id, used.get(id)! + a.hold);
          for (const { step, attempt } of steps) {
            const at = attempts[attempt % attempts.length];
            const own = at.allowance ? 1 : 0;
            let m: Movement;
            if (step.kind === 'settle') m = planSettle(h, { costMicrousd: step.cost, actionDone: step.done }).movement;
            else if (step.kind === 'unresolved') m = planMoveToUnresolved(h, [at.hold]).movement;
            else if (step.kind === 'release') m = planReleaseRest(h);
            else
              m = planCaseResolution(h, {
                caseExposureMicrousd: groups[own].unresolvedMicrousd,
                costMicrousd: step.cost,
                actionDone: step.done,
                otherOpenExposureMicrousd: 0n,
              }).movement;
            if (h.status !== 'pending' && h.status !== 'unresolved') break;
            let next: Hold;
            try {
              next = applyMovement(h, m);
            } catch {
              continue; // a state edge the machine lacks: not a plan storage would apply
            }
            const parts = splitMovement(groups, m, own);
            groups = groups.map((g, i) => applyToGroup(g, parts[i]));
            const mirrored = accountDeltas([{ accountIds: ['team'], movement: m }])[0];
            const split = accountDeltas(parts.map((p, i) => ({ accountIds: groups[i].accountIds, movement: p }))).find(
              (d) => d.accountId === 'team',
            )!;
            expect(split).toEqual(mirrored);
            for (const d of accountDeltas(parts.map((p, i) => ({ accountIds: groups[i].accountIds, movement: p })))) {
              used.set(d.accountId, used.get(d.accountId)! - d.fromPendingMicrousd + d.toSettledMicrousd + d.unresolvedDeltaMicrousd);
              settled.set(d.accountId, settled.get(d.accountId)! + d.toSettledMicrousd);
            }
            costOf[own] += m.toSettledMicrousd;
            h = next;
            expect(groups.reduce((s, g) => s + g.pendingMicrousd, 0n)).toBe(pendingOf(h));
            expect(groups.reduce((s, g) => s + g.unresolvedMicrousd, 0n)).toBe(h.unresolvedMicrousd);
          }
          // the team account holds everything; the workload and allowance accounts together hold the same
          expect(used.get('w1')! + used.get('a1')!).toBe(used.get('team'));
          expect(used.get('team')).toBe(pendingOf(h) + h.unresolvedMicrousd + h.settledMicrousd);
          // each attempt's cost is its funder's: the allowance settled exactly its attempts' costs
          expect(settled.get('a1')).toBe(costOf[1]);
          expect(settled.get('w1')).toBe(costOf[0]);
          // and each account's used amount is what its group still holds plus what it settled
          expect(used.get('a1')).toBe(groups[1].pendingMicrousd + groups[1].unresolvedMicrousd + costOf[1]);
          expect(used.get('w1')).toBe(groups[0].pendingMicrousd + groups[0].unresolvedMicrousd + costOf[0]);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('fundedAccountDeltas', () => {
  it('with one group per reservation is accountDeltas of the folded movements (no allowance: unchanged)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ held: fc.bigInt({ min: 0n, max: 500n }), cost: fc.bigInt({ min: 0n, max: 600n }), done: fc.boolean() }), {
          minLength: 1,
          maxLength: 5,
        }),
        (rs) => {
          const moves = rs.map((r, k) => {
            const accounts = [`w${k % 2}`, 'team'];
            const m = planSettle(pool(r.held), { costMicrousd: r.cost, actionDone: r.done }).movement;
            return { accounts, m, groups: [group(accounts, r.held)] };
          });
          const funded = fundedAccountDeltas(moves.map((x) => ({ groups: x.groups, steps: [{ movement: x.m, funding: x.accounts }] })));
          expect(funded.deltas).toEqual(accountDeltas(moves.map((x) => ({ accountIds: x.accounts, movement: x.m }))));
        },
      ),
    );
  });

  it("moves a hedge's settle on the allowance and the primary's on the workload, in one batch, and the groups after it", () => {
    const groups = [group(OWN, 100n), group(ALLOWANCE, 100n)];
    const first = planSettle(pool(200n), { costMicrousd: 40n, actionDone: false }).movement; // the hedge won
    const h1 = applyMovement(pool(200n), first);
    const second = planSettle(h1, { costMicrousd: 10n, actionDone: true }).movement; // the primary's partial usage, then the rest
    const { deltas, groups: after } = fundedAccountDeltas([
      {
        groups,
        steps: [
          { movement: first, funding: ALLOWANCE },
          { movement: second, funding: OWN },
        ],
      },
    ]);
    const d = (id: string) => deltas.find((x) => x.accountId === id)!;
    expect(d('a1')).toEqual({ accountId: 'a1', fromPendingMicrousd: 100n, toSettledMicrousd: 40n, unresolvedDeltaMicrousd: 0n });
    expect(d('w1')).toEqual({ accountId: 'w1', fromPendingMicrousd: 100n, toSettledMicrousd: 10n, unresolvedDeltaMicrousd: 0n });
    expect(d('team')).toEqual({ accountId: 'team', fromPendingMicrousd: 200n, toSettledMicrousd: 50n, unresolvedDeltaMicrousd: 0n });
    expect(after[0].map((g) => g.pendingMicrousd)).toEqual([0n, 0n]);
  });

  it('refuses a step whose funding set no group holds', () => {
    const m = planSettle(pool(10n), { costMicrousd: 1n, actionDone: false }).movement;
    expect(() => fundedAccountDeltas([{ groups: [group(OWN, 10n)], steps: [{ movement: m, funding: ALLOWANCE }] }])).toThrow(RangeError);
  });
});
