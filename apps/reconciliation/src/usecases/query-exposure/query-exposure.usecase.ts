import { Inject, Injectable } from '@nestjs/common';
import { z } from 'zod';
import { ReconciliationRepository, ReconciliationStore } from '@gateway/db';
import { invalidRequest } from '../invalid-request';

const query = z.object({ workload_id: z.string().trim().min(1).max(200).optional() });

export interface ExposureAccountDto {
  account_id: string;
  scope: string;
  scope_id: string;
  period_start: string;
  settled_microusd: string;
  unresolved_microusd: string;
  pending_microusd: string;
  budget_microusd: string;
  updated_at: string;
}

/**
 * Exposure per budget account: settled, unresolved and pending as separate labelled integer
 * strings next to the budget. They are deliberately not added up: settled is spent, unresolved
 * may or may not have been billed, pending is still a worst-case hold.
 */
@Injectable()
export class QueryExposure {
  constructor(@Inject(ReconciliationRepository) private readonly store: Pick<ReconciliationStore, 'budgetAccounts'>) {}

  async execute(raw: { workload_id?: string }): Promise<{ workload_id: string | null; accounts: ExposureAccountDto[] }> {
    const parsed = query.safeParse(raw.workload_id === '' ? {} : raw);
    if (!parsed.success) throw invalidRequest(parsed.error);
    const workloadId = parsed.data.workload_id ?? null;
    const accounts = await this.store.budgetAccounts(workloadId, 1000);
    return {
      workload_id: workloadId,
      accounts: accounts.map((a) => ({
        account_id: a.id,
        scope: a.scope,
        scope_id: a.scopeId,
        period_start: a.periodStart.toISOString(),
        settled_microusd: a.settledMicrousd.toString(),
        unresolved_microusd: a.unresolvedMicrousd.toString(),
        pending_microusd: a.pendingMicrousd.toString(),
        budget_microusd: a.budgetMicrousd.toString(),
        updated_at: a.updatedAt.toISOString(),
      })),
    };
  }
}
