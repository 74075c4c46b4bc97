/**
 * @gateway/messaging: Kafka wiring (the only kafkajs importer), the transactional-outbox relay,
 * the idempotent-consumer helper, dispatch reply correlation and content encryption.
 */
export * from './kafka-bus';
export * from './outbox-relay';
export * from './reply-router';
export * from './content-cipher';
export * from './idempotent-consumer';
