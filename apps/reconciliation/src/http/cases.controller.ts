import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBody, ApiOkResponse, ApiOperation, ApiParam, ApiQuery, ApiTags } from '@nestjs/swagger';
import { Clock, CurrentOperator, InjectClock, Operator, OperatorApi, Roles } from '@gateway/service-kit';
import { importUsageBody, importUsageCommand } from '../usecases/import-usage/import-usage.command';
import { ImportUsage } from '../usecases/import-usage/import-usage.usecase';
import { ListCases } from '../usecases/list-cases/list-cases.usecase';
import { releaseCaseBody, releaseCaseCommand } from '../usecases/release-case/release-case.command';
import { ReleaseCase } from '../usecases/release-case/release-case.usecase';
import { caseSchema, schemaOf } from './openapi';

@ApiTags('cases')
@OperatorApi()
@Controller('cases')
export class CasesController {
  constructor(
    private readonly listCases: ListCases,
    private readonly importUsage: ImportUsage,
    private readonly releaseCase: ReleaseCase,
    @InjectClock() private readonly clock: Clock,
  ) {}

  @Get()
  @ApiOperation({
    summary: 'Reconciliation cases, newest first (sanitised: ids, reasons, counts, integer micro-USD strings). Roles: operator, finance',
  })
  @ApiQuery({ name: 'status', required: false, enum: ['open', 'resolved', 'all'], description: 'default open' })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiQuery({ name: 'limit', required: false, description: '1 to 1000, default 100' })
  @ApiOkResponse({ schema: { type: 'object', properties: { cases: { type: 'array', items: caseSchema } } } })
  @Roles('operator', 'finance')
  list(@Query('status') status?: string, @Query('workload_id') workloadId?: string, @Query('limit') limit?: string) {
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
  @Roles('operator', 'finance')
  import(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.importUsage.execute(importUsageCommand(id, body, op.subject), this.clock.now());
  }

  @Post(':id/release')
  @HttpCode(200)
  @ApiOperation({
    summary:
      "Release the case's unresolved exposure without usage evidence (usage_source operator); the reason is required. Role: operator",
  })
  @ApiParam({ name: 'id', description: 'case id' })
  @ApiBody({ schema: schemaOf(releaseCaseBody) })
  @Roles('operator')
  release(@CurrentOperator() op: Operator, @Param('id') id: string, @Body() body: unknown) {
    return this.releaseCase.execute(releaseCaseCommand(id, body, op.subject), this.clock.now());
  }
}
