import { Inject, Injectable } from '@nestjs/common';
import { ExceptionRepository } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import { Clock, CLOCK } from '@gateway/service-kit';
import type { ExceptionStore } from '../../ports';
import { exceptionJson } from '../views';

/** Exceptions, newest first, with their effective status (an active one past expiry reads `expired`). */
@Injectable()
export class ListExceptions {
  constructor(
    @Inject(ExceptionRepository) private readonly exceptions: ExceptionStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(q: { workloadId: string | null; limit: number }) {
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > 1000)
      throw new DomainError('invalid_request', 'limit must be an integer from 1 to 1000', 'limit');
    const now = this.clock.now();
    const rows = await this.exceptions.list(q);
    return { exceptions: rows.map((e) => exceptionJson(e, now)) };
  }
}
