import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { ExceptionRepository } from '@gateway/db';
import { exceptionMachine } from '@gateway/domain';
import { InjectLogger } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import type { ExceptionStore } from '../../ports';

export const EXPIRY_ACTOR = 'system:expiry';
const BATCH = 200;

/**
 * Records expiry in the audit trail. It is bookkeeping, not enforcement: admission already
 * ignores an exception once expires_at has passed, whether or not this has run.
 */
@Injectable()
export class ExpireExceptions {
  constructor(
    @Inject(ExceptionRepository) private readonly exceptions: ExceptionStore,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {}

  async execute(): Promise<number> {
    const now = this.clock.now();
    let expired = 0;
    for (const ex of await this.exceptions.dueForExpiry(now, BATCH)) {
      const to = exceptionMachine.transition(ex.status, 'expire');
      // A lost race (someone revoked or the sweep ran elsewhere) is fine: the row moved on.
      const applied = await this.exceptions.transition({
        id: ex.id,
        from: ex.status,
        to,
        event: 'expire',
        actor: EXPIRY_ACTOR,
        reason: `expired at ${ex.expiresAt.toISOString()}`,
        now,
        expiry: 'expired',
      });
      if (applied) expired++;
    }
    if (expired > 0) this.log.info({ expired }, 'exceptions expired');
    return expired;
  }
}
