/**
 * @gateway/domain — the pure rules of the LLM spend-control gateway: denial codes,
 * candidate-count policy, pricing, budget reservations, record lifecycles, response
 * acceptance and idempotency fingerprints.
 *
 * No I/O and no framework code: clocks and randomness are passed in, money is integer
 * micro-USD as bigint, token counts are integer numbers.
 */
export * from './errors';
export * from './validation';
export * from './candidates';
export * from './pricing';
export * from './reservation';
export * from './request-shape';
export * from './input-estimate';
export * from './priced-features';
export * from './responses-request';
export * from './state-machines';
export * from './acceptance';
export * from './idempotency';
export * from './admission';
export * from './sampling';
export * from './usage-plausibility';
export * from './holds';
export * from './hold-batch';
export * from './credentials';
export * from './upstream-url';
export * from './spend-changes';
export * from './probe';
export * from './quota-scopes';
export * from './exception-projection';
export * from './hedging';
export * from './experiment';
export * from './experiment-report';
export * from './experiment-pause';
export * from './controls';
export * from './csv';
export * from './audit';
export * from './funding';
