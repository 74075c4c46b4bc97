import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { ReconciliationRepository, ReconciliationStore } from '@gateway/db';
import { attemptMachine } from '@gateway/domain';
import { InjectLogger } from '@gateway/service-kit';
import { ReconciliationError } from '../../reconciliation.errors';
import { lockOpenCase, resolveHold } from '../case-resolution';
import { ReleaseCaseCommand } from './release-case.command';

export interface ReleaseCaseResult {
  case_id: string;
  status: 'resolved';
  action_id: string;
  attempt_id: string | null;
  usage_source: 'operator';
  released_microusd: string;
  resolved_by: string;
  resolution: string;
  reservation_status: string | null;
}

/**
 * An operator decides a case without provider evidence: its unresolved exposure is released
 * (nothing is settled and no ledger row is written, since no usage was established), the attempt
 * ends `settled` with usage_source `operator` and its token counts left unknown, and the case
 * records the reason and who decided.
 */
@Injectable()
export class ReleaseCase {
  constructor(
    @Inject(ReconciliationRepository) private readonly store: ReconciliationStore,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {}

  async execute(cmd: ReleaseCaseCommand, now: Date): Promise<ReleaseCaseResult> {
    const result = await this.store.transaction(async (tx) => {
      const open = await lockOpenCase(this.store, tx, cmd.caseId);
      const { c, action, attempt } = open;
      if (attempt && attempt.status !== 'settled') {
        if (!attemptMachine.can(attempt.status, 'settle')) {
          throw new ReconciliationError(
            'case_not_resolvable',
            `attempt ${attempt.id} is ${attempt.status}; it cannot be released while it may still report`,
          );
        }
        await this.store.setAttemptStatus(
          tx,
          attempt.id,
          attemptMachine.transition(attempt.status, 'settle'),
          `released by ${cmd.actor} (case ${c.id}): ${cmd.reason}`,
          now,
          {
            usageSource: 'operator',
          },
        );
      }
      const plan = await resolveHold(this.store, tx, open, null, `case ${c.id} released by ${cmd.actor}: ${cmd.reason}`, now);
      const released = plan?.releasedMicrousd ?? 0n;
      await this.store.resolveCase(tx, c.id, {
        resolution: cmd.reason,
        resolvedBy: cmd.actor,
        resolvedAt: now,
        details: { usage_source: 'operator', released_microusd: released.toString() },
      });
      return {
        case_id: c.id,
        status: 'resolved' as const,
        action_id: action.id,
        attempt_id: attempt?.id ?? null,
        usage_source: 'operator' as const,
        released_microusd: released.toString(),
        resolved_by: cmd.actor,
        resolution: cmd.reason,
        reservation_status: plan?.movement.status ?? null,
      };
    });
    this.log.info(
      { case_id: result.case_id, released_microusd: result.released_microusd, resolved_by: result.resolved_by },
      'case released by operator',
    );
    return result;
  }
}
