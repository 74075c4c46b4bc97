import { Inject, Injectable } from '@nestjs/common';
import { ExceptionRepository } from '@gateway/db';
import { canApprove } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import { Clock, CLOCK } from '@gateway/service-kit';
import { PolicyError } from '../../policy.errors';
import type { ExceptionStore } from '../../ports';
import { applyExceptionEvent } from '../exception-transition';
import { exceptionJson } from '../views';
import { DecideExceptionCommand } from './decide-exception.command';

/**
 * Four-eyes decision on a requested exception: the approver must hold the approver role and must
 * not be the requester (for rejections too, so nobody decides their own request).
 */
@Injectable()
export class DecideException {
  constructor(
    @Inject(ExceptionRepository) private readonly exceptions: ExceptionStore,
    @Inject(CLOCK) private readonly clock: Clock,
  ) {}

  async execute(op: Operator, exceptionId: string, cmd: DecideExceptionCommand) {
    const now = this.clock.now();
    const ex = await this.exceptions.findById(exceptionId);
    if (!ex) throw new PolicyError('not_found', `exception ${exceptionId} not found`);
    const allowed = canApprove({ requestedBy: ex.requestedBy, approver: op.subject, approverRoles: op.roles });
    if (!allowed.ok) {
      switch (allowed.reason) {
        case 'self_approval':
          throw new PolicyError(
            'self_approval',
            `${op.subject} requested exception ${exceptionId} and cannot ${cmd.decision} it; another approver must decide`,
          );
        case 'not_an_approver':
          throw new PolicyError('not_an_approver', `deciding an exception requires the approver role`);
        default: {
          const unreachable: never = allowed.reason;
          throw new Error(`Unhandled approval denial: ${String(unreachable)}`);
        }
      }
    }
    const reason = cmd.reason ?? (cmd.decision === 'approve' ? 'approved' : 'rejected');
    await applyExceptionEvent(this.exceptions, ex, cmd.decision, op.subject, reason, now);
    return this.view(exceptionId, now);
  }

  private async view(id: string, now: Date) {
    const ex = await this.exceptions.findById(id);
    if (!ex) throw new Error(`exception ${id} vanished`);
    return exceptionJson(ex, now, await this.exceptions.eventsOf(id));
  }
}
