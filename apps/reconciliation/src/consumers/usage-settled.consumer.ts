import { EventPattern, Payload } from '@nestjs/microservices';
import { Topics, UsageSettledV1 } from '@gateway/contracts';
import { BusConsumer } from '@gateway/messaging';
import { RecordSettled } from '../usecases/record-settled/record-settled.usecase';
import { reportConsumer } from './report-consumer';

/**
 * The weekly audit's copy of what finance receives on `gateway.usage.settled.v1`, read like the
 * daily tallies (`AUDIT_BATCH_MAX`, `AUDIT_FETCH_WAIT_MS`; see reportConsumer); a redelivery inserts nothing.
 */
const AUDIT = reportConsumer('gateway-reconciliation-audit', 'AUDIT');

@BusConsumer()
export class UsageSettledConsumer {
  constructor(private readonly record: RecordSettled) {}

  @EventPattern(Topics.usageSettled.name, AUDIT)
  async keep(@Payload() events: UsageSettledV1[]): Promise<void> {
    await this.record.execute(events);
  }
}
