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
@Injectable()
export class LoadShedding {
  private readonly shedder: QueueShedder;
  /** uniform in [0, 1); tests replace it */
  draw: () => number = Math.random;

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
    metrics.shedShareNow = () => this.shedder.shareAt(performance.now());
  }

  /** The 503 service_unavailable (Retry-After: 1) for a request the shedding refuses, else null. */
  refusal(): DomainError | null {
    if (!this.shedder.refuses(performance.now(), this.draw())) return null;
    this.metrics.shed.inc();
    return new DomainError(
      'service_unavailable',
      'the gateway is shedding load: requests are queueing for a dispatcher longer than it allows; nothing was reserved or sent, retry shortly',
      undefined,
      { 'retry-after': '1' },
    );
  }
}
