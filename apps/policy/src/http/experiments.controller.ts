import { CurrentOperator, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { Body, Controller, Get, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import type { Response } from 'express';
import { DomainError, experimentReportCsv } from '@gateway/domain';
import { ApiBody, ApiOperation, ApiProduces, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { parseBody } from '../usecases/input';
import { StartExperiment } from '../usecases/start-experiment/start-experiment.usecase';
import { stopExperimentBody } from '../usecases/stop-experiment/stop-experiment.command';
import { StopExperiment } from '../usecases/stop-experiment/stop-experiment.usecase';
import { bodySchema } from './openapi';

@ApiTags('experiments')
@OperatorApi()
@ApiResponse({ status: 400, description: 'invalid_request: the body failed validation (param names the field)' })
@Controller('experiments')
export class ExperimentsController {
  constructor(
    private readonly experiments: StartExperiment,
    private readonly stopper: StopExperiment,
  ) {}

  @Get(':id')
  @ApiOperation({
    summary:
      'A hedging experiment: its design (fixed when it started), status, who decided, and the pauses of hedging dispatch recorded (rule, window figures at start and end, thresholds). Role: operator or finance',
  })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator', 'finance')
  get(@Param('id') id: string) {
    return this.experiments.get(id);
  }

  @Get(':id/report')
  @ApiOperation({
    summary:
      'The experiment report: per cohort eligible actions, on-time valid answers, settled cost (with the per-attempt overhead) and unresolved exposure apart; the on-time rate difference and the incremental cost per additional on-time answer with 95 % seeded-bootstrap intervals; the verdict; the pauses of hedging (rule that tripped, the window figures at start and end, thresholds, window size) and the actions dispatched while paused per cohort (counted in their assigned cohort). Money in integer micro-USD strings. Role: operator or finance',
  })
  @ApiProduces('application/json', 'text/csv')
  @ApiQuery({ name: 'format', required: false, enum: ['json', 'csv'] })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator', 'finance')
  async report(@Param('id') id: string, @Res({ passthrough: true }) res: Response, @Query('format') format?: string) {
    if (format !== undefined && format !== 'json' && format !== 'csv') {
      throw new DomainError('invalid_request', 'format must be json or csv', 'format');
    }
    const wire = await this.experiments.report(id);
    if (format !== 'csv') return wire;
    res.setHeader('content-type', 'text/csv; charset=utf-8');
    return experimentReportCsv(wire);
  }

  @Post(':id/stop')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Stop an experiment at once (it only lowers spend); stopping a stopped one answers it unchanged. Role: operator',
  })
  @ApiBody({ schema: bodySchema(stopExperimentBody) })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator')
  stop(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.stopper.execute(op, id, parseBody(stopExperimentBody, body));
  }
}
