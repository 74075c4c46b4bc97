import type { ChangeRequestView } from '@gateway/db';
import type { ChangeRequestKind } from '@gateway/domain';
import type { Operator } from '@gateway/service-kit';
import type { IdGenerator } from '@gateway/service-kit';
import type { ChangeRequestStore } from '../ports';

/**
 * What a write that raises spend answers instead of applying itself: the pending change request.
 * The HTTP layer turns it into `202 Accepted` (see PendingApprovalInterceptor).
 */
export class PendingChange {
  constructor(readonly body: ReturnType<typeof changeRequestJson>) {}
}

export function changeRequestJson(c: ChangeRequestView) {
  return {
    id: c.id,
    kind: c.kind,
    target_id: c.targetId,
    proposed: c.proposed,
    raises: c.raises,
    status: c.status,
    requested_by: c.requestedBy,
    reason: c.reason,
    requested_at: c.requestedAt.toISOString(),
    decided_by: c.decidedBy,
    decided_at: c.decidedAt?.toISOString() ?? null,
    decision_reason: c.decisionReason,
  };
}

/**
 * Stores a validated command as a pending change request. The command goes in as JSON (money as
 * strings, instants as ISO strings), exactly what its body schema parses again on approval.
 */
export async function requestChange(
  store: Pick<ChangeRequestStore, 'create'>,
  ids: IdGenerator,
  op: Operator,
  req: { kind: ChangeRequestKind; targetId: string; command: object; raises: string[]; reason: string },
  now: Date,
): Promise<PendingChange> {
  const proposed = JSON.parse(JSON.stringify(req.command, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))) as Record<
    string,
    unknown
  >;
  const created = await store.create(
    { id: ids.next(), kind: req.kind, targetId: req.targetId, proposed, raises: req.raises, requestedBy: op.subject, reason: req.reason },
    now,
  );
  return new PendingChange(changeRequestJson(created));
}
