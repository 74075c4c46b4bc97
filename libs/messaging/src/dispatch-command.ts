import type { DispatchCommandV1, ReplyAddress } from '@gateway/contracts';
import type { ContentCipher } from './content-cipher';
import type { KafkaBus } from './kafka-bus';

/**
 * Publishes one dispatch command, encrypted under its action id, for dispatch to run; the reply
 * comes back on `replyTo.topic`, addressed to `replyTo.instanceId` (the sender's instance id).
 * Admission sends the applications' commands (replies on `dispatchReplies`), the policy service
 * its verification probes (`probeReplies`).
 */
export async function publishDispatchCommand(
  bus: Pick<KafkaBus, 'publish'>,
  cipher: ContentCipher,
  command: DispatchCommandV1,
  replyTo: ReplyAddress,
  eventId: string,
): Promise<void> {
  await bus.publish('dispatchCommands', [
    {
      key: command.action_id,
      value: {
        event_id: eventId,
        action_id: command.action_id,
        reply_to: replyTo.instanceId,
        reply_topic: replyTo.topic,
        dispatch_deadline: command.dispatch_deadline,
        body: cipher.encrypt(command, command.action_id),
      },
    },
  ]);
}
