import { OperatorAuth } from '@gateway/service-kit';
import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, UseFilters } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOperation, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
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

import { PolicyErrorFilter } from './policy-error';

@ApiTags('exceptions')
@ApiBearerAuth()
@ApiResponse({ status: 400, description: 'invalid_request: the body failed validation (param names the field)' })
@ApiResponse({ status: 401, description: 'unauthorized: missing or unknown operator token' })
@ApiResponse({ status: 403, description: 'forbidden: wrong role, or a workload key' })
@UseFilters(PolicyErrorFilter)
@Controller('exceptions')
export class ExceptionsController {
  constructor(
    private readonly auth: OperatorAuth,
    private readonly requestException: RequestException,
    private readonly decide: DecideException,
    private readonly revokeException: RevokeException,
    private readonly listExceptions: ListExceptions,
    private readonly getException: GetException,
  ) {}

  @Post()
  @ApiOperation({ summary: 'Request a time-boxed candidate exception (expires within 90 days); status requested. Role: operator' })
  @ApiBody({ schema: bodySchema(requestExceptionBody) })
  async request(@Req() req: Request, @Body() body: unknown) {
    const op = await this.auth.require(req, ['operator']);
    return this.requestException.execute(op, parseBody(requestExceptionBody, body));
  }

  @Get()
  @ApiOperation({
    summary: 'Exceptions, newest first, with effective status (an active one past expiry reads expired). Role: operator or approver',
  })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiQuery({ name: 'limit', required: false })
  async list(@Req() req: Request, @Query('workload_id') workloadId?: string, @Query('limit') limit?: string) {
    await this.auth.require(req, ['operator', 'approver']);
    return this.listExceptions.execute({ workloadId: workloadId || null, limit: limit ? Number(limit) : 100 });
  }

  @Get(':id')
  @ApiOperation({ summary: 'One exception with its audit trail. Role: operator or approver' })
  @ApiResponse({ status: 404, description: 'not_found' })
  async get(@Req() req: Request, @Param('id') id: string) {
    await this.auth.require(req, ['operator', 'approver']);
    return this.getException.execute(id);
  }

  @Post(':id/approve')
  @HttpCode(200)
  @ApiOperation({ summary: 'Approve a requested exception (requested → active). Role: approver, not the requester' })
  @ApiBody({ schema: bodySchema(approveExceptionBody), required: false })
  @ApiResponse({ status: 403, description: 'self_approval' })
  @ApiResponse({ status: 409, description: 'invalid_transition / exception_expired / concurrent_change' })
  async approve(@Req() req: Request, @Param('id') id: string, @Body() body: unknown) {
    const op = await this.auth.require(req, ['approver']);
    return this.decide.execute(op, id, { decision: 'approve', ...parseBody(approveExceptionBody, body ?? {}) });
  }

  @Post(':id/reject')
  @HttpCode(200)
  @ApiOperation({ summary: 'Reject a requested exception (reason required). Role: approver, not the requester' })
  @ApiBody({ schema: bodySchema(rejectExceptionBody) })
  @ApiResponse({ status: 403, description: 'self_approval' })
  @ApiResponse({ status: 409, description: 'invalid_transition / exception_expired / concurrent_change' })
  async reject(@Req() req: Request, @Param('id') id: string, @Body() body: unknown) {
    const op = await this.auth.require(req, ['approver']);
    return this.decide.execute(op, id, { decision: 'reject', ...parseBody(rejectExceptionBody, body) });
  }

  @Post(':id/revoke')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Revoke an active exception (reason required); admission stops honouring it on the next request. Role: operator or approver',
  })
  @ApiBody({ schema: bodySchema(revokeExceptionBody) })
  @ApiResponse({ status: 409, description: 'invalid_transition / exception_expired / concurrent_change' })
  async revoke(@Req() req: Request, @Param('id') id: string, @Body() body: unknown) {
    const op = await this.auth.require(req, ['operator', 'approver']);
    return this.revokeException.execute(op, id, parseBody(revokeExceptionBody, body));
  }
}
