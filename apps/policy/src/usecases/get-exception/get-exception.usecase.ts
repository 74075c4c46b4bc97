import { Inject, Injectable } from '@nestjs/common';
import { ExceptionRepository } from '@gateway/db';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ExceptionStore } from '../../ports';
import { exceptionJson } from '../views';

/** One exception with its full audit trail (who, when, why, from → to). */
@Injectable()
export class GetException {
  constructor(
    @Inject(ExceptionRepository) private readonly exceptions: ExceptionStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(exceptionId: string) {
    const ex = await this.exceptions.findById(exceptionId);
    if (!ex) throw new PolicyError('not_found', `exception ${exceptionId} not found`);
    return exceptionJson(ex, this.clock.now(), await this.exceptions.eventsOf(exceptionId));
  }
}
