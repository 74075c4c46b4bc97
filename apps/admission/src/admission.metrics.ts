import { Injectable } from '@nestjs/common';
import { Counter, Histogram } from 'prom-client';
import { Metrics } from '@gateway/service-kit';

@Injectable()
export class AdmissionMetrics {
  readonly decisions: Counter<'result' | 'code'>;
  readonly latency: Histogram<'outcome'>;
  /** service-kit's counter of unauthenticated refusals (a missing or unknown key writes no row) */
  readonly unauthenticated: Counter<'reason'>;

  constructor(metrics: Metrics) {
    this.unauthenticated = metrics.unauthenticated;
    this.decisions = new Counter({
      name: 'gateway_admission_decisions_total',
      help: 'Admission decisions by result and stable code',
      labelNames: ['result', 'code'],
      registers: [metrics.registry],
    });
    this.latency = new Histogram({
      name: 'gateway_admission_request_seconds',
      help: 'Time from request to response, by outcome',
      labelNames: ['outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [metrics.registry],
    });
  }
}
