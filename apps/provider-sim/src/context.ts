// Per-instance state of a running sim: request log, metrics, fail-first counters, seeded latency RNG.
import { Counter, Registry } from 'prom-client';
import { BillingLog } from './billing-export';
import { RequestLog } from './request-log';
import { createRng, type Rng } from './text';

export interface SimContext {
  readonly seed: number;
  readonly log: RequestLog;
  /** What the provider bills, per request that generated anything (the day's export). */
  readonly billing: BillingLog;
  readonly registry: Registry;
  readonly requestsTotal: Counter<'endpoint' | 'scenario' | 'status'>;
  /** fail-first: requests seen per body fingerprint. */
  readonly failures: Map<string, number>;
  /** slow-first: requests seen per body fingerprint. */
  readonly slowSeen: Map<string, number>;
  /** Latency draws: one seeded sequence per instance, deterministic in arrival order. */
  latencyRng: Rng;
  nextId(): number;
  reset(): void;
}

export function createContext(seed: number, logLimit?: number): SimContext {
  const registry = new Registry();
  const requestsTotal = new Counter({
    name: 'provider_sim_requests_total',
    help: 'Provider requests handled by the simulator, by endpoint, scenario (directive names) and HTTP status.',
    labelNames: ['endpoint', 'scenario', 'status'] as const,
    registers: [registry],
  });
  let counter = 0;
  const ctx: SimContext = {
    seed,
    log: new RequestLog(logLimit),
    billing: new BillingLog(),
    registry,
    requestsTotal,
    failures: new Map(),
    slowSeen: new Map(),
    latencyRng: createRng(seed),
    nextId: () => ++counter,
    reset() {
      ctx.log.reset();
      ctx.billing.reset();
      ctx.failures.clear();
      ctx.slowSeen.clear();
      registry.resetMetrics();
      ctx.latencyRng = createRng(seed);
      counter = 0;
    },
  };
  return ctx;
}
