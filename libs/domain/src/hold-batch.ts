/**
 * A settlement batch's money movements as few writes: the movements planned one after another on
 * the same reservation fold into one, and every reservation's movement is mirrored on its budget
 * accounts summed per account (a team or environment account shared by many workloads moves
 * once per batch, not once per attempt). The planners in `holds.ts` stay the only money rules.
 */
import { applyMovement, combineMovements, Hold, Movement } from './holds';

/**
 * The order budget accounts are locked in, by scope, then by id (docs/architecture.md "Lock
 * order"; admission takes a workload's accounts in this order too). An experiment allowance
 * (`EXPERIMENT_ALLOWANCE_SCOPE`) is locked where the workload's account would be: before the
 * org-wide team and environment accounts it shares the extra attempt with.
 */
export const BUDGET_ACCOUNT_LOCK_ORDER: readonly string[] = ['workload', 'exception', 'experiment_allowance', 'team', 'environment'];

/**
 * Movements planned in sequence on one hold (each on the hold the previous one left) as one
 * movement, and the hold after all of them. Each step is checked against the hold it was planned
 * on (`applyMovement` refuses negative buckets and edges the machine lacks); the result is the
 * sum, ending in the last step's state.
 */
export function foldMovements(h: Hold, steps: readonly Movement[]): { hold: Hold; movement: Movement | null } {
  let hold = h;
  let movement: Movement | null = null;
  for (const step of steps) {
    hold = applyMovement(hold, step);
    movement = movement ? combineMovements(movement, step) : step;
  }
  return { hold, movement };
}

/** What one budget account moves by in a batch (the mirror of its reservations' movements). */
export interface AccountDelta {
  accountId: string;
  fromPendingMicrousd: bigint;
  toSettledMicrousd: bigint;
  /** to-unresolved minus from-unresolved */
  unresolvedDeltaMicrousd: bigint;
}

/**
 * Sums every reservation's movement onto each account it holds money on: the same totals as
 * applying the movements one by one, in one row per account (first-seen order; storage locks
 * them by `BUDGET_ACCOUNT_LOCK_ORDER`).
 */
export function accountDeltas(moves: ReadonlyArray<{ accountIds: readonly string[]; movement: Movement }>): AccountDelta[] {
  const byAccount = new Map<string, AccountDelta>();
  for (const { accountIds, movement: m } of moves) {
    for (const accountId of new Set(accountIds)) {
      const d = byAccount.get(accountId) ?? { accountId, fromPendingMicrousd: 0n, toSettledMicrousd: 0n, unresolvedDeltaMicrousd: 0n };
      d.fromPendingMicrousd += m.fromPendingMicrousd;
      d.toSettledMicrousd += m.toSettledMicrousd;
      d.unresolvedDeltaMicrousd += m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd;
      byAccount.set(accountId, d);
    }
  }
  return [...byAccount.values()];
}
