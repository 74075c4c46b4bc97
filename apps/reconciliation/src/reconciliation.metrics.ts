import { Injectable } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import { Metrics } from '@gateway/service-kit';

@Injectable()
export class ReconciliationMetrics {
  readonly swept: Counter<'kind'>;
  readonly sweepFailures: Counter;
  readonly instanceScopedTokens: Gauge<'scope'>;
  readonly instanceScopedOverLimit: Gauge<'scope'>;

  constructor(metrics: Metrics) {
    const registers = [metrics.registry];
    this.swept = new Counter({
      name: 'gateway_reconciliation_swept_total',
      help: 'Sweeper outcomes: voided undispatchable reservations, orphaned attempts, orphan cases settled from late evidence',
      labelNames: ['kind'],
      registers,
    });
    this.sweepFailures = new Counter({
      name: 'gateway_reconciliation_sweep_failures_total',
      help: 'Sweeps that failed as a whole',
      registers,
    });
    this.instanceScopedTokens = new Gauge({
      name: 'gateway_quota_instance_scoped_tokens',
      help: 'Newest token window of a per-instance token rate, summed over gateway instances (the organisation-wide figure)',
      labelNames: ['scope'],
      registers,
    });
    this.instanceScopedOverLimit = new Gauge({
      name: 'gateway_quota_instance_scoped_over_limit_tokens',
      help: 'How far that organisation-wide sum went past the configured limit (each instance enforced it on its own counter)',
      labelNames: ['scope'],
      registers,
    });
  }
}
