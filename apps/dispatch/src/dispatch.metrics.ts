import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Metrics } from '@gateway/service-kit';

@Injectable()
export class DispatchMetrics {
  readonly refused: Counter<'reason'>;
  readonly upstream: Counter<'route' | 'status'>;
  readonly acceptance: Counter<'reason'>;
  readonly contractFailures: Counter<'route' | 'kind'>;

  constructor(metrics: Metrics) {
    const registers = [metrics.registry];
    this.refused = new Counter({
      name: 'gateway_dispatch_refused_total',
      help: 'Commands not dispatched, by reason',
      labelNames: ['reason'],
      registers,
    });
    this.upstream = new Counter({
      name: 'gateway_dispatch_upstream_responses_total',
      help: 'Upstream responses by route and HTTP status',
      labelNames: ['route', 'status'],
      registers,
    });
    this.acceptance = new Counter({
      name: 'gateway_dispatch_acceptance_total',
      help: 'Acceptance verdicts',
      labelNames: ['reason'],
      registers,
    });
    this.contractFailures = new Counter({
      name: 'gateway_route_contract_failures_total',
      help: 'Routes that did not honour their contract (silent shortfall, excess candidates, refused multi-candidate)',
      labelNames: ['route', 'kind'],
      registers,
    });
  }
}
