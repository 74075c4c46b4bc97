import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { attemptCompletedV1, AttemptCompletedV1, DeadLetterV1, Topics } from '@gateway/contracts';
import { batchMaxSize, BusConsumer, BusContext, ConsumerExtras, poisonPattern } from '@gateway/messaging';
import { Clock, InjectClock } from '@gateway/service-kit';
import { OpenPoisonCase } from '../usecases/open-poison-case/open-poison-case.usecase';
import { SettleAttempt } from '../usecases/settle-attempt/settle-attempt.usecase';

/**
 * Up to `SETTLEMENT_BATCH_MAX` events of a partition settle in one transaction (1 settles them
 * one at a time; bench/settlement.ts compares the two).
 */
const SETTLEMENT: ConsumerExtras = {
  group: 'gateway-settlement',
  concurrency: 6,
  batch: { maxSize: batchMaxSize('SETTLEMENT_BATCH_MAX', 500) },
};

@BusConsumer()
export class AttemptCompletedConsumer {
  constructor(
    private readonly settle: SettleAttempt,
    private readonly openPoisonCase: OpenPoisonCase,
    @InjectClock() private readonly clock: Clock,
  ) {}

  @EventPattern(Topics.attemptCompleted.name, SETTLEMENT)
  async settleAttempts(@Payload() events: AttemptCompletedV1[]): Promise<void> {
    await this.settle.executeBatch(events, this.clock.now());
  }

  /** A parked attempt still holds money: its exposure becomes a reconciliation case. */
  @EventPattern(poisonPattern(Topics.attemptCompleted.name))
  async parked(@Payload() deadLetter: DeadLetterV1, @Ctx() ctx: BusContext): Promise<void> {
    await this.openPoisonCase.execute({ deadLetter, event: attemptCompletedV1.parse(ctx.raw) }, this.clock.now());
  }
}
