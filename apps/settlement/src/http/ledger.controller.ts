import { Controller, Get, Query } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { OperatorApi, Roles } from '@gateway/service-kit';
import { QueryLedger } from '../usecases/query-ledger/query-ledger.usecase';

@ApiTags('ledger')
@OperatorApi()
@Controller('ledger')
export class LedgerController {
  constructor(private readonly ledger: QueryLedger) {}

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
}
