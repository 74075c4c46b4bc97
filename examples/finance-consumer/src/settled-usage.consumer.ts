import { Controller, Logger } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { Topics } from '@gateway/contracts';
import { ExperimentFactsStore } from './experiment-facts.store';
import { experimentAttemptOf } from './experiment-rows';
import { SpendStore } from './spend.store';
import { spendRowOf } from './spend-row';

/**
 * One handler per message of `gateway.usage.settled.v1` (Topics.usageSettled.name), through
 * Nest's standard Kafka transport. Each message is checked against the published zod schema
 * first. A message that does not match is logged (ids only) and skipped, so it cannot block
 * its partition; a database error is thrown, so Nest does not commit the offset and Kafka
 * delivers the message again.
 */
@Controller()
export class SettledUsageConsumer {
  private readonly log = new Logger(SettledUsageConsumer.name);

  constructor(
    private readonly store: SpendStore,
    private readonly experiments: ExperimentFactsStore,
  ) {}

  @EventPattern(Topics.usageSettled.name)
  async onSettled(@Payload() message: unknown): Promise<void> {
    const parsed = Topics.usageSettled.schema.safeParse(message);
    if (!parsed.success) {
      const eventId = typeof message === 'object' && message !== null ? (message as { event_id?: unknown }).event_id : undefined;
      this.log.warn(
        `skipped a message that does not match the usage.settled.v1 schema (event_id ${String(eventId)}): ${parsed.error.issues.length} issue(s)`,
      );
      return;
    }
    const row = spendRowOf(parsed.data);
    // an experiment attempt's facts first: both writes are idempotent, so a crash between them is
    // repaired by the redelivery
    const fact = experimentAttemptOf(parsed.data);
    if (fact) await this.experiments.record(fact);
    const counted = await this.store.record(row);
    this.log.log(
      counted
        ? `counted ${row.settlementKey} workload=${row.workloadId} day=${row.day} cost_microusd=${row.costMicrousd}`
        : `already counted ${row.settlementKey} (redelivery ignored)`,
    );
  }
}
