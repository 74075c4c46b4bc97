import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, UseFilters } from '@nestjs/common';
import { ApiBearerAuth, ApiBody, ApiOkResponse, ApiOperation, ApiParam, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { OperatorAuth } from '@gateway/service-kit';
import { importUsageBody, importUsageCommand } from '../usecases/import-usage/import-usage.command';
import { ImportUsage } from '../usecases/import-usage/import-usage.usecase';
import { ListCases } from '../usecases/list-cases/list-cases.usecase';
import { releaseCaseBody, releaseCaseCommand } from '../usecases/release-case/release-case.command';
import { ReleaseCase } from '../usecases/release-case/release-case.usecase';
import { caseSchema, schemaOf } from './openapi';
import { ReconciliationErrorFilter } from './reconciliation-error.filter';

@ApiTags('cases')
@ApiBearerAuth()
@UseFilters(ReconciliationErrorFilter)
@Controller('cases')
export class CasesController {
  constructor(
    private readonly auth: OperatorAuth,
    private readonly listCases: ListCases,
    private readonly importUsage: ImportUsage,
    private readonly releaseCase: ReleaseCase,
  ) {}

  @Get()
  @ApiOperation({
    summary: 'Reconciliation cases, newest first (sanitised: ids, reasons, counts, integer micro-USD strings). Roles: operator, finance',
  })
  @ApiQuery({ name: 'status', required: false, enum: ['open', 'resolved', 'all'], description: 'default open' })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiQuery({ name: 'limit', required: false, description: '1 to 1000, default 100' })
  @ApiOkResponse({ schema: { type: 'object', properties: { cases: { type: 'array', items: caseSchema } } } })
  async list(
    @Req() req: Request,
    @Query('status') status?: string,
    @Query('workload_id') workloadId?: string,
    @Query('limit') limit?: string,
  ) {
    await this.auth.require(req, ['operator', 'finance']);
    return this.listCases.execute({ status, workload_id: workloadId, limit });
  }

  @Post(':id/import-usage')
  @HttpCode(200)
  @ApiOperation({
    summary:
      "Settle the case's attempt from provider usage evidence (usage_source provider_export), priced with the reservation's price revision. Roles: operator, finance",
  })
  @ApiParam({ name: 'id', description: 'case id' })
  @ApiBody({ schema: schemaOf(importUsageBody) })
  async import(@Req() req: Request, @Param('id') id: string, @Body() body: unknown) {
    const op = await this.auth.require(req, ['operator', 'finance']);
    return this.importUsage.execute(importUsageCommand(id, body, op.subject), new Date());
  }

  @Post(':id/release')
  @HttpCode(200)
  @ApiOperation({
    summary:
      "Release the case's unresolved exposure without usage evidence (usage_source operator); the reason is required. Role: operator",
  })
  @ApiParam({ name: 'id', description: 'case id' })
  @ApiBody({ schema: schemaOf(releaseCaseBody) })
  async release(@Req() req: Request, @Param('id') id: string, @Body() body: unknown) {
    const op = await this.auth.require(req, ['operator']);
    return this.releaseCase.execute(releaseCaseCommand(id, body, op.subject), new Date());
  }
}
