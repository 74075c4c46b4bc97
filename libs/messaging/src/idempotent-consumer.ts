/**
 * An effect that must happen once per event: the event id is recorded in the same transaction as
 * the effect (libs/db implements `ProcessedEventStore` on the processed_event table), so a
 * redelivered event commits nothing the second time.
 */
export interface ProcessedEventStore<Tx> {
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** inserts (consumer, eventId) for each id; returns the ids that were not there yet */
  recordMany(tx: Tx, consumer: string, eventIds: readonly string[]): Promise<Set<string>>;
}

export async function handleOnce<Tx, T>(
  store: ProcessedEventStore<Tx>,
  consumer: string,
  eventId: string,
  effect: (tx: Tx) => Promise<T>,
): Promise<{ duplicate: true } | { duplicate: false; result: T }> {
  return store.transaction(async (tx) => {
    const first = (await store.recordMany(tx, consumer, [eventId])).has(eventId);
    if (!first) return { duplicate: true } as const;
    return { duplicate: false, result: await effect(tx) } as const;
  });
}

/**
 * A batch of events in one transaction: the ids are recorded in one statement and `effect` runs
 * with the events seen for the first time (an id repeated within the batch counts once), so a
 * redelivered batch, or a batch repeating an event, commits each effect once. Returns, per input
 * event, the effect's result or `duplicate`.
 */
export async function handleEachOnce<Tx, E extends { event_id: string }, T>(
  store: ProcessedEventStore<Tx>,
  consumer: string,
  events: readonly E[],
  effect: (tx: Tx, fresh: E[]) => Promise<T[]>,
): Promise<Array<{ duplicate: true } | { duplicate: false; result: T }>> {
  return store.transaction(async (tx) => {
    const recorded = await store.recordMany(tx, consumer, [...new Set(events.map((e) => e.event_id))]);
    const first = events.map((e) => recorded.delete(e.event_id));
    const fresh = events.filter((_, i) => first[i]);
    const results = fresh.length > 0 ? await effect(tx, fresh) : [];
    let next = 0;
    return events.map((_, i) => (first[i] ? { duplicate: false, result: results[next++] } : ({ duplicate: true } as const)));
  });
}
