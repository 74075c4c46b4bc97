import { Ctx, EventPattern, Payload } from '@nestjs/microservices';
import { attemptCompletedV1, AttemptCompletedV1, DeadLetterV1, Topics } from '@gateway/contracts';
import { batchMaxSize, BusConsumer, BusContext, ConsumerExtras, consumerSetting, poisonPattern } from '@gateway/messaging';
import { Clock, InjectClock } from '@gateway/service-kit';
import { OpenPoisonCase } from '../usecases/open-poison-case/open-poison-case.usecase';
import { SettleAttempt } from '../usecases/settle-attempt/settle-attempt.usecase';

/**
 * Up to `SETTLEMENT_BATCH_MAX` events of a partition settle in one transaction (1 settles them
 * one at a time; bench/settlement.ts compares the two). The default, 1,000, is more than one fetch
 * brings of a partition (1 MiB, ~700 settled-size events), so a backlog settles a partition's whole
 * fetch in one transaction: 10–15 % more events/s than 500, which split each fetch in two
 * (bench/README.md, "Settlement: deleting published outbox rows, batches of 1,000"). Settlement is off the request path, so
 * the broker holds its fetch until 1 MiB has gathered or `SETTLEMENT_FETCH_WAIT_MS` (250) has
 * passed: at a moderate rate a fetch answered at once carried one or two events, each batch a
 * transaction of its own (docs/decisions.md, "Latency at a moderate rate"). 0 = answer at once.
 * Offsets are committed once a second rather than after every partition's batch: an event handed
 * out again (a crash, a rebalance) is a duplicate to `processed_event`.
 */
const fetchWaitMs = consumerSetting('SETTLEMENT_FETCH_WAIT_MS', 250, 0);
const SETTLEMENT: ConsumerExtras = {
  group: 'gateway-settlement',
  concurrency: 6,
  batch: { maxSize: batchMaxSize('SETTLEMENT_BATCH_MAX', 1000) },
  commitIntervalMs: 1000,
  fetch: fetchWaitMs > 0 ? { minBytes: 1024 * 1024, maxWaitMs: fetchWaitMs } : undefined,
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
