import { Controller, Get } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { Database } from '@gateway/db';
import { KafkaBus } from '@gateway/messaging';
import { awaitAtMost, TIMED_OUT } from './clock';

/** How long /health waits for Postgres or the broker to answer before it calls them down. */
export const HEALTH_CHECK_TIMEOUT_MS = 2000;

/**
 * /health (readiness) checks what every service needs: its Postgres, its Kafka connection, and
 * that each of its consumers is consuming: joined, not crashed, and fetching or heartbeating
 * within its stall window. A consumer that died while the broker is fine is not healthy. A
 * dependency that does not answer within HEALTH_CHECK_TIMEOUT_MS is down: a stalled Postgres
 * (its disk or host hung, packets dropped) must make the probe answer 503, not hang it.
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
        const ok = await awaitAtMost(
          this.db.ping().catch(() => false),
          HEALTH_CHECK_TIMEOUT_MS,
        );
        return ok === true ? ind.up() : ind.down({ message: ok === TIMED_OUT ? notAnswering('postgres') : 'postgres unreachable' });
      },
      async () => {
        const ind = this.indicators.check('kafka');
        const ok = await awaitAtMost(
          this.bus.healthy().catch(() => false),
          HEALTH_CHECK_TIMEOUT_MS,
        );
        return ok === true ? ind.up() : ind.down({ message: ok === TIMED_OUT ? notAnswering('kafka') : 'kafka unreachable' });
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

function notAnswering(what: string): string {
  return `${what} did not answer within ${HEALTH_CHECK_TIMEOUT_MS} ms`;
}
