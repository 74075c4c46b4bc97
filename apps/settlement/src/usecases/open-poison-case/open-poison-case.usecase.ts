import { Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { AttemptCompletedV1, DeadLetterV1, ReconciliationRequiredV1, sanitisedFields } from '@gateway/contracts';
import { OutboxRepository, ProcessedEventRepository, SettlementRepository } from '@gateway/db';
import { pendingOf } from '@gateway/domain';
import { handleOnce } from '@gateway/messaging';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';

const CONSUMER = 'settlement.poison-case';
export const SETTLEMENT_FAILED = 'settlement_failed';

export interface OpenPoisonCaseCommand {
  deadLetter: DeadLetterV1;
  /** the parked attempt.completed event (it matched its schema; only its handling failed) */
  event: AttemptCompletedV1;
}

export type PoisonCaseOutcome = 'opened' | 'already_open' | 'no_reservation';

/**
 * An `attempt.completed` event settlement could not process was parked on the dead-letter topic;
 * its money must not vanish with it. This opens a `settlement_failed` case for the attempt with
 * the reservation's pending exposure (which stays held) and announces it on
 * `reconciliation.required`, once per dead letter.
 */
@Injectable()
export class OpenPoisonCase {
  constructor(
    private readonly processed: ProcessedEventRepository,
    private readonly settlement: SettlementRepository,
    private readonly outbox: OutboxRepository,
    @InjectIds() private readonly ids: IdGenerator,
    @InjectLogger() private readonly log: Logger,
  ) {}

  async execute(cmd: OpenPoisonCaseCommand, now: Date): Promise<PoisonCaseOutcome> {
    const { deadLetter, event } = cmd;
    const result = await handleOnce(this.processed, CONSUMER, deadLetter.event_id, async (tx) => {
      const reservation = await this.settlement.lockReservation(tx, event.action_id);
      if (!reservation) return 'no_reservation' as const;
      const caseId = this.ids.next();
      const exposure = pendingOf(reservation);
      const opened = await this.settlement.openCase(tx, {
        id: caseId,
        actionId: event.action_id,
        attemptId: event.attempt_id,
        reason: SETTLEMENT_FAILED,
        providerRequestId: event.provider_request_id,
        exposureMicrousd: exposure,
        details: {
          dead_letter_id: deadLetter.event_id,
          topic: deadLetter.topic,
          partition: deadLetter.partition,
          offset: deadLetter.offset,
          reason_class: deadLetter.reason_class,
          error_class: deadLetter.error_class,
          error: deadLetter.reason,
        },
        openedAt: now,
      });
      if (!opened) return 'already_open' as const;
      const required: ReconciliationRequiredV1 = {
        ...sanitisedFields.parse(event),
        event_id: this.ids.next(),
        case_id: caseId,
        reason: SETTLEMENT_FAILED,
        exposure_microusd: exposure.toString(),
      };
      await this.outbox.append(tx, 'reconciliationRequired', event.workload_id ?? 'unknown', required);
      return 'opened' as const;
    });
    const outcome = result.duplicate ? 'already_open' : result.result;
    this.log.warn(
      { action_id: event.action_id, attempt_id: event.attempt_id, outcome },
      'settlement failed for good; case for its exposure',
    );
    return outcome;
  }
}
