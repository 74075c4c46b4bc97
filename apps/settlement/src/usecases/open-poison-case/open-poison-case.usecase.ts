import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { AttemptCompletedV1, DeadLetterV1, sanitisedFields } from '@gateway/contracts';
import { CaseRepository, ProcessedEventRepository, ReservationHoldRepository } from '@gateway/db';
import { pendingOf } from '@gateway/domain';
import { handleOnce } from '@gateway/messaging';
import { IdGenerator, InjectIds, InjectLogger } from '@gateway/service-kit';

const CONSUMER = 'settlement.poison-case';

export interface OpenPoisonCaseCommand {
  deadLetter: DeadLetterV1;
  /** the parked attempt.completed event (it matched its schema; only its handling failed) */
  event: AttemptCompletedV1;
}

export type PoisonCaseOutcome = 'opened' | 'already_open';

/**
 * An `attempt.completed` event settlement could not process was parked on the dead-letter topic;
 * its money must not vanish with it. This opens a `settlement_failed` case for the attempt with
 * the reservation's pending exposure (which stays held) and announces it on
 * `reconciliation.required`, once per dead letter.
 */
@Injectable()
export class OpenPoisonCase {
  constructor(
    @Inject(ProcessedEventRepository) private readonly processed: Pick<ProcessedEventRepository, 'transaction' | 'recordMany'>,
    @Inject(ReservationHoldRepository) private readonly holds: Pick<ReservationHoldRepository, 'lock'>,
    @Inject(CaseRepository) private readonly cases: Pick<CaseRepository, 'open'>,
    @InjectIds() private readonly ids: IdGenerator,
    @InjectLogger() private readonly log: Logger,
  ) {}

  async execute(cmd: OpenPoisonCaseCommand, now: Date): Promise<PoisonCaseOutcome> {
    const { deadLetter, event } = cmd;
    const result = await handleOnce(this.processed, CONSUMER, deadLetter.event_id, async (tx) => {
      // No reservation to hold against is still a case (zero exposure), never a silent drop.
      const reservation = await this.holds.lock(tx, event.action_id);
      const exposure = reservation ? pendingOf(reservation) : 0n;
      const opened = await this.cases.open(
        tx,
        {
          id: this.ids.next(),
          actionId: event.action_id,
          attemptId: event.attempt_id,
          reason: 'settlement_failed',
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
            has_reservation: reservation !== null,
          },
          openedAt: now,
        },
        { eventId: this.ids.next(), fields: sanitisedFields.parse(event) },
      );
      if (!opened) return 'already_open' as const;
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
