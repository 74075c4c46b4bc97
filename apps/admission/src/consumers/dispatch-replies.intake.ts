import { Injectable } from '@nestjs/common';
import { dispatchReplyV1, DispatchReplyEnvelopeV1 } from '@gateway/contracts';
import { ContentCipher, errorClass, PoisonMessageError, ReplyRouter } from '@gateway/messaging';
import { InjectConfig, ServiceConfig } from '@gateway/service-kit';

/** Keeps the replies addressed to this instance and hands them to the request waiting for them. */
@Injectable()
export class DispatchRepliesIntake {
  constructor(
    private readonly router: ReplyRouter,
    private readonly cipher: ContentCipher,
    @InjectConfig() private readonly config: ServiceConfig,
  ) {}

  async accept(envelope: DispatchReplyEnvelopeV1): Promise<void> {
    if (envelope.reply_to !== this.config.instanceId) return;
    let reply;
    try {
      reply = dispatchReplyV1.parse(this.cipher.decrypt(envelope.body, envelope.action_id));
    } catch (err) {
      throw new PoisonMessageError(`undecryptable or invalid dispatch reply: ${errorClass(err)}`);
    }
    this.router.deliver(envelope.action_id, reply);
  }
}
