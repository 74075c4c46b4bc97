import { batchMaxSize, ConsumerExtras, consumerSetting } from '@gateway/messaging';

/**
 * Settings of a consumer whose figures are read once a day or week (the daily tallies, the audit's
 * settled events), built to cost little while idle (issue 12): its own group, one concurrent
 * partition batch of up to `<PREFIX>_BATCH_MAX` (2000) messages, the broker holding each fetch
 * until 1 MiB has gathered or `<PREFIX>_FETCH_WAIT_MS` (5000) has passed, so an idle consumer asks
 * for data every few seconds instead of continuously. Offsets are committed every 5 s (a
 * redelivery is a duplicate to the consumer's idempotent write). From the beginning: a new
 * deployment reads the retained days.
 */
export function reportConsumer(group: string, prefix: string): ConsumerExtras {
  return {
    group,
    fromBeginning: true,
    concurrency: 1,
    batch: { maxSize: batchMaxSize(`${prefix}_BATCH_MAX`, 2000) },
    commitIntervalMs: 5000,
    fetch: { minBytes: 1024 * 1024, maxWaitMs: consumerSetting(`${prefix}_FETCH_WAIT_MS`, 5000, 1) },
  };
}
