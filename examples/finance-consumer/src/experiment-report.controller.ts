import { BadGatewayException, Controller, Get, Inject, NotFoundException, Param, ServiceUnavailableException } from '@nestjs/common';
import { experimentFromRecordWire, experimentPauseFromWire, experimentRecordWire } from '@gateway/contracts';
import { experimentReport, experimentReportToWire } from '@gateway/domain';
import { FINANCE_CONFIG, FinanceConsumerConfig } from './config';
import { ExperimentFactsStore } from './experiment-facts.store';
import { experimentRowsOf } from './experiment-rows';

/**
 * `GET /experiments/{id}/report`: the hedging experiment's report computed here, with the
 * gateway's own pure `experimentReport` (libs/domain, the one home of the statistics), over the
 * action rows rebuilt from `gateway.usage.settled.v1` alone. The experiment's design (seed, plan,
 * premium, overhead, deadline, acceptance) and its pauses (when hedging was paused) are the policy
 * API's record (`GET /experiments/{id}`, role finance); every action-level figure, the actions
 * dispatched while paused included, comes from the topic.
 */
@Controller('experiments')
export class ExperimentReportController {
  constructor(
    private readonly facts: ExperimentFactsStore,
    @Inject(FINANCE_CONFIG) private readonly config: FinanceConsumerConfig,
  ) {}

  @Get(':id/report')
  async report(@Param('id') id: string) {
    const record = experimentRecordWire.safeParse(await this.record(id));
    if (!record.success) throw new BadGatewayException(`the policy API's record of experiment ${id} is not the documented shape`);
    const experiment = experimentFromRecordWire(record.data);
    const { rows, coverage } = experimentRowsOf(await this.facts.ofExperiment(id));
    const pauses = (record.data.pauses ?? []).map((p) => experimentPauseFromWire(id, p));
    return { ...experimentReportToWire(experimentReport(experiment, rows, pauses)), topic_coverage: coverage };
  }

  /** The experiment record from the policy API. */
  private async record(id: string): Promise<unknown> {
    if (!this.config.policyUrl || !this.config.policyToken) {
      throw new ServiceUnavailableException('POLICY_URL and FINANCE_POLICY_TOKEN must be set to read the experiment design');
    }
    const res = await fetch(`${this.config.policyUrl}/experiments/${encodeURIComponent(id)}`, {
      headers: { authorization: `Bearer ${this.config.policyToken}` },
    });
    if (res.status === 404) throw new NotFoundException(`experiment ${id} is unknown to the policy API`);
    if (!res.ok) throw new BadGatewayException(`the policy API answered ${res.status} for experiment ${id}`);
    return res.json();
  }
}
