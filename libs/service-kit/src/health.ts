import { Controller, Get } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { Database } from '@gateway/db';
import { KafkaBus } from '@gateway/messaging';

/**
 * /health (readiness) checks what every service needs: its Postgres, its Kafka connection, and
 * that each of its consumers is consuming: joined, not crashed, and fetching or heartbeating
 * within its stall window. A consumer that died while the broker is fine is not healthy.
 */
@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly db: Database,
    private readonly bus: KafkaBus,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([
      async () => {
        const ind = this.indicators.check('postgres');
        return (await this.db.ping()) ? ind.up() : ind.down({ message: 'postgres unreachable' });
      },
      async () => {
        const ind = this.indicators.check('kafka');
        return (await this.bus.healthy()) ? ind.up() : ind.down({ message: 'kafka unreachable' });
      },
      () => {
        const ind = this.indicators.check('kafka_consumers');
        const consumers = this.bus.consumerStatus().map((c) => ({
          group: c.groupId,
          topic: c.topic,
          state: c.state,
          consuming: c.consuming,
          last_activity_at: c.lastActivityAt,
          restarts: c.restarts,
          last_error: c.lastError,
        }));
        return consumers.every((c) => c.consuming)
          ? ind.up({ consumers })
          : ind.down({ message: 'a consumer is not consuming', consumers });
      },
    ]);
  }
}
