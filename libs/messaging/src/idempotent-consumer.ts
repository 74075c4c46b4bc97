/**
 * An effect that must happen once per event: the event id is recorded in the same transaction as
 * the effect (libs/db implements `ProcessedEventStore` on the processed_event table), so a
 * redelivered event commits nothing the second time.
 */
export interface ProcessedEventStore<Tx> {
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** inserts (consumer, eventId); false when it was already there */
  recordOnce(tx: Tx, consumer: string, eventId: string): Promise<boolean>;
}

export async function handleOnce<Tx, T>(
  store: ProcessedEventStore<Tx>,
  consumer: string,
  eventId: string,
  effect: (tx: Tx) => Promise<T>,
): Promise<{ duplicate: true } | { duplicate: false; result: T }> {
  return store.transaction(async (tx) => {
    const first = await store.recordOnce(tx, consumer, eventId);
    if (!first) return { duplicate: true } as const;
    return { duplicate: false, result: await effect(tx) } as const;
  });
}
