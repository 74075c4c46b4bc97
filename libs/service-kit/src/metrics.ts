import { Controller, Get, Header } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { collectDefaultMetrics, Counter, Registry } from 'prom-client';

/** Why a request was refused before anyone was authenticated (no row is written for these). */
export type UnauthenticatedReason = 'missing_credential' | 'unknown_credential' | 'rate_limited';

/** One registry per service, so in-process test stacks don't mix their counters. */
export class Metrics {
  readonly registry = new Registry();
  /** unauthenticated refusals: counted here instead of stored one row per request */
  readonly unauthenticated: Counter<'reason'>;

  constructor(service: string) {
    this.registry.setDefaultLabels({ service });
    collectDefaultMetrics({ register: this.registry });
    this.unauthenticated = new Counter({
      name: 'gateway_unauthenticated_refusals_total',
      help: 'Requests refused before authentication, by reason (missing or unknown credential, source over its failed-authentication budget)',
      labelNames: ['reason'],
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
