import { z } from 'zod';
import { invalidRequest } from '../invalid-request';

/**
 * An operator's release of a case after comparing evidence (provider console, invoice). The
 * reason is the audit trail, so it is required. `amount_microusd` is what the operator attests the
 * attempt cost (integer micro-USD as a decimal string); omitted, the full exposure the case holds
 * is booked, so unknown usage is never booked as zero by default.
 */
export const releaseCaseBody = z
  .object({
    reason: z.string({ error: 'reason is required' }).trim().min(3, 'reason must say why (at least 3 characters)').max(2000),
    amount_microusd: z
      .string()
      .regex(/^\d{1,18}$/, 'amount_microusd must be a non-negative integer number of micro-USD, as a decimal string')
      .optional(),
  })
  .strict();

export interface ReleaseCaseCommand {
  caseId: string;
  reason: string;
  /** null: the case's full held exposure */
  attestedMicrousd: bigint | null;
  actor: string;
}

export function releaseCaseCommand(caseId: string, body: unknown, actor: string): ReleaseCaseCommand {
  const parsed = releaseCaseBody.safeParse(body ?? {});
  if (!parsed.success) throw invalidRequest(parsed.error);
  const amount = parsed.data.amount_microusd;
  return { caseId, reason: parsed.data.reason, attestedMicrousd: amount === undefined ? null : BigInt(amount), actor };
}
