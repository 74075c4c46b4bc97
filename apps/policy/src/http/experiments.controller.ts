import { CurrentOperator, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { Body, Controller, Get, HttpCode, Param, Post } from '@nestjs/common';
import { ApiBody, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
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
  @ApiOperation({ summary: 'A hedging experiment: its design (fixed when it started), status and who decided. Role: operator or finance' })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator', 'finance')
  get(@Param('id') id: string) {
    return this.experiments.get(id);
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
