import { z } from 'zod';
import {
  admissionDecisionV1,
  attemptCompletedV1,
  dispatchCommandEnvelopeV1,
  dispatchReplyEnvelopeV1,
  policyChangedV1,
  reconciliationRequiredV1,
  usageSettledV1,
} from './events';
import { deadLetterV1 } from './dead-letter';

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
  dispatchReplies: topic({
    name: 'gateway.dispatch.replies.v1',
    schema: dispatchReplyEnvelopeV1,
    partitions: 6,
    retentionMs: 60 * 60 * 1000,
    visibility: 'internal',
    contentBearing: true,
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
