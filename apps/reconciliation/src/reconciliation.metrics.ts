import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Metrics } from '@gateway/service-kit';

@Injectable()
export class ReconciliationMetrics {
  readonly swept: Counter<'kind'>;
  readonly sweepFailures: Counter;

  constructor(metrics: Metrics) {
    const registers = [metrics.registry];
    this.swept = new Counter({
      name: 'gateway_reconciliation_swept_total',
      help: 'Sweeper outcomes: voided undispatchable reservations, orphaned attempts',
      labelNames: ['kind'],
      registers,
    });
    this.sweepFailures = new Counter({
      name: 'gateway_reconciliation_sweep_failures_total',
      help: 'Sweeps that failed as a whole',
      registers,
    });
  }
}
