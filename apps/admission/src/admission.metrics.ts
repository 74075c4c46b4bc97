import { Injectable } from '@nestjs/common';
import { Counter, Gauge, Histogram } from 'prom-client';
import { Metrics } from '@gateway/service-kit';

@Injectable()
export class AdmissionMetrics {
  readonly decisions: Counter<'result' | 'code'>;
  readonly latency: Histogram<'outcome'>;
  /** service-kit's counter of unauthenticated refusals (a missing or unknown key writes no row) */
  readonly unauthenticated: Counter<'reason'>;
  /**
   * The candidate count as requested, per workload and route, for every request whose count was
   * read (allowed or refused). An omitted count is observed as 1 (what it means) with
   * `omitted="true"`, so sums stay candidate counts and "sent n=1" stays apart from "sent nothing".
   */
  readonly requestedCandidates: Histogram<'workload' | 'route' | 'omitted'>;
  /**
   * Admissions that outlasted ADMISSION_DECIDE_TIMEOUT_MS (`timed_out`: the client got 503), and
   * what became of them: `admitted_late` (the reservation committed afterwards; never dispatched,
   * withdrawn at once: `withdrawals`) or `failed_late`.
   */
  readonly decideTimeouts: Counter<'event'>;
  /**
   * Admitted actions admission withdrew (`cause`: `publish_failed`, `admitted_late`, `client_left`,
   * `client_left_queued`: its client left after the command was sent, before any answer), by what the
   * void found (`outcome`: `voided`, `claimed`, `not_voidable`, `error`: the sweep then voids it).
   */
  readonly withdrawals: Counter<'cause' | 'outcome'>;
  /**
   * Idempotency-Key retries of an action with the same body, by what they got: `cached` (the first
   * answer, held), `waited` (the first answer, after waiting for it), `in_progress` (409, running
   * where this instance cannot wait), `not_held` (409: expired, another instance's, or ended
   * without an answer), `streamed` (409: a stream is not replayed).
   */
  readonly idempotentRetries: Counter<'result'>;
  /** Stream clients whose connection admission closed because they did not read their answer. */
  readonly slowStreamClients: Counter<'bound'>;
  /** Stops sent to dispatch for dispatched streams whose client is gone, by reason and whether the publish was acknowledged. */
  readonly relayStops: Counter<'reason' | 'outcome'>;
  /** Each dispatched action's queue wait: from its command's publish to its first reply, less what dispatch held it. */
  readonly dispatchQueue: Histogram;
  /** Requests refused 503 by the load shedding, before anything was reserved. */
  readonly shed: Counter;
  /** The share of requests the load shedding refuses now (0–1), read at each scrape from `shedShareNow`. */
  readonly shedShare: Gauge;
  /** What `shedShare` reads at a scrape (LoadShedding sets it). */
  shedShareNow: () => number = () => 0;

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
    this.decideTimeouts = new Counter({
      name: 'gateway_admission_decide_timeouts_total',
      help: 'Admissions (key, contract, reservation) that outlasted ADMISSION_DECIDE_TIMEOUT_MS: event="timed_out" (answered 503), then "admitted_late" (the reservation committed afterwards, never dispatched, withdrawn at once: gateway_admission_withdrawals_total) or "failed_late"',
      labelNames: ['event'],
      registers: [metrics.registry],
    });
    this.withdrawals = new Counter({
      name: 'gateway_admission_withdrawals_total',
      help: 'Admitted actions admission withdrew because it will not wait for their answer (cause: publish_failed, admitted_late, client_left: its client had gone before dispatch, client_left_queued: its client left after the command was sent and before any answer, so a dispatcher may not have taken it yet), by outcome: voided (reservation voided, slot returned, action expired now), claimed or not_voidable (a dispatcher took it first), error (left to the dispatch-deadline sweep)',
      labelNames: ['cause', 'outcome'],
      registers: [metrics.registry],
    });
    this.idempotentRetries = new Counter({
      name: 'gateway_admission_idempotent_retries_total',
      help: 'Idempotency-Key retries with the same body, by result: cached or waited (the first answer), in_progress (409, Retry-After), not_held (409), streamed (409: a stream is not replayed)',
      labelNames: ['result'],
      registers: [metrics.registry],
    });
    this.slowStreamClients = new Counter({
      name: 'gateway_admission_slow_stream_clients_total',
      help: 'Streams whose client connection admission closed because their client did not read (the attempt still settles), by the bound passed: stream (more than STREAM_CLIENT_BACKLOG_MAX_BYTES waited for it) or instance (all streams together held more than STREAM_BACKLOG_TOTAL_MAX_BYTES, and its backlog was the largest)',
      labelNames: ['bound'],
      registers: [metrics.registry],
    });
    this.relayStops = new Counter({
      name: 'gateway_admission_relay_stops_total',
      help: 'Dispatched streams whose client was gone (reason: client_left, client_too_slow) for which admission told dispatch to stop relaying chunks, by outcome: published, or failed (the chunks then travel to nobody, as before; the attempt settles either way)',
      labelNames: ['reason', 'outcome'],
      registers: [metrics.registry],
    });
    this.dispatchQueue = new Histogram({
      name: 'gateway_admission_dispatch_queue_seconds',
      help: "How long each dispatched action's command queued: from its publish to its first reply, less the time dispatch says it held the command (claim, provider call, records); the two Kafka hops and every wait in front of a dispatcher. Load shedding reads it (ADMISSION_SHED_QUEUE_MS)",
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [metrics.registry],
    });
    this.shed = new Counter({
      name: 'gateway_admission_shed_total',
      help: 'Requests refused with 503 service_unavailable (Retry-After) because dispatch commands were queueing longer than ADMISSION_SHED_QUEUE_MS; nothing was reserved or sent for them',
      registers: [metrics.registry],
    });
    this.shedShare = new Gauge({
      name: 'gateway_admission_shed_share',
      help: 'The share of new requests the load shedding refuses now (0 to 0.9)',
      registers: [metrics.registry],
      collect: () => this.shedShare.set(this.shedShareNow()),
    });
    this.requestedCandidates = new Histogram({
      name: 'gateway_admission_requested_candidates',
      help: 'Requested candidate count (n / candidateCount) by workload and route; omitted counts as 1 with omitted="true"',
      labelNames: ['workload', 'route', 'omitted'],
      buckets: [1, 2, 3, 4, 5, 6, 8, 12, 16, 32, 64, 128],
      registers: [metrics.registry],
    });
  }

  /** `requested` as sent: undefined when omitted; anything but a positive integer is not a count. */
  observeRequested(workload: string, route: string, requested: unknown): void {
    if (requested === undefined || requested === null) {
      this.requestedCandidates.observe({ workload, route, omitted: 'true' }, 1);
    } else if (typeof requested === 'number' && Number.isSafeInteger(requested) && requested >= 1) {
      this.requestedCandidates.observe({ workload, route, omitted: 'false' }, requested);
    }
  }
}
