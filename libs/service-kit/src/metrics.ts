import { Controller, Get, Header } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { collectDefaultMetrics, Counter, Registry } from 'prom-client';

/** Why a request was refused before anyone was authenticated (no row is written for these). */
export type UnauthenticatedReason = 'missing_credential' | 'unknown_credential' | 'rate_limited';

/**
 * How often the event-loop delay histogram (`nodejs_eventloop_lag_*`) samples. prom-client's
 * default, 10 ms, wakes an idle process 100 times a second (~0.009 cores each on the 2-core box,
 * issue 12); 50 ms still gives 200 samples per 10 s for p99. The bench subtracts it
 * (scripts/bench.mjs, EVENT_LOOP_RESOLUTION_MS) since the histogram records whole intervals.
 */
export const EVENT_LOOP_SAMPLE_MS = 50;

/**
 * What `OutboxRepository.onFlushDropped` is told, counted by topic and reason in `counter`
 * (`gateway_outbox_flush_dropped_total`); anything but a shutdown is logged too (counts, the
 * reason and the error's message: never a payload).
 */
export function flushDropRecorder(counter: Counter<'topic' | 'reason'>, logger: { warn(obj: object, msg: string): void }) {
  return (rows: ReadonlyArray<{ topic: string }>, reason: string, detail?: string): void => {
    const byTopic = new Map<string, number>();
    for (const r of rows) byTopic.set(r.topic, (byTopic.get(r.topic) ?? 0) + 1);
    for (const [topic, n] of byTopic) counter.inc({ topic, reason }, n);
    if (reason !== 'stopped')
      logger.warn({ rows: rows.length, reason, detail }, 'outbox rows left to the sweep: the WAL flush was not confirmed');
  };
}

/** One registry per service, so in-process test stacks don't mix their counters. */
export class Metrics {
  readonly registry = new Registry();
  /** unauthenticated refusals: counted here instead of stored one row per request */
  readonly unauthenticated: Counter<'reason'>;
  /** requests the service's Kafka clients sent to the broker (`BusOptions.requestCounter`) */
  readonly kafkaRequests: Counter<'client' | 'api'>;

  constructor(service: string) {
    this.registry.setDefaultLabels({ service });
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    this.unauthenticated = new Counter({
      name: 'gateway_unauthenticated_refusals_total',
      help: 'Requests refused before authentication, by reason (missing or unknown credential, source over its failed-authentication budget)',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    this.kafkaRequests = new Counter({
      name: 'gateway_kafka_requests_total',
      help: "Requests this service's Kafka producer and consumers sent to the broker, by client and protocol API (Produce, Fetch, OffsetCommit, Heartbeat, …)",
      labelNames: ['client', 'api'],
      registers: [this.registry],
    });
  }
}

@ApiExcludeController()
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: Metrics) {}

  @Get()
  @Header('content-type', 'text/plain; version=0.0.4')
  scrape(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
