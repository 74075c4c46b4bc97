/**
 * @gateway/contracts: every Kafka topic (name, zod schema, partitions, retention) and every
 * event and public DTO, versioned. Nothing else in the repo writes a topic name.
 */
export * from './topics';
export * from './events';
export * from './dead-letter';
export * from './dispatch';
export * from './errors';
export * from './money';
export * from './late-evidence';
export * from './price-revision';
export * from './hedge-policy';
export * from './wire-path';
export * from './experiment';
export * from './controls';
