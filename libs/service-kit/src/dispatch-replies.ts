import { Inject, Injectable, Type } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { dispatchReplyV1, DispatchReplyEnvelopeV1, ReplyTopicKey, Topics } from '@gateway/contracts';
import { BusConsumer, ContentCipher, errorClass, PoisonMessageError, ReplyRouter } from '@gateway/messaging';
import { ServiceConfig } from './config';
import { InjectConfig } from './core.module';

/**
 * Keeps the dispatch replies addressed to this instance (`reply_to` = its instance id) and hands
 * them to the request waiting for them (admission's application requests, policy's probes).
 */
@Injectable()
export class DispatchRepliesIntake {
  constructor(
    @Inject(ReplyRouter) private readonly router: ReplyRouter,
    @Inject(ContentCipher) private readonly cipher: ContentCipher,
    @InjectConfig() private readonly config: ServiceConfig,
  ) {}

  async accept(envelope: DispatchReplyEnvelopeV1): Promise<void> {
    // The bus already skipped replies whose header names another instance; this also covers a
    // reply without the header (from an older dispatcher).
    if (envelope.reply_to !== this.config.instanceId) return;
    // Nobody here waits for the action any more (its client left and it holds no Idempotency-Key
    // answer, or its deadline passed): `deliver` would drop the reply, so it is dropped before it
    // is decrypted and parsed. A stream's chunks keep coming after its client left, each one
    // otherwise a decrypt and a schema parse on the receiver's event loop.
    if (!this.router.wants(envelope.action_id)) return;
    let reply;
    try {
      reply = dispatchReplyV1.parse(this.cipher.decrypt(envelope.body, envelope.action_id));
    } catch (err) {
      throw new PoisonMessageError(`undecryptable or invalid dispatch reply: ${errorClass(err)}`);
    }
    this.router.deliver(envelope.action_id, reply, envelope.held_ms);
  }
}

/**
 * The consumer of a replies topic for a service that sends dispatch commands naming that topic
 * (`reply_topic`). Every instance reads, in a consumer group of its own (`perInstance`), only the
 * partition dispatch addresses its replies to (`addressed`, `recipientPartition` of its id), and
 * keeps those it has a waiter for; it joins before the HTTP server listens, so no reply precedes it.
 */
export function dispatchRepliesConsumer(topic: ReplyTopicKey, group: string, concurrency: number): Type<unknown> {
  @BusConsumer()
  class DispatchRepliesConsumer {
    constructor(@Inject(DispatchRepliesIntake) private readonly intake: DispatchRepliesIntake) {}

    @EventPattern(Topics[topic].name, { group, perInstance: true, addressed: true, fromBeginning: false, concurrency })
    reply(@Payload() envelope: DispatchReplyEnvelopeV1): Promise<void> {
      return this.intake.accept(envelope);
    }
  }
  return DispatchRepliesConsumer;
}
