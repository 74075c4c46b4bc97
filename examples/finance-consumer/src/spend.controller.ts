import { BadRequestException, Controller, Get, Query } from '@nestjs/common';
import { SpendStore } from './spend.store';
import { calendarDay } from './spend-row';

@Controller()
export class SpendController {
  constructor(private readonly store: SpendStore) {}

  /** `GET /spend?day=YYYY-MM-DD`: spend per workload on that UTC day, in integer micro-USD strings. */
  @Get('spend')
  async spend(@Query('day') dayText?: string) {
    const day = calendarDay(dayText);
    if (!day) throw new BadRequestException('day must be a calendar day as YYYY-MM-DD (UTC)');
    const workloads = await this.store.spendOn(day);
    const total = workloads.reduce((sum, w) => sum + BigInt(w.cost_microusd), 0n);
    return { day, total_microusd: total.toString(), workloads };
  }

  /** 200 while the spend database answers. */
  @Get('health')
  async health() {
    await this.store.ping();
    return { status: 'ok' };
  }
}
