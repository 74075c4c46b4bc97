import { Inject, Injectable } from '@nestjs/common';
import { ExceptionRepository } from '@gateway/db';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ExceptionStore } from '../../ports';
import { applyExceptionEvent } from '../exception-transition';
import { exceptionJson } from '../views';
import { RevokeExceptionCommand } from './revoke-exception.command';

/**
 * Ends an active exception before its expiry. Admission reads exceptions from Postgres on every
 * request, so the very next request no longer gets the raised limit.
 */
@Injectable()
export class RevokeException {
  constructor(
    @Inject(ExceptionRepository) private readonly exceptions: ExceptionStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, exceptionId: string, cmd: RevokeExceptionCommand) {
    const now = this.clock.now();
    const ex = await this.exceptions.findById(exceptionId);
    if (!ex) throw new PolicyError('not_found', `exception ${exceptionId} not found`);
    await applyExceptionEvent(this.exceptions, ex, 'revoke', op.subject, cmd.reason, now);
    const revoked = await this.exceptions.findById(exceptionId);
    if (!revoked) throw new Error(`exception ${exceptionId} vanished`);
    return exceptionJson(revoked, now, await this.exceptions.eventsOf(exceptionId));
  }
}
