import { Controller, Get } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { Database } from '@gateway/db';
import { KafkaBus } from '@gateway/messaging';

/** /health checks the two things every service needs: its Postgres and its Kafka connection. */
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
    ]);
  }
}
