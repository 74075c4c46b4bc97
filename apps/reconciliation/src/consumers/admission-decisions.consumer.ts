import { EventPattern, Payload } from '@nestjs/microservices';
import { AdmissionDecisionV1, Topics } from '@gateway/contracts';
import { BusConsumer } from '@gateway/messaging';
import { RecordDecisions } from '../usecases/record-decisions/record-decisions.usecase';
import { reportConsumer } from './report-consumer';

/** The daily tallies are read once a day: `CONTROLS_BATCH_MAX`, `CONTROLS_FETCH_WAIT_MS` (see reportConsumer). */
const CONTROLS = reportConsumer('gateway-reconciliation-controls', 'CONTROLS');

@BusConsumer()
export class AdmissionDecisionsConsumer {
  constructor(private readonly record: RecordDecisions) {}

  @EventPattern(Topics.admissionDecisions.name, CONTROLS)
  async tally(@Payload() events: AdmissionDecisionV1[]): Promise<void> {
    await this.record.execute(events);
  }
}
