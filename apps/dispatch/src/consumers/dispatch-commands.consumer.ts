import { EventPattern, Payload } from '@nestjs/microservices';
import { DispatchCommandEnvelopeV1, Topics } from '@gateway/contracts';
import { BusConsumer, ConsumerExtras } from '@gateway/messaging';
import { DispatchCommandsIntake } from './dispatch-commands.intake';

/**
 * Offsets are committed once a second, not after every fetch: a commit per fetch was a broker
 * round trip inside every fetch cycle, i.e. per command at a moderate rate, and the next fetch
 * waited for it. A command handed out again (a crash, a rebalance) finds its claim taken.
 */
const DISPATCH: ConsumerExtras = { group: 'gateway-dispatch', concurrency: 6, commitIntervalMs: 1000 };

@BusConsumer()
export class DispatchCommandsConsumer {
  constructor(private readonly intake: DispatchCommandsIntake) {}

  /** Resolves once the claim is durable, so the offset commits while the upstream call runs on. */
  @EventPattern(Topics.dispatchCommands.name, DISPATCH)
  command(@Payload() envelope: DispatchCommandEnvelopeV1): Promise<void> {
    return this.intake.accept(envelope);
  }
}
