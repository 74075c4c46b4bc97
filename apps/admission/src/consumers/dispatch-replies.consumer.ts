import { randomUUID } from 'node:crypto';
import { Injectable, OnApplicationBootstrap } from '@nestjs/common';
import type { Logger } from 'pino';
import { dispatchReplyV1 } from '@gateway/contracts';
import { ContentCipher, KafkaBus, ReplyRouter } from '@gateway/messaging';
import { InjectConfig, InjectLogger, ServiceConfig } from '@gateway/service-kit';

/**
 * Every admission instance reads all replies in a consumer group of its own and keeps those it
 * has a waiter for. Subscribed before the HTTP server listens, so no reply can precede it.
 */
@Injectable()
export class DispatchRepliesConsumer implements OnApplicationBootstrap {
  constructor(
    private readonly bus: KafkaBus,
    private readonly router: ReplyRouter,
    private readonly cipher: ContentCipher,
    @InjectConfig() private readonly config: ServiceConfig,
    @InjectLogger() private readonly log: Logger,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.bus.subscribe(
      'dispatchReplies',
      { groupId: `admission-replies-${this.config.instanceId}-${randomUUID().slice(0, 8)}`, fromBeginning: false, concurrency: 6 },
      async (envelope) => {
        if (envelope.reply_to !== this.config.instanceId) return;
        try {
          const reply = dispatchReplyV1.parse(this.cipher.decrypt(envelope.body, envelope.action_id));
          this.router.deliver(envelope.action_id, reply);
        } catch (err) {
          this.log.error({ action_id: envelope.action_id, error: (err as Error).name }, 'undecryptable or invalid dispatch reply');
        }
      },
    );
  }
}
