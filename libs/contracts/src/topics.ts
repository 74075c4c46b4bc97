import { z } from 'zod';
import {
  admissionDecisionV1,
  attemptCompletedV1,
  dispatchControlV1,
  dispatchCommandEnvelopeV1,
  dispatchReplyEnvelopeV1,
  policyChangedV1,
  replyTopicKey,
  ReplyTopicKey,
  reconciliationRequiredV1,
  usageSettledV1,
} from './events';
import { deadLetterV1 } from './dead-letter';
import { controlAlertV1 } from './controls';

/**
 * The topic registry: the only place a topic name is written. Public topics are fixed by
 * DESIGN §5; internal ones are ours. `contentBearing` topics carry encrypted prompt/completion
 * content and are kept briefly; everything else is sanitised (DESIGN §8).
 */
export interface TopicSpec<S extends z.ZodTypeAny> {
  name: string;
  schema: S;
  partitions: number;
  retentionMs: number;
  visibility: 'public' | 'internal';
  contentBearing: boolean;
  /**
   * Each message is for one receiver instance: it goes to that instance's partition with the
   * instance id in the `reply-to` header (`addressTo`), and the receiver reads only that partition.
   */
  addressed?: boolean;
}

const DAY = 24 * 60 * 60 * 1000;

function topic<S extends z.ZodTypeAny>(spec: TopicSpec<S>): TopicSpec<S> {
  return spec;
}

export const Topics = {
  usageSettled: topic({
    name: 'gateway.usage.settled.v1',
    schema: usageSettledV1,
    partitions: 6,
    retentionMs: 30 * DAY,
    visibility: 'public',
    contentBearing: false,
  }),
  admissionDecisions: topic({
    name: 'gateway.admission.decisions.v1',
    schema: admissionDecisionV1,
    partitions: 6,
    retentionMs: 30 * DAY,
    visibility: 'public',
    contentBearing: false,
  }),
  reconciliationRequired: topic({
    name: 'gateway.reconciliation.required.v1',
    schema: reconciliationRequiredV1,
    partitions: 3,
    retentionMs: 30 * DAY,
    visibility: 'public',
    contentBearing: false,
  }),
  controlAlerts: topic({
    name: 'gateway.controls.alerts.v1',
    schema: controlAlertV1,
    partitions: 1,
    retentionMs: 30 * DAY,
    visibility: 'public',
    contentBearing: false,
  }),
  attemptCompleted: topic({
    name: 'gateway.attempt.completed.v1',
    schema: attemptCompletedV1,
    partitions: 6,
    retentionMs: 7 * DAY,
    visibility: 'internal',
    contentBearing: false,
  }),
  policyChanged: topic({
    name: 'gateway.policy.changed.v1',
    schema: policyChangedV1,
    partitions: 1,
    retentionMs: 7 * DAY,
    visibility: 'internal',
    contentBearing: false,
  }),
  dispatchCommands: topic({
    name: 'gateway.dispatch.commands.v1',
    schema: dispatchCommandEnvelopeV1,
    partitions: 6,
    retentionMs: 60 * 60 * 1000,
    visibility: 'internal',
    contentBearing: true,
  }),
  /** admission → every dispatch instance: stop relaying a stream whose client is gone (docs/scaling.md) */
  dispatchControls: topic({
    name: 'gateway.dispatch.controls.v1',
    schema: dispatchControlV1,
    partitions: 1,
    retentionMs: 60 * 60 * 1000,
    visibility: 'internal',
    contentBearing: false,
  }),
  /** replies to admission's commands: one partition per admission instance, up to 6 (docs/scaling.md) */
  dispatchReplies: topic({
    name: 'gateway.dispatch.replies.v1',
    schema: dispatchReplyEnvelopeV1,
    partitions: 6,
    retentionMs: 60 * 60 * 1000,
    visibility: 'internal',
    contentBearing: true,
    addressed: true,
  }),
  /** replies to policy's verification probes, apart so policy never reads applications' replies */
  probeReplies: topic({
    name: 'gateway.dispatch.probe_replies.v1',
    schema: dispatchReplyEnvelopeV1,
    partitions: 1,
    retentionMs: 60 * 60 * 1000,
    visibility: 'internal',
    contentBearing: true,
    addressed: true,
  }),
  deadLetters: topic({
    name: 'gateway.consumer.dead_letters.v1',
    schema: deadLetterV1,
    partitions: 1,
    retentionMs: 30 * DAY,
    visibility: 'internal',
    contentBearing: false,
  }),
} as const;

export type TopicKey = keyof typeof Topics;
export type TopicPayload<K extends TopicKey> = z.infer<(typeof Topics)[K]['schema']>;

export const allTopics = (): TopicSpec<z.ZodTypeAny>[] => Object.values(Topics);

/**
 * How long after a consumer first took an event the same message may still come to it again: the
 * longest retention of any topic, plus Kafka's default segment roll (7 days: the broker deletes a
 * segment only once its newest message is past retention, so a message can outlive its retention
 * by that much), plus a day. A consumer's record of the event ids it handled (`processed_event`)
 * is kept this long and pruned after (reconciliation's `PruneProcessedEvents`).
 */
export const REDELIVERY_HORIZON_MS = Math.max(...allTopics().map((t) => t.retentionMs)) + 8 * DAY;

/** Every reply topic key names a declared, addressed topic (checked by the compiler and at load). */
for (const key of replyTopicKey.options satisfies readonly TopicKey[]) {
  if (!Topics[key].addressed) throw new Error(`reply topic ${key} must be addressed`);
}

/** The header naming the receiver instance of a message on an `addressed` topic. */
export const RECIPIENT_HEADER = 'reply-to';

/**
 * The partition of an `addressed` topic that carries one receiver instance's messages. An id that
 * ends in a number (`admission-2`, as `--scale=N` names instances; a StatefulSet's `-0`, `-1`)
 * takes that number modulo the partition count, so instances numbered 1…P of one service get
 * distinct partitions; any other id is hashed (FNV-1a). Receivers that share a partition each
 * read it and skip the others' messages by `RECIPIENT_HEADER`, before parsing them.
 */
export function recipientPartition(instanceId: string, partitions: number): number {
  if (!Number.isInteger(partitions) || partitions < 1) throw new RangeError(`partitions must be a positive integer, not ${partitions}`);
  const numbered = /-(\d+)$/.exec(instanceId);
  if (numbered) return Number(numbered[1].slice(-9)) % partitions;
  let hash = 0x811c9dc5;
  for (let i = 0; i < instanceId.length; i++) hash = Math.imul(hash ^ instanceId.charCodeAt(i), 0x01000193) >>> 0;
  return hash % partitions;
}

/** Where a message for `instanceId` goes on an addressed topic: its partition and the recipient header. */
export function addressTo(topicKey: TopicKey, instanceId: string): { partition: number; headers: Record<string, string> } {
  const spec: TopicSpec<z.ZodTypeAny> = Topics[topicKey];
  if (!spec.addressed) throw new Error(`${spec.name} is not an addressed topic`);
  return { partition: recipientPartition(instanceId, spec.partitions), headers: { [RECIPIENT_HEADER]: instanceId } };
}

/** Where dispatch sends a command's reply: the sender's instance, on the reply topic it reads. */
export interface ReplyAddress {
  instanceId: string;
  topic: ReplyTopicKey;
  /** when dispatch took the command, on its clock (ms): each reply says how long it held it (`held_ms`) */
  receivedAtMs?: number;
}

/** A dispatch command's reply address (a command without `reply_topic` came from an older sender: `dispatchReplies`). */
export function replyAddressOf(envelope: { reply_to: string; reply_topic?: ReplyTopicKey }): ReplyAddress {
  return { instanceId: envelope.reply_to, topic: envelope.reply_topic ?? 'dispatchReplies' };
}
