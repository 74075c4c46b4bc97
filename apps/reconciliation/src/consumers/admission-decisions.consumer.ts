import { EventPattern, Payload } from '@nestjs/microservices';
import { AdmissionDecisionV1, Topics } from '@gateway/contracts';
import { batchMaxSize, BusConsumer, ConsumerExtras, consumerSetting } from '@gateway/messaging';
import { RecordDecisions } from '../usecases/record-decisions/record-decisions.usecase';

/**
 * The daily tallies are read once a day, so this consumer is built to cost little while idle
 * (issue 12): one group, one concurrent partition batch of up to `CONTROLS_BATCH_MAX` (2000)
 * decisions, and the broker holds each fetch until 1 MiB has gathered or
 * `CONTROLS_FETCH_WAIT_MS` (5000) has passed, so an idle consumer asks for data every few
 * seconds instead of continuously. Offsets are committed every 5 s (a redelivery is a duplicate to
 * `processed_event`). From the beginning: a new deployment counts the retained days.
 */
const CONTROLS: ConsumerExtras = {
  group: 'gateway-reconciliation-controls',
  fromBeginning: true,
  concurrency: 1,
  batch: { maxSize: batchMaxSize('CONTROLS_BATCH_MAX', 2000) },
  commitIntervalMs: 5000,
  fetch: { minBytes: 1024 * 1024, maxWaitMs: consumerSetting('CONTROLS_FETCH_WAIT_MS', 5000, 1) },
};

@BusConsumer()
export class AdmissionDecisionsConsumer {
  constructor(private readonly record: RecordDecisions) {}

  @EventPattern(Topics.admissionDecisions.name, CONTROLS)
  async tally(@Payload() events: AdmissionDecisionV1[]): Promise<void> {
    await this.record.execute(events);
  }
}
