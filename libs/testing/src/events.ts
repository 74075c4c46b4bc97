import { randomUUID } from 'node:crypto';
import { PolicyChangedV1 } from '@gateway/contracts';

/** A valid `gateway.policy.changed.v1` event: the small message bus tests send around. */
export function policyChangedEvent(entityId: string, actor = 'int-spec', change = 'test'): PolicyChangedV1 {
  return { event_id: randomUUID(), timestamp: new Date().toISOString(), entity: 'workload', entity_id: entityId, change, actor };
}
