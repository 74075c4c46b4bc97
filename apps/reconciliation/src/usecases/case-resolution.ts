import type { ReconciliationActionView, ReconciliationAttemptView, ReconciliationCaseView, ReservationView, Tx } from '@gateway/db';
import { actionMachine, CaseResolutionPlan, planCaseResolution } from '@gateway/domain';
import { ReconciliationError } from '../reconciliation.errors';
import { MoneyPorts } from './ports';

export interface OpenCase {
  c: ReconciliationCaseView;
  action: ReconciliationActionView;
  attempt: ReconciliationAttemptView | null;
  reservation: ReservationView | null;
}

/**
 * Locks an open case and then what it touches in the global lock order (attempt, action,
 * reservation; docs/architecture.md), so two operators resolving the same case serialise and the
 * second one finds it resolved, and no resolution deadlocks with settlement or the sweeper.
 */
export async function lockOpenCase(p: MoneyPorts, tx: Tx, caseId: string): Promise<OpenCase> {
  const c = await p.cases.lock(tx, caseId);
  if (!c) throw new ReconciliationError('case_not_found', `reconciliation case ${caseId} does not exist`);
  if (c.status !== 'open') {
    throw new ReconciliationError(
      'case_already_resolved',
      `case ${caseId} was already resolved${c.resolvedBy ? ` by ${c.resolvedBy}` : ''}`,
    );
  }
  if (c.attemptId) await p.attempts.lockAttempt(tx, c.attemptId);
  const action = await p.store.lockAction(tx, c.actionId);
  if (!action) throw new ReconciliationError('case_not_resolvable', `case ${caseId} refers to an action that does not exist`);
  const reservation = await p.holds.lock(tx, c.actionId);
  const attempt = c.attemptId ? await p.attempts.byId(tx, c.attemptId) : null;
  return { c, action, attempt, reservation };
}

/**
 * Settles the case's exposure at `costMicrousd` (provider evidence or the operator's attested
 * amount) through the hold planner. Runs after the attempt's own transition, so "action done"
 * (nothing left that could bring usage through settlement) already counts this attempt as settled.
 */
export async function resolveHold(
  p: MoneyPorts,
  tx: Tx,
  open: OpenCase,
  costMicrousd: bigint,
  reason: string,
  now: Date,
): Promise<CaseResolutionPlan | null> {
  const r = open.reservation;
  if (!r) return null;
  const actionDone = actionMachine.terminal(open.action.status) && (await p.attempts.awaitingSettlement(tx, open.action.id)) === 0;
  const plan = planCaseResolution(r, {
    caseExposureMicrousd: open.c.exposureMicrousd,
    costMicrousd,
    actionDone,
    otherOpenExposureMicrousd: await p.cases.openExposureOnAction(tx, open.action.id, open.c.id),
  });
  // on the accounts the case's attempt's hold sits on (an allowance-funded extra attempt: the allowance)
  await p.holds.move(tx, r, plan.movement, reason, now, open.attempt?.fundingAccountIds ?? null);
  return plan;
}
