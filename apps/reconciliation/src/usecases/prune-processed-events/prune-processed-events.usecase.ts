import { Inject, Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import { REDELIVERY_HORIZON_MS } from '@gateway/contracts';
import { ProcessedEventRepository } from '@gateway/db';
import { InjectLogger } from '@gateway/service-kit';

/** The consumers' record of handled event ids (`ProcessedEventRepository`). */
export interface ProcessedEventPruning {
  pruneBefore(cutoff: Date, limit: number): Promise<number>;
}

/**
 * Forgets the event ids consumers recorded before the redelivery horizon (`REDELIVERY_HORIZON_MS`:
 * no topic can bring those events again), in chunks of one short autocommit statement each, so no
 * long transaction or lock holds back the consumers, at most `maxChunks` a run; returns how many
 * went.
 */
@Injectable()
export class PruneProcessedEvents {
  constructor(
    @Inject(ProcessedEventRepository) private readonly store: ProcessedEventPruning,
    @InjectLogger() private readonly log: Pick<Logger, 'info'>,
  ) {}

  async execute(now: Date, opts: { chunk?: number; maxChunks?: number } = {}): Promise<number> {
    const chunk = opts.chunk ?? 10_000;
    const maxChunks = opts.maxChunks ?? 100;
    const cutoff = new Date(now.getTime() - REDELIVERY_HORIZON_MS);
    let pruned = 0;
    for (let i = 0; i < maxChunks; i++) {
      const n = await this.store.pruneBefore(cutoff, chunk);
      pruned += n;
      if (n < chunk) break;
    }
    if (pruned > 0)
      this.log.info({ pruned, handled_before: cutoff.toISOString() }, 'forgot processed event ids past the redelivery horizon');
    return pruned;
  }
}
