import { Inject, Injectable } from '@nestjs/common';
import { DomainError } from '@gateway/domain';
import { ReplyRouter } from '@gateway/messaging';
import { ADMISSION_SHED_QUEUE_DEFAULT_MS, ADMISSION_SHED_WINDOW_DEFAULT_MS, InjectConfig, ServiceConfig } from '@gateway/service-kit';
import { AdmissionMetrics } from '../admission.metrics';
import { QueueShedder, SHED_LAW_DEFAULTS } from './queue-shedder';

/**
 * Admission's load shedding: every first reply's queue wait feeds the law (QueueShedder), and
 * `refusal` refuses a share of new requests while commands queue longer than ADMISSION_SHED_QUEUE_MS,
 * before anything is reserved or sent (docs/decisions.md, "Shedding on the dispatch queue").
 */
/** What a refusal's Retry-After asks for, s. */
export const SHED_RETRY_AFTER_S = 1;
/** How long a refusal is held for a connection that asked again within its Retry-After, ms. */
export const SHED_REPEAT_PAUSE_MS = 250;

@Injectable()
export class LoadShedding {
  private readonly shedder: QueueShedder;
  /** uniform in [0, 1); tests replace it */
  draw: () => number = Math.random;
  /** a monotonic clock, ms */
  now: () => number = () => performance.now();
  /** when each connection was last refused (forgotten with the connection) */
  private readonly refusedAt = new WeakMap<object, number>();

  constructor(
    @Inject(ReplyRouter) router: ReplyRouter,
    private readonly metrics: AdmissionMetrics,
    @InjectConfig() config: Pick<ServiceConfig, 'admissionShed'>,
  ) {
    this.shedder = new QueueShedder({
      ...SHED_LAW_DEFAULTS,
      targetMs: config.admissionShed?.targetMs ?? ADMISSION_SHED_QUEUE_DEFAULT_MS,
      windowMs: config.admissionShed?.windowMs ?? ADMISSION_SHED_WINDOW_DEFAULT_MS,
    });
    router.observeQueueWaits((waitMs, atMs) => {
      metrics.dispatchQueue.observe(waitMs / 1000);
      this.shedder.observe(waitMs, atMs);
    });
    metrics.shedShareNow = () => this.shedder.shareAt(this.now());
  }

  /**
   * The 503 service_unavailable (Retry-After: 1) for a request the shedding refuses, else null.
   * `pauseMs`: how long to hold that answer. An official SDK waits out Retry-After before its next
   * request; a client that asks again at once on the same connection (a retry loop without
   * backoff) would otherwise turn the refusals into a load of their own on admission's event
   * loop, so its next refusals within that second are answered only after SHED_REPEAT_PAUSE_MS.
   */
  refusal(connection: object | null): { error: DomainError; pauseMs: number } | null {
    const now = this.now();
    if (!this.shedder.refuses(now, this.draw())) return null;
    this.metrics.shed.inc();
    let pauseMs = 0;
    if (connection) {
      const last = this.refusedAt.get(connection);
      if (last !== undefined && now - last < SHED_RETRY_AFTER_S * 1000) pauseMs = SHED_REPEAT_PAUSE_MS;
      this.refusedAt.set(connection, now);
    }
    return { pauseMs, error: SHED };
  }
}

/**
 * The one refusal every shed request shares: under overload they come by the hundred a second,
 * and building an Error each time (its stack trace) was 3 % of admission's CPU in the overload
 * bench's profile. writeDenial only reads it.
 */
const SHED = Object.freeze(
  new DomainError(
    'service_unavailable',
    'the gateway is shedding load: requests are queueing for a dispatcher longer than it allows; nothing was reserved or sent, retry shortly',
    undefined,
    Object.freeze({ 'retry-after': String(SHED_RETRY_AFTER_S) }),
  ),
);
