import { Injectable, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import type { Logger } from 'pino';
import { dispatchCommandV1 } from '@gateway/contracts';
import { ContentCipher, KafkaBus } from '@gateway/messaging';
import { InjectLogger } from '@gateway/service-kit';
import { RunAttempt } from '../usecases/run-attempt/run-attempt.usecase';

/** Upstream calls run concurrently beyond Kafka's per-partition serial delivery, up to this many. */
const MAX_IN_FLIGHT = 512;

/**
 * A command's offset is committed once its single-use claim is durable; the upstream call then
 * runs on. Redelivery after a crash finds the claim and sends nothing twice.
 */
@Injectable()
export class DispatchCommandsConsumer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly inFlight = new Set<Promise<void>>();
  constructor(
    private readonly bus: KafkaBus,
    private readonly cipher: ContentCipher,
    private readonly runAttempt: RunAttempt,
    @InjectLogger() private readonly log: Logger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.bus.subscribe('dispatchCommands', { groupId: 'gateway-dispatch', concurrency: 6 }, async (envelope) => {
      let cmd;
      try {
        cmd = dispatchCommandV1.parse(this.cipher.decrypt(envelope.body, envelope.action_id));
      } catch (err) {
        this.log.error({ action_id: envelope.action_id, error: (err as Error).name }, 'undecryptable or invalid dispatch command; skipped');
        return;
      }
      while (this.inFlight.size >= MAX_IN_FLIGHT) await Promise.race(this.inFlight);
      const { done } = await this.runAttempt.execute(cmd, envelope.reply_to);
      this.inFlight.add(done);
      void done.finally(() => this.inFlight.delete(done));
    });
  }

  /** Lets running attempts record their outcome before the process exits. */
  async onApplicationShutdown(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }
}
