import { z } from 'zod';
import { invalidRequest } from '../invalid-request';

/** An operator's release of a case's exposure; the reason is the audit trail, so it is required. */
export const releaseCaseBody = z
  .object({ reason: z.string({ error: 'reason is required' }).trim().min(3, 'reason must say why (at least 3 characters)').max(2000) })
  .strict();

export interface ReleaseCaseCommand {
  caseId: string;
  reason: string;
  actor: string;
}

export function releaseCaseCommand(caseId: string, body: unknown, actor: string): ReleaseCaseCommand {
  const parsed = releaseCaseBody.safeParse(body ?? {});
  if (!parsed.success) throw invalidRequest(parsed.error);
  return { caseId, reason: parsed.data.reason, actor };
}
