import { Injectable } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Metrics } from '@gateway/service-kit';

@Injectable()
export class DispatchMetrics {
  readonly refused: Counter<'reason'>;
  readonly upstream: Counter<'route' | 'status'>;
  readonly acceptance: Counter<'reason'>;
  readonly contractFailures: Counter<'route' | 'kind'>;
  /** extra attempts started (hedges fired, retries, fallbacks), by role */
  readonly extraAttempts: Counter<'role'>;
  /** extra attempts not started, by role and reason (decideHedge's or the serialised admission's) */
  readonly extraDenied: Counter<'role' | 'reason'>;
  /** answers chosen (compare-and-set won), by the winning attempt's role */
  readonly winners: Counter<'role'>;
  /** what extra attempts held when admitted, per workload: their worst case, settled later from usage */
  readonly extraHold: Counter<'workload' | 'role'>;
  /** streams whose client was gone (admission's stop): the rest of their chunks were not relayed */
  readonly relayStops: Counter;
  /** provider stream events read and not relayed, their client gone */
  readonly chunksWithheld: Counter;

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
    this.extraAttempts = new Counter({
      name: 'gateway_dispatch_extra_attempts_total',
      help: 'Extra attempts started (hedges fired, retries, fallbacks), by role',
      labelNames: ['role'],
      registers,
    });
    this.extraDenied = new Counter({
      name: 'gateway_dispatch_extra_attempts_denied_total',
      help: 'Extra attempts not started, by role and reason',
      labelNames: ['role', 'reason'],
      registers,
    });
    this.winners = new Counter({
      name: 'gateway_dispatch_winners_total',
      help: 'Answers chosen by compare-and-set, by the winning attempt role (hedge = hedges won)',
      labelNames: ['role'],
      registers,
    });
    this.extraHold = new Counter({
      name: 'gateway_dispatch_extra_hold_microusd_total',
      help: 'Micro-USD held for extra attempts when admitted (their worst case; settlement prices what they cost), per workload',
      labelNames: ['workload', 'role'],
      registers,
    });
    this.relayStops = new Counter({
      name: 'gateway_dispatch_stream_relays_stopped_total',
      help: "Streams whose client was gone (admission's stop): read to their end for usage, the rest of their chunks not relayed",
      registers,
    });
    this.chunksWithheld = new Counter({
      name: 'gateway_dispatch_stream_chunks_withheld_total',
      help: 'Provider stream events read for their usage and not relayed, their client gone',
      registers,
    });
  }
}
