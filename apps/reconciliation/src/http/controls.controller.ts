import { Body, Controller, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiBody, ApiOkResponse, ApiOperation, ApiParam, ApiQuery, ApiTags } from '@nestjs/swagger';
import { Clock, InjectClock, OperatorApi, Roles } from '@gateway/service-kit';
import { ListControlAlerts } from '../usecases/run-daily-controls/list-control-alerts.usecase';
import { alertDto, controlsDay, RunDailyControls } from '../usecases/run-daily-controls/run-daily-controls.usecase';

@ApiTags('controls')
@OperatorApi()
@Controller('controls')
export class ControlsController {
  constructor(
    private readonly run: RunDailyControls,
    private readonly alerts: ListControlAlerts,
    @InjectClock() private readonly clock: Clock,
  ) {}

  @Get('alerts')
  @ApiOperation({ summary: 'Daily-control alerts (sanitised: ids, counts, shares, codes), newest day first. Roles: operator, finance' })
  @ApiQuery({ name: 'day', required: false, description: 'UTC day YYYY-MM-DD' })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiOkResponse({ schema: { type: 'object', properties: { alerts: { type: 'array', items: { type: 'object' } } } } })
  @Roles('operator', 'finance')
  list(@Query('day') day?: string, @Query('workload_id') workloadId?: string) {
    return this.alerts.execute({ day, workload_id: workloadId }, this.clock.now());
  }

  @Get('days/:day')
  @ApiOperation({
    summary:
      "One UTC day's controls per workload × route: requested/effective counts, refusals by code, output tokens per request, " +
      'exception usage, unresolved exposure by age, and the alerts recorded for the day. Roles: operator, finance',
  })
  @ApiParam({ name: 'day', description: 'UTC day YYYY-MM-DD (today at the latest: a partial day)' })
  @ApiQuery({ name: 'workload_id', required: false })
  @ApiOkResponse({ schema: { type: 'object' } })
  @Roles('operator', 'finance')
  day(@Param('day') day: string, @Query('workload_id') workloadId?: string) {
    return this.run.report(controlsDay(day, this.clock.now()), workloadId);
  }

  @Post('run')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'Run the daily controls for a UTC day (default yesterday; today runs the partial day); idempotent: a re-run adds no second alert of a kind. Role: operator',
  })
  @ApiBody({ schema: { type: 'object', properties: { day: { type: 'string', example: '2026-12-01' } } } })
  @Roles('operator')
  async runDay(@Body() body: unknown) {
    const now = this.clock.now();
    const day = controlsDay(body && typeof body === 'object' ? (body as { day?: unknown }).day : undefined, now);
    const r = await this.run.execute(day, now);
    return { day: r.day, findings: r.findings, added: r.added.map(alertDto) };
  }
}
