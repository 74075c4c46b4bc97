import type { AdmissionDecisionV1 } from '@gateway/contracts';
import { Database, isUniqueViolation, Tx } from '../database';
import { OutboxRepository } from './outbox.repository';

export interface AdmitInput {
  now: Date;
  action: {
    id: string;
    workloadId: string;
    environment: string;
    routeId: string;
    routeVersion: number;
    modelAlias: string;
    apiKind: string;
    streamMode: 'none' | 'sse';
    requestedCandidates: number | null;
    effectiveCandidates: number;
    outputCeiling: number;
    inputTokensEstimate: number;
    exceptionId: string | null;
    idempotencyKey: string | null;
    requestFingerprint: string;
    deadlineAt: Date;
    dispatchDeadlineAt: Date;
  };
  reservation: { id: string; reservedOutputTokens: number; reservedMicrousd: bigint; priceRevisionId: string };
  workloadBudget: { budgetMicrousd: bigint; periodStart: Date };
  exceptionBudget: { exceptionId: string; budgetMicrousd: bigint } | null;
  concurrency: { scope: 'workload'; scopeId: string; maxInFlight: number };
  /** tokens per minute for the workload: input estimate + reserved output, counted at admission */
  tokenRate: { scopeId: string; windowStart: Date; tokens: number; limit: number } | null;
  decisionEvent: AdmissionDecisionV1;
}

export type AdmitResult =
  | { ok: true }
  | { ok: false; code: 'budget_exhausted'; scope: 'workload' | 'exception'; remainingMicrousd: bigint }
  | { ok: false; code: 'concurrency_limit_exceeded'; inFlight: number }
  | { ok: false; code: 'token_quota_exceeded'; limit: number }
  | { ok: false; code: 'idempotency_conflict' };

class Denied extends Error {
  constructor(readonly result: Exclude<AdmitResult, { ok: true }>) {
    super(result.code);
  }
}

const EXCEPTION_PERIOD = new Date(0);
const NO_WINDOW = new Date(0);

/**
 * Admission's one transaction (DESIGN §3 step 2): concurrency ceiling, budget(s), action,
 * reservation and the decision event commit together or not at all. Budget holds are conditional
 * UPDATEs, so pending + unresolved + settled never exceeds the budget under any concurrency.
 */
export class AdmissionRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  async admit(input: AdmitInput): Promise<AdmitResult> {
    try {
      await this.db.transaction(async (tx) => {
        // Rows nobody else touches first; the per-workload hot rows (concurrency counter, budget
        // accounts) last, so their locks are held only for the final statements and the commit.
        const a = input.action;
        const workloadAccountId = budgetAccountId('workload', a.workloadId, input.workloadBudget.periodStart);
        const exceptionAccountId = input.exceptionBudget ? budgetAccountId('exception', input.exceptionBudget.exceptionId, EXCEPTION_PERIOD) : null;
        await tx.action.create({
          data: { ...a, status: 'admitted', statusReason: 'admitted', createdAt: input.now, updatedAt: input.now },
        });
        await tx.reservation.create({
          data: {
            id: input.reservation.id,
            actionId: a.id,
            workloadAccountId,
            exceptionAccountId,
            reservedOutputTokens: input.reservation.reservedOutputTokens,
            reservedMicrousd: input.reservation.reservedMicrousd,
            priceRevisionId: input.reservation.priceRevisionId,
            status: 'pending',
            statusReason: 'reserved at admission',
            createdAt: input.now,
            updatedAt: input.now,
          },
        });
        await this.outbox.append(tx, 'admissionDecisions', a.workloadId, input.decisionEvent);
        if (input.tokenRate) await this.takeTokens(tx, input.tokenRate);
        await this.takeConcurrencySlot(tx, input.concurrency);
        await this.hold(tx, 'workload', a.workloadId, input.workloadBudget.periodStart, input.workloadBudget.budgetMicrousd, input.reservation.reservedMicrousd);
        if (input.exceptionBudget) {
          await this.hold(tx, 'exception', input.exceptionBudget.exceptionId, EXCEPTION_PERIOD, input.exceptionBudget.budgetMicrousd, input.reservation.reservedMicrousd);
        }
      });
      return { ok: true };
    } catch (err) {
      if (err instanceof Denied) return err.result;
      if (isUniqueViolation(err)) return { ok: false, code: 'idempotency_conflict' };
      throw err;
    }
  }

  /** A denial writes only its (sanitised) decision event. */
  async recordDenial(workloadKey: string, event: AdmissionDecisionV1): Promise<void> {
    await this.db.transaction((tx) => this.outbox.append(tx, 'admissionDecisions', workloadKey, event));
  }

  async findByIdempotencyKey(workloadId: string, key: string): Promise<{ id: string; requestFingerprint: string; status: string } | null> {
    const a = await this.db.prisma.action.findUnique({
      where: { workloadId_idempotencyKey: { workloadId, idempotencyKey: key } },
      select: { id: true, requestFingerprint: true, status: true },
    });
    return a;
  }

  private async takeTokens(tx: Tx, t: NonNullable<AdmitInput['tokenRate']>): Promise<void> {
    await tx.$executeRaw`
      INSERT INTO quota_counter (scope, scope_id, window_start, tokens, in_flight, updated_at)
      VALUES ('workload_tokens_per_minute', ${t.scopeId}, ${t.windowStart}, 0, 0, now()) ON CONFLICT DO NOTHING`;
    const rows = await tx.$queryRaw<Array<{ tokens: number }>>`
      UPDATE quota_counter SET tokens = tokens + ${t.tokens}, updated_at = now()
      WHERE scope = 'workload_tokens_per_minute' AND scope_id = ${t.scopeId} AND window_start = ${t.windowStart}
        AND tokens + ${t.tokens} <= ${t.limit}
      RETURNING tokens`;
    if (rows.length === 0) throw new Denied({ ok: false, code: 'token_quota_exceeded', limit: t.limit });
  }

  private async takeConcurrencySlot(tx: Tx, c: AdmitInput['concurrency']): Promise<void> {
    await tx.$executeRaw`
      INSERT INTO quota_counter (scope, scope_id, window_start, tokens, in_flight, updated_at)
      VALUES (${c.scope}, ${c.scopeId}, ${NO_WINDOW}, 0, 0, now()) ON CONFLICT DO NOTHING`;
    const rows = await tx.$queryRaw<Array<{ in_flight: number }>>`
      UPDATE quota_counter SET in_flight = in_flight + 1, updated_at = now()
      WHERE scope = ${c.scope} AND scope_id = ${c.scopeId} AND window_start = ${NO_WINDOW}
        AND in_flight < ${c.maxInFlight}
      RETURNING in_flight`;
    if (rows.length === 0) throw new Denied({ ok: false, code: 'concurrency_limit_exceeded', inFlight: c.maxInFlight });
  }

  private async hold(
    tx: Tx,
    scope: 'workload' | 'exception',
    scopeId: string,
    periodStart: Date,
    budgetMicrousd: bigint,
    amountMicrousd: bigint,
  ): Promise<string> {
    const accountId = budgetAccountId(scope, scopeId, periodStart);
    // The policy's current budget wins, so a raised or lowered budget applies at the next request.
    await tx.$executeRaw`
      INSERT INTO budget_account (id, scope, scope_id, period_start, budget_microusd, updated_at)
      VALUES (${accountId}, ${scope}, ${scopeId}, ${periodStart}, ${budgetMicrousd}, now())
      ON CONFLICT (scope, scope_id, period_start) DO UPDATE SET budget_microusd = EXCLUDED.budget_microusd`;
    const rows = await tx.$queryRaw<Array<{ id: string }>>`
      UPDATE budget_account SET pending_microusd = pending_microusd + ${amountMicrousd}, updated_at = now()
      WHERE scope = ${scope} AND scope_id = ${scopeId} AND period_start = ${periodStart}
        AND pending_microusd + unresolved_microusd + settled_microusd + ${amountMicrousd} <= budget_microusd
      RETURNING id`;
    if (rows.length === 0) {
      const acct = await tx.budgetAccount.findUnique({
        where: { scope_scopeId_periodStart: { scope, scopeId, periodStart } },
      });
      const used = acct ? acct.pendingMicrousd + acct.unresolvedMicrousd + acct.settledMicrousd : 0n;
      const remaining = acct ? acct.budgetMicrousd - used : 0n;
      throw new Denied({ ok: false, code: 'budget_exhausted', scope, remainingMicrousd: remaining > 0n ? remaining : 0n });
    }
    return accountId;
  }
}

/** Deterministic, so every instance names the same account for the same scope and period. */
export function budgetAccountId(scope: string, scopeId: string, periodStart: Date): string {
  return `${scope}:${scopeId}:${periodStart.toISOString()}`;
}
