import { z } from 'zod';

/**
 * A message a consumer gave up on (schema-invalid, deterministically failing, or still failing
 * after its transient retries), parked so its partition moves on. Ids and a sanitised reason
 * only: never the message value, which may be encrypted content or carry what broke the handler.
 */
export const deadLetterV1 = z.object({
  /** deterministic per (consumer group, topic, partition, offset): a re-park is recognisable */
  event_id: z.string().uuid(),
  topic: z.string(),
  partition: z.number().int().nonnegative(),
  offset: z.string().regex(/^\d+$/),
  key: z.string().nullable(),
  consumer_group: z.string(),
  /** the parked message's own event_id / action_id / attempt_id, when it had them */
  source_event_id: z.string().nullable(),
  action_id: z.string().nullable(),
  attempt_id: z.string().nullable(),
  reason_class: z.enum(['schema_invalid', 'deterministic_error', 'retries_exhausted']),
  error_class: z.string(),
  /** error text with quoted values removed and length capped */
  reason: z.string().max(300),
  attempts: z.number().int().positive(),
  first_seen_at: z.string().datetime({ offset: true }),
  parked_at: z.string().datetime({ offset: true }),
});
export type DeadLetterV1 = z.infer<typeof deadLetterV1>;
export type DeadLetterReasonClass = DeadLetterV1['reason_class'];
