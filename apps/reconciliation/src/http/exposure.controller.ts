import { Controller, Get, Query, Req } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { OperatorAuth } from '@gateway/service-kit';
import { QueryExposure } from '../usecases/query-exposure/query-exposure.usecase';
import { exposureSchema } from './openapi';

@ApiTags('exposure')
@ApiBearerAuth()
@Controller('exposure')
export class ExposureController {
  constructor(
    private readonly auth: OperatorAuth,
    private readonly exposure: QueryExposure,
  ) {}

  @Get()
  @ApiOperation({
    summary:
      'Per budget account: settled, unresolved and pending micro-USD as separate labelled integers, never summed. Roles: operator, finance',
  })
  @ApiQuery({
    name: 'workload_id',
    required: false,
    description: "the workload's accounts and those of its exceptions; all accounts when omitted",
  })
  @ApiOkResponse({ schema: exposureSchema })
  async get(@Req() req: Request, @Query('workload_id') workloadId?: string) {
    await this.auth.require(req, ['operator', 'finance']);
    return this.exposure.execute({ workload_id: workloadId });
  }
}
