import { CurrentOperator, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { Body, Controller, Get, HttpCode, Param, Post, Put, UseInterceptors } from '@nestjs/common';
import { ApiBody, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { controlThresholdsBody } from '@gateway/contracts';
import { GetWorkload } from '../usecases/get-workload/get-workload.usecase';
import { PutControlThresholds } from '../usecases/put-control-thresholds/put-control-thresholds.usecase';
import { parseBody } from '../usecases/input';
import { IssueApiKey } from '../usecases/issue-api-key/issue-api-key.usecase';
import { PutHedgePolicy } from '../usecases/put-hedge-policy/put-hedge-policy.usecase';
import { putHedgePolicyBody } from '../usecases/put-hedge-policy/put-hedge-policy.command';
import { PutWorkload } from '../usecases/put-workload/put-workload.usecase';
import { putWorkloadBody } from '../usecases/put-workload/put-workload.command';
import { RevokeApiKey } from '../usecases/revoke-api-key/revoke-api-key.usecase';
import { startExperimentBody } from '../usecases/start-experiment/start-experiment.command';
import { StartExperiment } from '../usecases/start-experiment/start-experiment.usecase';
import { revokeApiKeyBody } from '../usecases/revoke-api-key/revoke-api-key.command';
import { bodySchema } from './openapi';
import { PendingApprovalInterceptor } from './pending-approval.interceptor';

@ApiTags('workloads')
@OperatorApi()
@ApiResponse({ status: 400, description: 'invalid_request: the body failed validation (param names the field)' })
@UseInterceptors(PendingApprovalInterceptor)
@Controller('workloads')
export class WorkloadsController {
  constructor(
    private readonly putWorkload: PutWorkload,
    private readonly getWorkload: GetWorkload,
    private readonly issueKey: IssueApiKey,
    private readonly revokeKey: RevokeApiKey,
    private readonly putHedging: PutHedgePolicy,
    private readonly experiments: StartExperiment,
    private readonly controls: PutControlThresholds,
  ) {}

  @Put(':id/controls')
  @ApiOperation({
    summary:
      "Set the workload's daily-control thresholds (absent fields take the defaults; reason required). Thresholds only decide when an " +
      'alert is raised, so no change is a spend raise: applied at once, no second operator. Role: operator',
  })
  @ApiBody({ schema: bodySchema(controlThresholdsBody) })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator')
  putControls(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.controls.execute(op, id, parseBody(controlThresholdsBody, body));
  }

  @Get(':id/controls')
  @ApiOperation({ summary: "The workload's daily-control thresholds (the defaults when none were set). Roles: operator, finance" })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator', 'finance')
  getControls(@Param('id') id: string) {
    return this.controls.get(id);
  }

  @Put(':id')
  @ApiOperation({ summary: 'Create or replace a workload policy (money as integer micro-USD). Role: operator' })
  @ApiBody({ schema: bodySchema(putWorkloadBody) })
  @ApiResponse({
    status: 202,
    description: 'the policy raises spend: a pending change request for a second operator (GET /change-requests)',
  })
  @Roles('operator')
  put(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.putWorkload.execute(op, id, parseBody(putWorkloadBody, body));
  }

  @Get(':id')
  @ApiOperation({ summary: 'A workload policy and its keys (prefix and status only). Role: operator' })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator')
  get(@Param('id') id: string) {
    return this.getWorkload.execute(id);
  }

  @Put(':id/hedging')
  @HttpCode(201)
  @ApiOperation({
    summary:
      'Add a hedge policy revision (hedges, retries, fallbacks) for the workload or, with route_id, one of its routes. Role: operator',
  })
  @ApiBody({ schema: bodySchema(putHedgePolicyBody) })
  @ApiResponse({ status: 201, description: 'the revision only lowers what extra attempts may spend: in force at once' })
  @ApiResponse({
    status: 202,
    description: 'the revision raises spend: a pending change request for a second operator (GET /change-requests)',
  })
  @ApiResponse({ status: 404, description: 'not_found: no such workload or route' })
  @Roles('operator')
  putHedgePolicy(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.putHedging.execute(op, id, parseBody(putHedgePolicyBody, body));
  }

  @Get(':id/hedging')
  @ApiOperation({ summary: 'The hedge policies in force (workload-wide, then per route) and every revision. Role: operator' })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator')
  getHedgePolicy(@Param('id') id: string) {
    return this.putHedging.get(id);
  }

  @Post(':id/experiments')
  @HttpCode(202)
  @ApiOperation({
    summary:
      'File a hedging experiment (randomised primary-only holdout; design fixed in advance). Always four-eyes: a second approver starts it. Role: operator',
  })
  @ApiBody({ schema: bodySchema(startExperimentBody) })
  @ApiResponse({ status: 202, description: 'the pending change request (GET /change-requests); approving it starts the experiment' })
  @ApiResponse({ status: 404, description: "not_found: no such workload, or the policy revision is not the workload's" })
  @ApiResponse({ status: 409, description: 'experiment_running: the workload already runs one; stop it first' })
  @Roles('operator')
  startExperiment(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.experiments.execute(op, id, parseBody(startExperimentBody, body));
  }

  @Get(':id/experiments')
  @ApiOperation({ summary: "The workload's hedging experiments, newest first. Role: operator" })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator')
  listExperiments(@Param('id') id: string) {
    return this.experiments.list(id);
  }

  @Post(':id/keys')
  @ApiOperation({ summary: 'Issue a workload key (gw_…); the key is in this response only, just its SHA-256 is stored. Role: operator' })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator')
  issue(@CurrentOperator() op: Operator, @Param('id') id: string) {
    return this.issueKey.execute(op, id);
  }

  @Post(':id/keys/:keyId/revoke')
  @HttpCode(200)
  @ApiOperation({ summary: 'Revoke a workload key (reason required); effective on the next admission request. Role: operator' })
  @ApiBody({ schema: bodySchema(revokeApiKeyBody) })
  @ApiResponse({ status: 409, description: 'key_already_revoked' })
  @Roles('operator')
  revoke(@CurrentOperator() op: Operator, @Param('id') id: string, @Param('keyId') keyId: string, @Body() body: unknown) {
    return this.revokeKey.execute(op, id, keyId, parseBody(revokeApiKeyBody, body));
  }
}
