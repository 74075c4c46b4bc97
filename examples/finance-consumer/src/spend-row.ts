import type { UsageSettledV1 } from '@gateway/contracts';

/** What this app keeps of one settled attempt. */
export interface SpendRow {
  /**
   * What makes a redelivery recognisable: the attempt (the gateway settles each attempt exactly
   * once, one ledger row each), or the event id for an event without an attempt.
   */
  settlementKey: string;
  eventId: string;
  workloadId: string;
  /** UTC calendar day of `settled_at`, YYYY-MM-DD: the same day `GET /ledger?from=&to=` puts it in */
  day: string;
  costMicrousd: bigint;
}

/** Events without a workload are kept apart rather than dropped: money is never lost from the total. */
export const NO_WORKLOAD = '(none)';

export function spendRowOf(event: UsageSettledV1): SpendRow {
  return {
    settlementKey: event.attempt_id ? `attempt:${event.attempt_id}` : `event:${event.event_id}`,
    eventId: event.event_id,
    workloadId: event.workload_id ?? NO_WORKLOAD,
    day: new Date(event.settled_at).toISOString().slice(0, 10),
    costMicrousd: BigInt(event.cost_microusd),
  };
}

/** A `YYYY-MM-DD` that is a real calendar day, or null. */
export function calendarDay(text: unknown): string | null {
  if (typeof text !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(text)) return null;
  const d = new Date(`${text}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === text ? text : null;
}
