import { EventPattern, Payload } from '@nestjs/microservices';
import { DispatchReplyEnvelopeV1, Topics } from '@gateway/contracts';
import { BusConsumer, ConsumerExtras } from '@gateway/messaging';
import { DispatchRepliesIntake } from './dispatch-replies.intake';

/**
 * Every admission instance reads all replies in a consumer group of its own (`perInstance`) and
 * keeps those it has a waiter for. Joined before the HTTP server listens, so no reply precedes it.
 */
const REPLIES: ConsumerExtras = { group: 'admission-replies', perInstance: true, fromBeginning: false, concurrency: 6 };

@BusConsumer()
export class DispatchRepliesConsumer {
  constructor(private readonly intake: DispatchRepliesIntake) {}

  @EventPattern(Topics.dispatchReplies.name, REPLIES)
  reply(@Payload() envelope: DispatchReplyEnvelopeV1): Promise<void> {
    return this.intake.accept(envelope);
  }
}
