import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { addUtcDays, utcDayOf } from '@gateway/domain';
import { Clock, InjectClock, InjectLogger, PeriodicJob, ScheduledJob } from '@gateway/service-kit';
import { CONTROLS_CONFIG, ControlsConfig } from '../reconciliation.config';
import { RunDailyControls } from '../usecases/run-daily-controls/run-daily-controls.usecase';

/**
 * Runs yesterday's daily controls every CONTROLS_RUN_MS (default hourly): the run is idempotent
 * (one alert per workload × route × day × kind), so running it again only catches decisions that
 * arrived late; instances need no coordination. 0 disables the timer (tests call the use case).
 */
@Injectable()
export class DailyControlsScheduler extends ScheduledJob {
  constructor(
    run: RunDailyControls,
    @Inject(CONTROLS_CONFIG) config: ControlsConfig,
    @InjectLogger() log: Logger,
    @InjectClock() clock: Clock,
  ) {
    // an interval of 0 never starts
    super(
      new PeriodicJob(
        config.runIntervalMs,
        async () => {
          const r = await run.execute(addUtcDays(utcDayOf(clock.now()), -1), clock.now());
          if (r.added.length > 0) log.info({ day: r.day, alerts: r.added.length }, 'daily controls raised alerts');
          return false;
        },
        (err) => log.error({ error: err.message }, 'daily controls failed'),
      ),
    );
  }
}
