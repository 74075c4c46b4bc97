import { Controller, Get, Query, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import { AUDIT_MAX_DAYS } from '@gateway/contracts';
import { auditReportCsv } from '@gateway/domain';
import { OperatorApi, Roles } from '@gateway/service-kit';
import { RunAudit } from '../usecases/run-audit/run-audit.usecase';

@ApiTags('audit')
@OperatorApi()
@Controller('audit')
export class AuditController {
  constructor(private readonly run: RunAudit) {}

  @Get()
  @ApiOperation({
    summary:
      'The weekly audit for the UTC days [from, to]: per workload × route, reservations made (by state now), ledger total, the sum of ' +
      'gateway.usage.settled.v1 as reconciliation received it, imported provider-export totals, requested / effective / returned counts ' +
      'and output tokens per request; and every disagreeing item (event without ledger row, ledger row without event, cost differences, ' +
      'export lines unmatched or priced otherwise, reservations unresolved) listed one by one with its ids and both sides, never netted. ' +
      `Money in integer micro-USD strings. At most ${AUDIT_MAX_DAYS} days. Roles: operator, finance`,
  })
  @ApiProduces('application/json', 'text/csv')
  @ApiQuery({ name: 'from', required: true, description: 'first UTC day YYYY-MM-DD' })
  @ApiQuery({ name: 'to', required: true, description: 'last UTC day YYYY-MM-DD (inclusive)' })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiQuery({ name: 'format', required: false, enum: ['json', 'csv'] })
  @ApiOkResponse({ schema: { type: 'object' } })
  @Roles('operator', 'finance')
  async audit(@Query() query: Record<string, unknown>, @Res({ passthrough: true }) res: Response) {
    const { report, format } = await this.run.execute(query);
    if (format === 'json') return report;
    res.setHeader('content-type', 'text/csv; charset=utf-8');
    return auditReportCsv(report);
  }
}
