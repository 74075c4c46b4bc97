import { Inject, Injectable } from '@nestjs/common';
import type { UsageSettledV1 } from '@gateway/contracts';
import { AuditRepository, SettledEventFact } from '@gateway/db';
import { Clock, InjectClock } from '@gateway/service-kit';

export interface RecordSettledPorts {
  audit: Pick<AuditRepository, 'recordSettled'>;
}

/** What the audit keeps of a settled event: ids, the workload × route it names, its cost and time. */
export function settledEventFact(e: UsageSettledV1): SettledEventFact {
  return {
    eventId: e.event_id,
    attemptId: e.attempt_id,
    actionId: e.action_id,
    workloadId: e.workload_id ?? '',
    routeId: e.route_id ?? '',
    costMicrousd: BigInt(e.cost_microusd),
    settledAt: new Date(e.settled_at),
  };
}

/**
 * Keeps each `gateway.usage.settled.v1` event finance received, as the weekly audit sums it: a
 * batch is one insert keyed by event id, so a redelivered event (or batch) adds nothing. No
 * `processed_event` row: the fact's own key is the record that the event was seen.
 */
@Injectable()
export class RecordSettled {
  constructor(
    @Inject(AuditRepository) private readonly audit: RecordSettledPorts['audit'],
    @InjectClock() private readonly clock: Clock,
  ) {}

  /** Returns how many events were new. */
  async execute(events: readonly UsageSettledV1[]): Promise<number> {
    return this.audit.recordSettled(events.map(settledEventFact), this.clock.now());
  }
}
