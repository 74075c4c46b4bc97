/**
 * @gateway/messaging: Kafka wiring (the only kafkajs importer) with the consumers' poison policy
 * and self-recovery, the Nest transport over it, the transactional-outbox relay, the back-off of
 * periodic jobs when idle, the idempotent-consumer helper, dispatch reply correlation and
 * content encryption.
 */
export * from './kafka-bus';
export * from './produce-coalescer';
export * from './poison-policy';
export * from './poison-guard';
export * from './outbox-relay';
export * from './idle-backoff';
export * from './reply-router';
export * from './content-cipher';
export * from './idempotent-consumer';
export * from './nest/bus.transport';
export * from './dispatch-command';
export * from './batch-guard';
