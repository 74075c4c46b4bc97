import { Controller, Get, Query, Res } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiProduces, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { Response } from 'express';
import type { Logger } from 'pino';
import { InjectLogger, OperatorApi, Roles } from '@gateway/service-kit';
import { ExportLedger } from '../usecases/export-ledger/export-ledger.usecase';
import { QueryLedger } from '../usecases/query-ledger/query-ledger.usecase';
import { sendExport } from './send-export';

@ApiTags('ledger')
@OperatorApi()
@Controller('ledger')
export class LedgerController {
  constructor(
    private readonly ledger: QueryLedger,
    private readonly exportLedger: ExportLedger,
    @InjectLogger() private readonly log: Logger,
  ) {}

  @Get()
  @ApiOperation({ summary: 'Ledger rows (one per upstream attempt), newest first; money in integer micro-USD strings' })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiQuery({ name: 'action_id', required: false })
  @ApiQuery({ name: 'from', required: false, description: 'ISO timestamp; settled_at >= from' })
  @ApiQuery({ name: 'to', required: false, description: 'ISO timestamp; settled_at < to' })
  @ApiQuery({ name: 'cursor', required: false, description: 'next_cursor of the previous page' })
  @ApiQuery({ name: 'limit', required: false })
  @Roles('finance', 'operator')
  list(
    @Query('workload_id') workloadId?: string,
    @Query('action_id') actionId?: string,
    @Query('from') from?: string,
    @Query('to') to?: string,
    @Query('cursor') cursor?: string,
    @Query('limit') limit?: string,
  ) {
    return this.ledger.execute({
      workloadId: workloadId ?? null,
      actionId: actionId ?? null,
      from: from ?? null,
      to: to ?? null,
      cursor: cursor ?? null,
      limit: limit ? Number(limit) : 100,
    });
  }

  @Get('export')
  @ApiOperation({
    summary:
      'The ledger over a time range as a stream, newest first: NDJSON (one GET /ledger entry per line) or CSV (header row, RFC 4180 quoting, per-category cost in four columns); money in integer micro-USD strings',
  })
  @ApiProduces('application/x-ndjson', 'text/csv')
  @ApiOkResponse({ description: 'the rows, streamed; a transfer cut short is an error, never a complete file' })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiQuery({ name: 'from', required: false, description: 'ISO timestamp; settled_at >= from' })
  @ApiQuery({ name: 'to', required: false, description: 'ISO timestamp; settled_at < to' })
  @ApiQuery({ name: 'format', required: false, enum: ['ndjson', 'csv'] })
  @Roles('finance', 'operator')
  async export(
    @Res() res: Response,
    @Query('workload_id') workloadId?: string,
    @Query('from') from?: string,
    @Query('to') to?: string,
    @Query('format') format?: string,
  ): Promise<void> {
    await sendExport(
      res,
      await this.exportLedger.execute({ workloadId: workloadId ?? null, from: from ?? null, to: to ?? null, format: format ?? null }),
      this.log,
    );
  }
}
