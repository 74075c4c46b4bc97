/**
 * Which budget accounts an attempt's hold sits on, and how one reservation movement lands on them
 * when the attempts of one action are funded by different account sets (issue 10: the experiment
 * allowance funds extra attempts "separate from and in addition to the workload budget").
 *
 * A reservation's pool is the sum of its attempts' holds. Without an allowance every attempt's hold
 * sits on the reservation's own accounts (workload → exception → team → environment) and a movement
 * is mirrored on each of them (`accountDeltas`). With one, an extra attempt's hold sits on the
 * allowance account INSTEAD of the workload and exception accounts, and still on the team and
 * environment accounts (they cap all spend of the organisation, extra attempts included). The pool
 * is then split into funding groups, one per distinct account set, each with what it still holds;
 * `splitMovement` is the one rule that turns a reservation-level movement into one movement per
 * group, so `pending + unresolved + settled` on every account stays the sum over the holds on it.
 */
import { budgetPeriodStart } from './admission';
import { AccountDelta, accountDeltas } from './hold-batch';
import type { ExperimentAllowance } from './hedging';
import { Movement } from './holds';

/** The budget-account scope of an experiment allowance (scope id: the hedge policy's lineage). */
export const EXPERIMENT_ALLOWANCE_SCOPE = 'experiment_allowance';

/** The scopes that cap all spend of the organisation: they hold every attempt, allowance-funded or not. */
export const ORG_WIDE_SCOPES: readonly string[] = ['team', 'environment'];

/**
 * The budget-account scope id of a policy lineage's allowance: the workload and the route the
 * policy is scoped to (null for the workload-wide policy), as a JSON pair — unambiguous whatever the
 * ids contain, and never a NUL (Postgres text refuses it). Per lineage, not per workload, because a
 * route override carries an allowance of its own size, and one account has one budget. The
 * exposure query finds a workload's allowances by the pair's first element (`scope_id::jsonb ->> 0`).
 */
export function allowanceScopeId(workloadId: string, routeId: string | null): string {
  if (workloadId.length === 0) throw new RangeError('allowanceScopeId needs a workload id');
  return JSON.stringify([workloadId, routeId]);
}

/** The allowance budget account an extra attempt under `policy` draws on at `now` (null: none configured). */
export interface AllowanceFunding {
  scopeId: string;
  periodStart: Date;
  budgetMicrousd: bigint;
}

/**
 * The experiment allowance of the revision in force, as the account that funds its extra attempts:
 * the policy lineage's account for the period `now` falls in (UTC day or month, like workload
 * budgets), its budget the revision's. Null without an allowance: extra attempts draw on the
 * reservation's own accounts, as before.
 */
export function allowanceFundingOf(
  policy: { workloadId: string; routeId: string | null; experimentAllowance: ExperimentAllowance | null },
  now: Date,
): AllowanceFunding | null {
  const a = policy.experimentAllowance;
  if (!a) return null;
  return {
    scopeId: allowanceScopeId(policy.workloadId, policy.routeId),
    periodStart: budgetPeriodStart(a.period, now),
    budgetMicrousd: a.budgetMicrousd,
  };
}

/**
 * THE rule: the accounts an attempt's hold sits on. `attemptFunding` is what the attempt recorded
 * at admission (`attempt.funding_account_ids`); null (the primary, every attempt admitted without
 * an allowance, rows older than the column) means the reservation's own accounts.
 */
export function fundingAccountsOf(attemptFunding: readonly string[] | null, reservationAccountIds: readonly string[]): readonly string[] {
  return attemptFunding ?? reservationAccountIds;
}

/**
 * The account set an allowance-funded extra attempt records: the allowance account, then the
 * reservation's org-wide (team, environment) accounts, in the global lock order (the allowance
 * account is locked where the workload's would be: `BUDGET_ACCOUNT_LOCK_ORDER` ranks it first).
 */
export function allowanceFunding(allowanceAccountId: string, reservationScopeAccountIds: readonly string[]): string[] {
  return [allowanceAccountId, ...reservationScopeAccountIds];
}

/** One funding group of a reservation: an account set and what the pool still holds on it. */
export interface FundingGroup {
  accountIds: readonly string[];
  pendingMicrousd: bigint;
  unresolvedMicrousd: bigint;
}

const min = (a: bigint, b: bigint): bigint => (a < b ? a : b);

/**
 * Splits a reservation movement planned by `holds.ts` across its funding groups. `own` is the
 * group of the attempt the movement is about (the one settled, moved to unresolved or whose case
 * is resolved); for a movement about no single attempt (void, release of the rest) pass any group:
 * every group gives up what is asked of it in order, the own group first.
 *
 * - What is settled and what moves to unresolved is the own attempt's: it lands on the own group
 *   (its cost is spend of whoever funded it, also beyond that group's hold — an overrun there, as
 *   on a reservation).
 * - What leaves pending and unresolved comes from the own group first (its own hold), then from the
 *   other groups in their order (the rest of the pool, which `planSettle` may take for a cost
 *   beyond the attempt's hold and the release of the rest gives back).
 *
 * Throws when the groups do not hold what the movement takes (a wrong plan or stale groups), so it
 * fails here rather than in a budget. The per-group movements sum to the reservation movement.
 */
export function splitMovement(groups: readonly FundingGroup[], movement: Movement, own: number): Movement[] {
  if (!Number.isInteger(own) || own < 0 || own >= groups.length) throw new RangeError('own must index a funding group');
  const order = [own, ...groups.map((_, i) => i).filter((i) => i !== own)];
  const take = (amount: bigint, held: (g: FundingGroup) => bigint, what: string): bigint[] => {
    const out = groups.map(() => 0n);
    let left = amount;
    for (const i of order) {
      const t = min(left, held(groups[i]));
      out[i] = t;
      left -= t;
    }
    if (left > 0n) throw new RangeError(`the funding groups hold ${amount - left} ${what}, the movement takes ${amount}`);
    return out;
  };
  for (const g of groups) if (g.pendingMicrousd < 0n || g.unresolvedMicrousd < 0n) throw new RangeError('a funding group is negative');
  const fromPending = take(movement.fromPendingMicrousd, (g) => g.pendingMicrousd, 'pending');
  const fromUnresolved = take(movement.fromUnresolvedMicrousd, (g) => g.unresolvedMicrousd, 'unresolved');
  return groups.map((_, i) => {
    const toSettled = i === own ? movement.toSettledMicrousd : 0n;
    const toUnresolved = i === own ? movement.toUnresolvedMicrousd : 0n;
    const released = fromPending[i] + fromUnresolved[i] - toSettled - toUnresolved;
    return {
      fromPendingMicrousd: fromPending[i],
      fromUnresolvedMicrousd: fromUnresolved[i],
      toSettledMicrousd: toSettled,
      toUnresolvedMicrousd: toUnresolved,
      // can be negative on the own group (its cost was paid from another group's pending); the sum is the movement's
      toReleasedMicrousd: released,
      status: movement.status,
    };
  });
}

/** The funding group after its part of a split movement. */
export function applyToGroup(g: FundingGroup, m: Movement): FundingGroup {
  const next = {
    accountIds: g.accountIds,
    pendingMicrousd: g.pendingMicrousd - m.fromPendingMicrousd,
    unresolvedMicrousd: g.unresolvedMicrousd + m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd,
  };
  if (next.pendingMicrousd < 0n || next.unresolvedMicrousd < 0n) throw new RangeError('a funding group would go negative');
  return next;
}

/** The index of the funding group holding on exactly `accountIds` (an attempt's `fundingAccountsOf`). */
export function groupOf(groups: readonly FundingGroup[], accountIds: readonly string[]): number {
  const key = accountIds.join('\u0000');
  const i = groups.findIndex((g) => g.accountIds.join('\u0000') === key);
  if (i < 0) throw new RangeError(`no funding group holds on ${accountIds.join(', ')}`);
  return i;
}

/**
 * A batch of reservations' steps (each planned in sequence on its reservation and about the attempt
 * whose funding set it names) as budget-account deltas: each step is split across its reservation's
 * funding groups (`splitMovement`), each part mirrored on its group's accounts, summed per account
 * (`accountDeltas`). Returns the groups after the batch too. For reservations with one group this
 * is `accountDeltas` of their movements, so an action without an allowance moves as before.
 */
export function fundedAccountDeltas(
  moves: ReadonlyArray<{ groups: readonly FundingGroup[]; steps: ReadonlyArray<{ movement: Movement; funding: readonly string[] }> }>,
): { deltas: AccountDelta[]; groups: FundingGroup[][] } {
  const parts: Array<{ accountIds: readonly string[]; movement: Movement }> = [];
  const after = moves.map(({ groups, steps }) => {
    let gs = [...groups];
    for (const { movement, funding } of steps) {
      const split = splitMovement(gs, movement, groupOf(gs, funding));
      split.forEach((m, i) => parts.push({ accountIds: gs[i].accountIds, movement: m }));
      gs = gs.map((g, i) => applyToGroup(g, split[i]));
    }
    return gs;
  });
  return { deltas: accountDeltas(parts), groups: after };
}
