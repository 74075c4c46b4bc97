import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { caseReason } from '@gateway/contracts';
import {
  AttemptRepository,
  CaseRepository,
  isDatabaseOutOfService,
  ReconciliationRepository,
  ReconciliationStore,
  ReservationHoldRepository,
  voidUndispatchedAction,
} from '@gateway/db';
import { actionMachine, applyMovement, combineMovements, Movement, planMoveToUnresolved, planReleaseRest } from '@gateway/domain';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';
import { SWEEP_CONFIG, SweepConfig } from '../../reconciliation.config';
import { AttemptPort, CasePort, HoldPort } from '../ports';
import { sanitisedFields } from '../sanitised-fields';

export const ORPHANED_ATTEMPT = caseReason.enum.orphaned_attempt;

export interface SweepReport {
  /** admitted actions whose command can no longer be dispatched: reservation voided, action expired */
  voidedActionIds: string[];
  /** attempts left in flight by a dispatcher that died: each now has an open case */
  orphans: Array<{ actionId: string; attemptId: string; caseId: string; exposureMicrousd: bigint }>;
}

/**
 * The sweeper (DESIGN §9): no reservation leaks forever.
 *
 * (a) An action still `admitted` after its dispatch deadline is provably undispatchable (dispatch
 *     refuses expired commands): its pending hold is released, the reservation voided, the
 *     action expired and its in-flight slot returned — once, under the action's row lock
 *     (libs/db `voidUndispatchedAction`, which admission calls at once for an action it withdraws;
 *     what the sweep still finds is what a crashed or cut-off admission could not withdraw).
 * (b) An attempt still `in_flight` well past its action's deadline lost its dispatcher mid-call.
 *     The provider may have billed it, so its own exposure (its hold, or what is left of the
 *     pending pool if less; libs/domain `planMoveToUnresolved`) becomes unresolved on an
 *     `orphaned_attempt` case (the case writer publishes `reconciliation.required`). Its usage is
 *     unknown, never zero. Each attempt is treated alone: the other attempts' holds stay pending
 *     while any of them may still bring usage, and are released once none does (the action is
 *     over after the sweep).
 *
 * Each action is handled in its own transaction; one failure does not stop the sweep, unless it
 * says the database is out of service (unreachable, or taking no writes: every other action would
 * fail alike): then the sweep ends there and fails once (the scheduler logs and counts it), rather
 * than logging one error per action on every tick until the server is back.
 */
@Injectable()
export class SweepReservations {
  constructor(
    @Inject(ReconciliationRepository) private readonly store: ReconciliationStore,
    @Inject(CaseRepository) private readonly cases: CasePort,
    @Inject(ReservationHoldRepository) private readonly holds: HoldPort,
    @Inject(AttemptRepository) private readonly attempts: AttemptPort,
    @Inject(SWEEP_CONFIG) private readonly config: SweepConfig,
    @InjectIds() private readonly ids: IdGenerator,
    @InjectLogger() private readonly log: Pick<Logger, 'info' | 'warn' | 'error'>,
  ) {}

  async execute(now: Date): Promise<SweepReport> {
    const report: SweepReport = { voidedActionIds: [], orphans: [] };
    const voidCutoff = new Date(now.getTime() - this.config.dispatchClockSkewMs);
    for (const actionId of await this.store.admittedPastDispatchDeadline(voidCutoff, this.config.batchSize)) {
      try {
        if (await this.voidUndispatched(actionId, voidCutoff, now)) report.voidedActionIds.push(actionId);
      } catch (err) {
        if (isDatabaseOutOfService(err)) throw err;
        this.log.error({ action_id: actionId, error: (err as Error).message }, 'sweeper could not void an undispatched action');
      }
    }
    const orphanCutoff = new Date(now.getTime() - this.config.orphanGraceMs);
    for (const actionId of await this.store.actionsWithInFlightAttemptsPastDeadline(orphanCutoff, this.config.batchSize)) {
      try {
        report.orphans.push(...(await this.reconcileOrphans(actionId, orphanCutoff, now)));
      } catch (err) {
        if (isDatabaseOutOfService(err)) throw err;
        this.log.error({ action_id: actionId, error: (err as Error).message }, 'sweeper could not reconcile orphaned attempts');
      }
    }
    if (report.voidedActionIds.length > 0 || report.orphans.length > 0) {
      this.log.info({ voided: report.voidedActionIds.length, orphaned: report.orphans.length }, 'sweep');
    }
    return report;
  }

  private async voidUndispatched(actionId: string, cutoff: Date, now: Date): Promise<boolean> {
    const ports = { store: this.store, holds: this.holds, log: this.log };
    return (await voidUndispatchedAction(ports, actionId, { deadlinePassedBefore: cutoff }, now)) === 'voided';
  }

  private reconcileOrphans(actionId: string, cutoff: Date, now: Date): Promise<SweepReport['orphans']> {
    return this.store.transaction(async (tx) => {
      const attempts = await this.store.lockOrphanedAttempts(tx, actionId, cutoff);
      if (attempts.length === 0) return [];
      const action = await this.store.lockAction(tx, actionId);
      if (!action) return [];
      const reservation = await this.holds.lock(tx, actionId);
      const plan = reservation
        ? planMoveToUnresolved(
            reservation,
            attempts.map((a) => a.holdMicrousd),
          )
        : null;
      const out: SweepReport['orphans'] = [];
      for (const [i, attempt] of attempts.entries()) {
        const exposure = plan?.exposuresMicrousd[i] ?? 0n;
        const caseId = this.ids.next();
        const opened = await this.cases.open(
          tx,
          {
            id: caseId,
            actionId,
            attemptId: attempt.id,
            reason: ORPHANED_ATTEMPT,
            providerRequestId: attempt.providerRequestId,
            exposureMicrousd: exposure,
            details: {
              attempt_no: attempt.attemptNo,
              attempt_role: attempt.role,
              started_at: attempt.startedAt.toISOString(),
              action_deadline_at: action.deadlineAt.toISOString(),
              orphan_grace_ms: this.config.orphanGraceMs,
              reserved_microusd: reservation ? reservation.reservedMicrousd.toString() : null,
            },
            openedAt: now,
          },
          { eventId: this.ids.next(), fields: sanitisedFields(action, attempt, now) },
        );
        // in_flight has no direct edge to reconciliation_required: the call was cut, then needs evidence.
        await this.attempts.transition(tx, attempt.id, 'cut', 'orphaned: still in flight past the action deadline', now);
        await this.attempts.transition(
          tx,
          attempt.id,
          'require_reconciliation',
          'orphaned: still in flight past the action deadline; usage unknown',
          now,
        );
        if (!opened) continue;
        out.push({ actionId, attemptId: attempt.id, caseId, exposureMicrousd: exposure });
      }
      if (!actionMachine.terminal(action.status)) {
        await this.store.setActionStatus(
          tx,
          [actionId],
          actionMachine.transition(action.status, 'fail'),
          'failed: dispatcher lost the attempt mid-call',
          now,
        );
        // The slot is the action's: dispatch returns it when it finishes an action, so only here;
        // quota counters before the budget accounts the hold movement below touches (lock order).
        await this.store.releaseInFlightSlots(tx, [action.workloadId]);
      }
      if (reservation && plan) {
        let movement = plan.movement;
        // The action is over now; once no other attempt may bring usage, the rest of the pool is released.
        const rest = (await this.attempts.awaitingSettlement(tx, actionId)) === 0;
        const release = rest ? planReleaseRest(applyMovement(reservation, movement)) : null;
        if (release) movement = combineMovements(movement, release);
        if (movement.fromPendingMicrousd > 0n || movement.status !== reservation.status) {
          // one step per orphan, each on the accounts its own hold sits on (`fundingAccountsOf`), then the rest
          const steps = [...perAttempt(plan.movement, plan.exposuresMicrousd), ...(release ? [release] : [])];
          await this.holds.moveMany(
            tx,
            [
              {
                r: reservation,
                steps,
                fundings: [...attempts.map((a) => a.fundingAccountIds ?? null), ...(release ? [null] : [])],
                reason: `${attempts.length} orphaned attempt(s): their own holds kept as unresolved exposure${rest ? '; the rest released' : ''}`,
              },
            ],
            now,
          );
        }
      }
      return out;
    });
  }
}

/** A move of several attempts to unresolved as one step per attempt (the same sum, the same end state). */
function perAttempt(m: Movement, exposures: readonly bigint[]): Movement[] {
  return exposures.map((x) => ({ ...m, fromPendingMicrousd: x, toUnresolvedMicrousd: x }));
}
