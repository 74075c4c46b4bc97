import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { OperatorApi, Roles } from '@gateway/service-kit';
import { QueryExposure } from '../usecases/query-exposure/query-exposure.usecase';
import { exposureSchema } from './openapi';

@ApiTags('exposure')
@OperatorApi()
@Controller('exposure')
export class ExposureController {
  constructor(private readonly exposure: QueryExposure) {}

  @Get()
  @ApiOperation({
    summary:
      'Per budget account: settled, unresolved and pending micro-USD as separate labelled integers, never summed. Roles: operator, finance',
  })
  @ApiQuery({
    name: 'workload_id',
    required: false,
    description:
      "the workload's accounts, those of its exceptions and of its hedge policies' experiment allowances; all accounts when omitted",
  })
  @ApiOkResponse({ schema: exposureSchema })
  @Roles('operator', 'finance')
  get(@Query('workload_id') workloadId?: string) {
    return this.exposure.execute({ workload_id: workloadId });
  }
}
