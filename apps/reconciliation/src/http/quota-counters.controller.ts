import { Controller, Get, Query } from '@nestjs/common';
import { ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { Clock, InjectClock, OperatorApi, Roles } from '@gateway/service-kit';
import { ReconcileInstanceCounters } from '../usecases/reconcile-instance-counters/reconcile-instance-counters.usecase';

@ApiTags('quota-counters')
@OperatorApi()
@Controller('quota-counters')
export class QuotaCountersController {
  constructor(
    private readonly reconcile: ReconcileInstanceCounters,
    @InjectClock() private readonly clock: Clock,
  ) {}

  @Get('instance-scoped')
  @ApiOperation({
    summary:
      'Token rates enforced per gateway instance, summed per scope and window into the organisation-wide figure, with what no instance counted and the excess over the limit. Roles: operator, finance',
  })
  @ApiQuery({ name: 'since', required: false, description: 'ISO-8601 start (default: 10 minutes ago; at most 24 hours)' })
  @Roles('operator', 'finance')
  get(@Query('since') since?: string) {
    return this.reconcile.execute(this.clock.now(), { since });
  }
}
