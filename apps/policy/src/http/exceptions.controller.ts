import { CurrentOperator, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBody, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { DecideException } from '../usecases/decide-exception/decide-exception.usecase';
import { approveExceptionBody, rejectExceptionBody } from '../usecases/decide-exception/decide-exception.command';
import { GetException } from '../usecases/get-exception/get-exception.usecase';
import { parseBody } from '../usecases/input';
import { ListExceptions } from '../usecases/list-exceptions/list-exceptions.usecase';
import { RequestException } from '../usecases/request-exception/request-exception.usecase';
import { requestExceptionBody } from '../usecases/request-exception/request-exception.command';
import { RevokeException } from '../usecases/revoke-exception/revoke-exception.usecase';
import { revokeExceptionBody } from '../usecases/revoke-exception/revoke-exception.command';
import { bodySchema } from './openapi';

@ApiTags('exceptions')
@OperatorApi()
@ApiResponse({ status: 400, description: 'invalid_request: the body failed validation (param names the field)' })
@Controller('exceptions')
export class ExceptionsController {
  constructor(
    private readonly requestException: RequestException,
    private readonly decide: DecideException,
    private readonly revokeException: RevokeException,
    private readonly listExceptions: ListExceptions,
    private readonly getException: GetException,
  ) {}

  @Post()
  @ApiOperation({
    summary:
      'Request a time-boxed candidate exception (expires within 90 days) with its evidence (outcome, expected_requests, typical_input_tokens); ' +
      'the projected cost at the prices in force is stored with it; status requested. Role: operator',
  })
  @ApiBody({ schema: bodySchema(requestExceptionBody) })
  @Roles('operator')
  request(@CurrentOperator() op: Operator, @Body() body: unknown) {
    return this.requestException.execute(op, parseBody(requestExceptionBody, body));
  }

  @Get()
  @ApiOperation({
    summary: 'Exceptions, newest first, with effective status (an active one past expiry reads expired). Role: operator or approver',
  })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiQuery({ name: 'limit', required: false })
  @Roles('operator', 'approver')
  list(@Query('workload_id') workloadId?: string, @Query('limit') limit?: string) {
    return this.listExceptions.execute({ workloadId: workloadId || null, limit: limit ? Number(limit) : 100 });
  }

  @Get(':id')
  @ApiOperation({ summary: 'One exception with its audit trail. Role: operator or approver' })
  @ApiResponse({ status: 404, description: 'not_found' })
  @Roles('operator', 'approver')
  get(@Param('id') id: string) {
    return this.getException.execute(id);
  }

  @Post(':id/approve')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Approve a requested exception (requested → active); the projected cost is recomputed at the prices in force, and override_reason ' +
      'is required when it exceeds the budget. Role: approver, not the requester',
  })
  @ApiBody({ schema: bodySchema(approveExceptionBody), required: false })
  @ApiResponse({ status: 403, description: 'self_approval' })
  @ApiResponse({
    status: 409,
    description: 'invalid_transition / exception_expired / concurrent_change / projection_exceeds_budget (send override_reason)',
  })
  @Roles('approver')
  approve(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.decide.execute(op, id, { decision: 'approve', ...parseBody(approveExceptionBody, body ?? {}) });
  }

  @Post(':id/reject')
  @HttpCode(200)
  @ApiOperation({ summary: 'Reject a requested exception (reason required). Role: approver, not the requester' })
  @ApiBody({ schema: bodySchema(rejectExceptionBody) })
  @ApiResponse({ status: 403, description: 'self_approval' })
  @ApiResponse({ status: 409, description: 'invalid_transition / exception_expired / concurrent_change' })
  @Roles('approver')
  reject(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.decide.execute(op, id, { decision: 'reject', ...parseBody(rejectExceptionBody, body) });
  }

  @Post(':id/revoke')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Revoke an active exception (reason required); admission stops honouring it on the next request. Role: operator or approver',
  })
  @ApiBody({ schema: bodySchema(revokeExceptionBody) })
  @ApiResponse({ status: 409, description: 'invalid_transition / exception_expired / concurrent_change' })
  @Roles('operator', 'approver')
  revoke(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.revokeException.execute(op, id, parseBody(revokeExceptionBody, body));
  }
}
