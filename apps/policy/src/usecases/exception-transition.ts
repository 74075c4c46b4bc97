import type { ExceptionTransition, ExceptionView } from '@gateway/db';
import { effectiveExceptionStatus, ExceptionEvent, exceptionMachine, ExceptionStatus } from '@gateway/domain';
import { PolicyError } from '../policy.errors';
import type { ExceptionStore } from '../ports';

/**
 * Applies one operator-driven event to an exception, checked by the domain state machine against
 * the status as of `now` (an exception past its expiry is `expired`, whatever is stored), then
 * written as a compare-and-set with its audit row and policyChanged event.
 */
export async function applyExceptionEvent(
  store: ExceptionStore,
  ex: ExceptionView,
  event: Exclude<ExceptionEvent, 'expire'>,
  actor: string,
  reason: string,
  now: Date,
  approval?: ExceptionTransition['approval'],
): Promise<ExceptionStatus> {
  const { from, to } = checkExceptionEvent(ex, event, now);
  const applied = await store.transition({
    id: ex.id,
    from,
    to,
    event,
    actor,
    reason,
    now,
    expiry: 'unexpired',
    ...(approval ? { approval } : {}),
  });
  if (!applied)
    throw new PolicyError('concurrent_change', `exception ${ex.id} changed while this request was handled; reload it and try again`);
  return to;
}

/** The move `event` makes from the status as of `now`, or the 409 refusing it. */
export function checkExceptionEvent(
  ex: ExceptionView,
  event: Exclude<ExceptionEvent, 'expire'>,
  now: Date,
): { from: ExceptionStatus; to: ExceptionStatus } {
  const current = effectiveExceptionStatus(ex, now);
  if (!exceptionMachine.can(current, event)) {
    if (current === 'expired') {
      throw new PolicyError('exception_expired', `exception ${ex.id} expired at ${ex.expiresAt.toISOString()}; request a new one`);
    }
    throw new PolicyError('invalid_transition', `cannot ${event} exception ${ex.id}: it is ${current}${hint(current, event)}`);
  }
  return { from: current, to: exceptionMachine.transition(current, event) };
}

function hint(current: ExceptionStatus, event: ExceptionEvent): string {
  if (current === 'requested' && event === 'revoke') return ' (a pending request is rejected, not revoked)';
  if (current === 'active' && (event === 'approve' || event === 'reject')) return ' (already approved; revoke it to end it)';
  return '';
}
