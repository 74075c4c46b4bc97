import { CurrentOperator, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBody, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { approveExceptionBody, rejectExceptionBody } from '../usecases/decide-exception/decide-exception.command';
import { DecideChangeRequest } from '../usecases/decide-change-request/decide-change-request.usecase';
import { parseBody, parseValue } from '../usecases/input';
import { changeRequestListQuery } from '../usecases/list-change-requests/list-change-requests.query';
import { ListChangeRequests } from '../usecases/list-change-requests/list-change-requests.usecase';
import { bodySchema } from './openapi';

@ApiTags('change-requests')
@OperatorApi()
@ApiResponse({ status: 400, description: 'invalid_request: the body failed validation (param names the field)' })
@Controller('change-requests')
export class ChangeRequestsController {
  constructor(
    private readonly listChanges: ListChangeRequests,
    private readonly decide: DecideChangeRequest,
  ) {}

  @Get()
  @ApiOperation({
    summary:
      'Changes that raise spend (workload limits, lower prices, new upstreams), newest first, with their decision. Role: operator or approver',
  })
  @ApiQuery({ name: 'status', required: false, enum: ['pending', 'approved', 'rejected'] })
  @ApiQuery({ name: 'limit', required: false })
  @Roles('operator', 'approver')
  list(@Query() query: unknown) {
    return this.listChanges.execute(parseValue(changeRequestListQuery, query));
  }

  @Post(':id/approve')
  @HttpCode(200)
  @ApiOperation({ summary: 'Approve a pending change: it is applied in the same transaction. Role: approver, not the requester' })
  @ApiBody({ schema: bodySchema(approveExceptionBody), required: false })
  @ApiResponse({ status: 403, description: 'self_approval / not_an_approver' })
  @ApiResponse({ status: 409, description: 'invalid_transition (already decided)' })
  @Roles('approver')
  approve(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.decide.execute(op, id, { decision: 'approve', ...parseBody(approveExceptionBody, body ?? {}) });
  }

  @Post(':id/reject')
  @HttpCode(200)
  @ApiOperation({ summary: 'Reject a pending change (reason required); nothing is applied. Role: approver, not the requester' })
  @ApiBody({ schema: bodySchema(rejectExceptionBody) })
  @ApiResponse({ status: 403, description: 'self_approval / not_an_approver' })
  @ApiResponse({ status: 409, description: 'invalid_transition (already decided)' })
  @Roles('approver')
  reject(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.decide.execute(op, id, { decision: 'reject', ...parseBody(rejectExceptionBody, body) });
  }
}
