import { Inject, Injectable } from '@nestjs/common';
import { ExperimentRepository } from '@gateway/db';
import { experimentToWire } from '@gateway/contracts';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ExperimentStore } from '../../ports';
import { parseValue, resourceId } from '../input';
import { StopExperimentCommand } from './stop-experiment.command';

/**
 * Stops an experiment at once: stopping only lowers spend (the hedged cohort's extra attempts end),
 * so one operator may do it. Stopping a stopped experiment answers it unchanged.
 */
@Injectable()
export class StopExperiment {
  constructor(
    @Inject(ExperimentRepository) private readonly experiments: Pick<ExperimentStore, 'stop'>,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, id: string, cmd: StopExperimentCommand) {
    parseValue(resourceId, id, 'id');
    const stopped = await this.experiments.stop(id, op.subject, cmd.reason, this.clock.now());
    if (!stopped) throw new PolicyError('not_found', `experiment ${id} not found`);
    return experimentToWire(stopped);
  }
}
