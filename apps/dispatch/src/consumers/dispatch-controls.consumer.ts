import { Inject } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { DispatchControlV1, Topics } from '@gateway/contracts';
import { BusConsumer, ConsumerExtras } from '@gateway/messaging';
import { Clock, CLOCK } from '@gateway/service-kit';
import { RelayStops } from '../usecases/run-attempt/relay-stops';

/**
 * Every instance reads every stop (a group of its own, from the latest offset): the instance
 * streaming the action is whichever claimed it, which admission does not know. A stop published
 * before this instance joined is not needed by it: it was not streaming then.
 */
const CONTROLS: ConsumerExtras = { group: 'gateway-dispatch-controls', perInstance: true, fromBeginning: false };

@BusConsumer()
export class DispatchControlsConsumer {
  constructor(
    @Inject(RelayStops) private readonly stops: RelayStops,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  @EventPattern(Topics.dispatchControls.name, CONTROLS)
  control(@Payload() control: DispatchControlV1): void {
    this.stops.stop(control.action_id, this.clock.now().getTime());
  }
}
