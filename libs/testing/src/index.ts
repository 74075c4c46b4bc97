/**
 * @gateway/testing: builders (routes, workloads, keys, operator tokens) written through the real
 * repositories, polling helpers, and the demo seed. Used by integration and e2e tests.
 */
export * from './seed';
export * from './demo-seed';
export * from './eventually';
export * from './admission-input';
export * from './events';
export * from './attempt-outcome';
export * from './ledger-rows';
export * from './policy-bodies';
export * from './held-attempt';
export * from './structured-price';
export * from './private-postgres';
export * from './tcp-relay';
