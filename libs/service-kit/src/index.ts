/**
 * @gateway/service-kit: the NestJS plumbing every service shares (config, logging without
 * content, Postgres + Kafka wiring, outbox relay, /health, /metrics, /docs, error shapes).
 */
export * from './clock';
export * from './config';
export * from './logger';
export * from './log-burst';
export * from './errors';
export * from './metrics';
export * from './health';
export * from './core.module';
export * from './bootstrap';
export * from './openapi';
export * from './operator-auth';
export * from './operator-guard';
export * from './profiling';
export * from './input-guard';
export * from './auth-throttle';
export * from './dispatch-replies';
export * from './periodic-job';
