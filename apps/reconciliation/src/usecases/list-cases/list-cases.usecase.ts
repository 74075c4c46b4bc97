import type { CaseReason } from '@gateway/contracts';
import { Inject, Injectable } from '@nestjs/common';
import { z } from 'zod';
import { CaseRepository, ReconciliationCaseView } from '@gateway/db';
import { CasePort } from '../ports';
import { invalidRequest } from '../invalid-request';

const query = z.object({
  status: z.enum(['open', 'resolved', 'all']).default('open'),
  workload_id: z.string().trim().min(1).max(200).optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
});

export interface CaseDto {
  case_id: string;
  action_id: string;
  attempt_id: string | null;
  workload_id: string | null;
  reason: CaseReason;
  status: 'open' | 'resolved';
  provider_request_id: string | null;
  exposure_microusd: string;
  details: Record<string, string | number | boolean | null>;
  opened_at: string;
  resolved_at: string | null;
  resolved_by: string | null;
  resolution: string | null;
}

/** Cases for operators and finance: ids, reasons, counts and amounts only. */
@Injectable()
export class ListCases {
  constructor(@Inject(CaseRepository) private readonly cases: Pick<CasePort, 'list'>) {}

  async execute(raw: { status?: string; workload_id?: string; limit?: string }): Promise<{ cases: CaseDto[] }> {
    const parsed = query.safeParse(Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v !== '')));
    if (!parsed.success) throw invalidRequest(parsed.error);
    const q = parsed.data;
    const rows = await this.cases.list({
      status: q.status === 'all' ? null : q.status,
      workloadId: q.workload_id ?? null,
      limit: q.limit,
    });
    return { cases: rows.map(toDto) };
  }
}

export function toDto(c: ReconciliationCaseView): CaseDto {
  return {
    case_id: c.id,
    action_id: c.actionId,
    attempt_id: c.attemptId,
    workload_id: c.workloadId,
    reason: c.reason,
    status: c.status,
    provider_request_id: c.providerRequestId,
    exposure_microusd: c.exposureMicrousd.toString(),
    details: scalarsOnly(c.details),
    opened_at: c.openedAt.toISOString(),
    resolved_at: c.resolvedAt?.toISOString() ?? null,
    resolved_by: c.resolvedBy,
    resolution: c.resolution,
  };
}

/** Case details hold counts and codes; anything nested is dropped rather than passed through unseen. */
function scalarsOnly(details: Record<string, unknown>): CaseDto['details'] {
  const out: CaseDto['details'] = {};
  for (const [k, v] of Object.entries(details)) {
    if (v === null || typeof v === 'number' || typeof v === 'boolean') out[k] = v;
    else if (typeof v === 'string') out[k] = v.length > 200 ? `${v.slice(0, 200)}…` : v;
  }
  return out;
}
