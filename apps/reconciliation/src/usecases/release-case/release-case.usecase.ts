import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import {
  AttemptRepository,
  buildLedgerRow,
  CaseRepository,
  LedgerRepository,
  priceRevisionOf,
  ReconciliationRepository,
  ReconciliationStore,
  ReservationHoldRepository,
} from '@gateway/db';
import { attemptMachine } from '@gateway/domain';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';
import { ReconciliationError } from '../../reconciliation.errors';
import { lockOpenCase, resolveHold } from '../case-resolution';
import { AttemptPort, CasePort, HoldPort, LedgerPort, MoneyPorts } from '../ports';
import { attemptFacts } from '../sanitised-fields';
import { ReleaseCaseCommand } from './release-case.command';

export interface ReleaseCaseResult {
  case_id: string;
  status: 'resolved';
  action_id: string;
  attempt_id: string | null;
  usage_source: 'operator_release';
  /** the ledger row written at the attested amount; null when the attempt already had its row */
  ledger_entry_id: string | null;
  /** what the operator attests the attempt cost: settled, never released as if it were zero */
  settled_microusd: string;
  /** what the case held beyond the attested amount, and any unused pending hold of a finished action */
  released_microusd: string;
  resolved_by: string;
  resolution: string;
  reservation_status: string | null;
}

/**
 * An operator decides a case after comparing evidence: the attempt moves into the final ledger
 * at the amount the operator attests (default: the full exposure the case holds), with
 * usage_source `operator_release`, who and why, and the case id on the row; that amount is
 * settled on the reservation and its budgets (what the case held beyond it is released); the
 * attempt ends `settled` with its token counts unknown; `usage.settled` goes out with the row.
 * A case whose attempt already has its ledger row (e.g. an unexplained shortfall) only closes,
 * and then the operator cannot attest an amount.
 */
@Injectable()
export class ReleaseCase {
  private readonly p: MoneyPorts;

  constructor(
    @Inject(ReconciliationRepository) store: ReconciliationStore,
    @Inject(CaseRepository) cases: CasePort,
    @Inject(ReservationHoldRepository) holds: HoldPort,
    @Inject(AttemptRepository) attempts: AttemptPort,
    @Inject(LedgerRepository) private readonly ledger: LedgerPort,
    @InjectIds() private readonly ids: IdGenerator,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {
    this.p = { store, cases, holds, attempts };
  }

  async execute(cmd: ReleaseCaseCommand, now: Date): Promise<ReleaseCaseResult> {
    const result = await this.p.store.transaction(async (tx) => {
      const open = await lockOpenCase(this.p, tx, cmd.caseId);
      const { c, action, attempt, reservation } = open;
      const attested = cmd.attestedMicrousd ?? c.exposureMicrousd;
      const booksRow = attempt !== null && attempt.status !== 'settled';
      if (!booksRow && attested > 0n) {
        throw new ReconciliationError(
          'attempt_already_settled',
          `case ${c.id} has no unsettled attempt to book ${attested} micro-USD on; release it without an amount`,
        );
      }
      let ledgerEntryId: string | null = null;
      if (booksRow) {
        if (!attemptMachine.can(attempt.status, 'settle')) {
          throw new ReconciliationError(
            'case_not_resolvable',
            `attempt ${attempt.id} is ${attempt.status}; it cannot be released while it may still report`,
          );
        }
        if (!reservation) {
          throw new ReconciliationError('case_not_resolvable', `action ${action.id} has no reservation to book the release against`);
        }
        const row = buildLedgerRow({
          id: this.ids.next(),
          facts: attemptFacts(action, attempt, c.providerRequestId ?? attempt.providerRequestId),
          evidence: { kind: 'attested', amountMicrousd: attested, caseId: c.id, attestedBy: cmd.actor, reason: cmd.reason },
          priceRevisionId: priceRevisionOf(attempt.priceRevisionId, reservation.priceRevisionId),
          settledAt: now,
        });
        if (!(await this.ledger.record(tx, row, this.ids.next()))) {
          throw new ReconciliationError('attempt_already_settled', `attempt ${attempt.id} already has its ledger row`);
        }
        ledgerEntryId = row.id;
        await this.p.attempts.transition(tx, attempt.id, 'settle', `released by ${cmd.actor} (case ${c.id}): ${cmd.reason}`, now, {
          usageSource: 'operator_release',
        });
      }
      const plan = await resolveHold(this.p, tx, open, attested, `case ${c.id} released by ${cmd.actor}: ${cmd.reason}`, now);
      const released = plan?.releasedMicrousd ?? 0n;
      await this.p.cases.resolve(tx, c.id, {
        resolution: cmd.reason,
        resolvedBy: cmd.actor,
        resolvedAt: now,
        details: {
          usage_source: 'operator_release',
          ledger_entry_id: ledgerEntryId,
          settled_microusd: attested.toString(),
          released_microusd: released.toString(),
        },
      });
      return {
        case_id: c.id,
        status: 'resolved' as const,
        action_id: action.id,
        attempt_id: attempt?.id ?? null,
        usage_source: 'operator_release' as const,
        ledger_entry_id: ledgerEntryId,
        settled_microusd: attested.toString(),
        released_microusd: released.toString(),
        resolved_by: cmd.actor,
        resolution: cmd.reason,
        reservation_status: plan?.movement.status ?? null,
      };
    });
    this.log.info(
      { case_id: result.case_id, settled_microusd: result.settled_microusd, resolved_by: result.resolved_by },
      'case released by operator at the attested amount',
    );
    return result;
  }
}
