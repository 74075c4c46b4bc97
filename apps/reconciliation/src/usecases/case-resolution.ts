import type {
  ReconciliationActionView,
  ReconciliationAttemptView,
  ReconciliationCaseView,
  ReconciliationStore,
  ReservationView,
  Tx,
} from '@gateway/db';
import { actionMachine } from '@gateway/domain';
import { CaseResolutionPlan, planCaseResolution } from '@gateway/domain';
import { ReconciliationError } from '../reconciliation.errors';

export interface OpenCase {
  c: ReconciliationCaseView;
  action: ReconciliationActionView;
  attempt: ReconciliationAttemptView | null;
  reservation: ReservationView | null;
}

/**
 * Locks an open case and what it touches, in the order settlement locks them (case, reservation,
 * then rows it updates), so two operators resolving the same case serialise and the second one
 * finds it resolved.
 */
export async function lockOpenCase(store: ReconciliationStore, tx: Tx, caseId: string): Promise<OpenCase> {
  const c = await store.lockCase(tx, caseId);
  if (!c) throw new ReconciliationError('case_not_found', `reconciliation case ${caseId} does not exist`);
  if (c.status !== 'open') {
    throw new ReconciliationError(
      'case_already_resolved',
      `case ${caseId} was already resolved${c.resolvedBy ? ` by ${c.resolvedBy}` : ''}`,
    );
  }
  const reservation = await store.lockReservation(tx, c.actionId);
  const action = await store.lockAction(tx, c.actionId);
  if (!action) throw new ReconciliationError('case_not_resolvable', `case ${caseId} refers to an action that does not exist`);
  const attempt = c.attemptId ? await store.attempt(tx, c.attemptId) : null;
  return { c, action, attempt, reservation };
}

/**
 * Applies the case's money movement. Runs after the attempt's own transition, so "action done"
 * (nothing left that could bring usage through settlement) already counts this attempt as settled.
 */
export async function resolveHold(
  store: ReconciliationStore,
  tx: Tx,
  open: OpenCase,
  costMicrousd: bigint | null,
  reason: string,
  now: Date,
): Promise<CaseResolutionPlan | null> {
  const r = open.reservation;
  if (!r) return null;
  const actionDone = actionMachine.terminal(open.action.status) && (await store.attemptsAwaitingSettlement(tx, open.action.id)) === 0;
  const plan = planCaseResolution(r, {
    caseExposureMicrousd: open.c.exposureMicrousd,
    costMicrousd,
    actionDone,
    otherOpenExposureMicrousd: await store.openExposureOnAction(tx, open.action.id, open.c.id),
  });
  await store.moveHold(tx, r, { ...plan.movement, reason, now });
  return plan;
}
