// The db lib may use messaging's interfaces; these tests exercise both together.
export { handleOnce, KafkaBus, OutboxRelay, ReplyRouter, ContentCipher } from '@gateway/messaging';
export { dispatchReplyV1 as dispatchReplyV1Schema } from '@gateway/contracts';
