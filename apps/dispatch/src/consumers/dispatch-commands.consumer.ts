import { EventPattern, Payload } from '@nestjs/microservices';
import { DispatchCommandEnvelopeV1, Topics } from '@gateway/contracts';
import { BusConsumer, ConsumerExtras } from '@gateway/messaging';
import { DispatchCommandsIntake } from './dispatch-commands.intake';

const DISPATCH: ConsumerExtras = { group: 'gateway-dispatch', concurrency: 6 };

@BusConsumer()
export class DispatchCommandsConsumer {
  constructor(private readonly intake: DispatchCommandsIntake) {}

  /** Resolves once the claim is durable, so the offset commits while the upstream call runs on. */
  @EventPattern(Topics.dispatchCommands.name, DISPATCH)
  command(@Payload() envelope: DispatchCommandEnvelopeV1): Promise<void> {
    return this.intake.accept(envelope);
  }
}
