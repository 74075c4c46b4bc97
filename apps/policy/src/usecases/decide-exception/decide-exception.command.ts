import { z } from 'zod';
import { text } from '../input';

/**
 * POST /exceptions/{id}/approve: a note is optional; `override_reason` is required when the cost
 * projected at approval exceeds the exception's budget (or cannot be projected).
 */
export const approveExceptionBody = z.object({ reason: text(1000).optional(), override_reason: text(1000).optional() }).strict();
/** POST /exceptions/{id}/reject: the requester is owed a reason. */
export const rejectExceptionBody = z.object({ reason: text(1000) }).strict();

export type DecideExceptionCommand = { decision: 'approve' | 'reject'; reason?: string; override_reason?: string };
