import { AdmissionDecisionV1, Topics } from '@gateway/contracts';
import { pendingOf, planReserve } from '@gateway/domain';
import { Database, isUniqueViolation, Tx, prismaTx } from '../database';
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
 * Admission's one transaction (DESIGN §3 step 2): in-flight ceiling, token quota, budget(s),
 * action, reservation and the decision event commit together or not at all. Budget holds are
 * conditional upserts, so pending + unresolved + settled never exceeds the budget under any
 * concurrency. All of it is one SQL statement: the hot per-workload rows are locked for one
 * round trip plus the commit.
 */
export class AdmissionRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  async admit(input: AdmitInput): Promise<AdmitResult> {
    // A pool connection that comes after the action's deadline is of no use: wait at most until then
    // (the caller answers 503 service_unavailable when the pool cannot serve in time).
    const maxWaitMs = Math.max(100, Math.min(5000, input.action.deadlineAt.getTime() - input.now.getTime()));
    try {
      await this.db.transaction(
        async (tx) => {
          const outcome = await this.reserveInOneStatement(tx, input);
          if (outcome.slot === 0)
            throw new Denied({ ok: false, code: 'concurrency_limit_exceeded', inFlight: input.concurrency.maxInFlight });
          if (outcome.tokens === 0) throw new Denied({ ok: false, code: 'token_quota_exceeded', limit: input.tokenRate?.limit ?? 0 });
          if (outcome.workloadBudget === 0)
            throw new Denied(await this.budgetDenial(tx, 'workload', input.action.workloadId, input.workloadBudget.periodStart));
          if (outcome.exceptionBudget === 0 && input.exceptionBudget) {
            throw new Denied(await this.budgetDenial(tx, 'exception', input.exceptionBudget.exceptionId, EXCEPTION_PERIOD));
          }
          this.outbox.committed(tx, {
            id: outcome.outboxId!,
            topic: Topics.admissionDecisions.name,
            key: input.action.workloadId,
            payload: input.decisionEvent,
          });
        },
        { maxWaitMs },
      );
      return { ok: true };
    } catch (err) {
      if (err instanceof Denied) return err.result;
      if (isUniqueViolation(err)) return { ok: false, code: 'idempotency_conflict' };
      throw err;
    }
  }

  /**
   * Every check and write of an admission in one statement (one round trip): each step runs only
   * when the previous one succeeded, and the counts say which step refused. The caller rolls the
   * transaction back on any refusal, so a refused request leaves nothing behind.
   */
  private async reserveInOneStatement(
    tx: Tx,
    input: AdmitInput,
  ): Promise<{ slot: number; tokens: number; workloadBudget: number; exceptionBudget: number; outboxId: bigint | null }> {
    const a = input.action;
    // The hold admission places is the domain's reserve plan: the whole worst case pending.
    const r = pendingOf(planReserve(input.reservation.reservedMicrousd));
    const c = input.concurrency;
    const t = input.tokenRate;
    const w = input.workloadBudget;
    const e = input.exceptionBudget;
    const workloadAccountId = budgetAccountId('workload', a.workloadId, w.periodStart);
    const exceptionAccountId = e ? budgetAccountId('exception', e.exceptionId, EXCEPTION_PERIOD) : null;
    const event = Topics.admissionDecisions.schema.parse(input.decisionEvent);
    const rows = await prismaTx(tx).$queryRaw<Array<{ slot: bigint; tokens: bigint; wb: bigint; eb: bigint; outbox_id: bigint | null }>>`
      WITH
      slot AS (
        INSERT INTO quota_counter AS q (scope, scope_id, window_start, tokens, in_flight, updated_at)
        SELECT ${c.scope}, ${c.scopeId}, ${NO_WINDOW}, 0, 1, now() WHERE ${c.maxInFlight}::int >= 1
        ON CONFLICT (scope, scope_id, window_start) DO UPDATE SET in_flight = q.in_flight + 1, updated_at = now()
          WHERE q.in_flight < ${c.maxInFlight}::int
        RETURNING 1 AS ok
      ),
      tok AS (
        INSERT INTO quota_counter AS q (scope, scope_id, window_start, tokens, in_flight, updated_at)
        SELECT 'workload_tokens_per_minute', ${t?.scopeId ?? ''}, ${t?.windowStart ?? NO_WINDOW}, ${t?.tokens ?? 0}::int, 0, now()
        FROM slot WHERE ${t !== null} AND ${t?.tokens ?? 0}::int <= ${t?.limit ?? 0}::int
        ON CONFLICT (scope, scope_id, window_start) DO UPDATE SET tokens = q.tokens + EXCLUDED.tokens, updated_at = now()
          WHERE q.tokens + EXCLUDED.tokens <= ${t?.limit ?? 0}::int
        RETURNING 1 AS ok
      ),
      tok_ok AS (SELECT ok FROM slot WHERE ${t === null} UNION ALL SELECT ok FROM tok),
      wb AS (
        INSERT INTO budget_account AS b (id, scope, scope_id, period_start, budget_microusd, pending_microusd, updated_at)
        SELECT ${workloadAccountId}, 'workload', ${a.workloadId}, ${w.periodStart}, ${w.budgetMicrousd}::bigint, ${r}::bigint, now()
        FROM tok_ok WHERE ${r}::bigint <= ${w.budgetMicrousd}::bigint
        ON CONFLICT (scope, scope_id, period_start) DO UPDATE
          SET pending_microusd = b.pending_microusd + EXCLUDED.pending_microusd, budget_microusd = EXCLUDED.budget_microusd, updated_at = now()
          WHERE b.pending_microusd + b.unresolved_microusd + b.settled_microusd + EXCLUDED.pending_microusd <= EXCLUDED.budget_microusd
        RETURNING 1 AS ok
      ),
      eb AS (
        INSERT INTO budget_account AS b (id, scope, scope_id, period_start, budget_microusd, pending_microusd, updated_at)
        SELECT ${exceptionAccountId ?? ''}, 'exception', ${e?.exceptionId ?? ''}, ${EXCEPTION_PERIOD}, ${e?.budgetMicrousd ?? 0n}::bigint, ${r}::bigint, now()
        FROM wb WHERE ${e !== null} AND ${r}::bigint <= ${e?.budgetMicrousd ?? 0n}::bigint
        ON CONFLICT (scope, scope_id, period_start) DO UPDATE
          SET pending_microusd = b.pending_microusd + EXCLUDED.pending_microusd, budget_microusd = EXCLUDED.budget_microusd, updated_at = now()
          WHERE b.pending_microusd + b.unresolved_microusd + b.settled_microusd + EXCLUDED.pending_microusd <= EXCLUDED.budget_microusd
        RETURNING 1 AS ok
      ),
      eb_ok AS (SELECT ok FROM wb WHERE ${e === null} UNION ALL SELECT ok FROM eb),
      act AS (
        INSERT INTO action (id, workload_id, environment, route_id, route_version, model_alias, api_kind, stream_mode,
          requested_candidates, effective_candidates, output_ceiling, input_tokens_estimate, exception_id, idempotency_key,
          request_fingerprint, status, status_reason, deadline_at, dispatch_deadline_at, created_at, updated_at, request_id, financial_state)
        SELECT ${a.id}, ${a.workloadId}, ${a.environment}, ${a.routeId}, ${a.routeVersion}::int, ${a.modelAlias}, ${a.apiKind}, ${a.streamMode},
          ${a.requestedCandidates}::int, ${a.effectiveCandidates}::int, ${a.outputCeiling}::int, ${a.inputTokensEstimate}::int, ${a.exceptionId}, ${a.idempotencyKey},
          ${a.requestFingerprint}, 'admitted', 'admitted', ${a.deadlineAt}, ${a.dispatchDeadlineAt}, ${input.now}, ${input.now},
          ${event.request_id}, 'pending'
        FROM eb_ok
        RETURNING id
      ),
      res AS (
        INSERT INTO reservation (id, action_id, workload_account_id, exception_account_id, reserved_output_tokens, reserved_microusd,
          price_revision_id, status, status_reason, created_at, updated_at)
        SELECT ${input.reservation.id}, act.id, ${workloadAccountId}, ${exceptionAccountId}, ${input.reservation.reservedOutputTokens}::int,
          ${r}::bigint, ${input.reservation.priceRevisionId}, 'pending', 'reserved at admission', ${input.now}, ${input.now}
        FROM act
        RETURNING id
      ),
      ob AS (
        INSERT INTO outbox_message (event_id, topic, key, payload)
        SELECT ${event.event_id}, ${Topics.admissionDecisions.name}, ${a.workloadId}, ${JSON.stringify(event)}::jsonb FROM res
        RETURNING id
      )
      SELECT (SELECT count(*) FROM slot) AS slot, (SELECT count(*) FROM tok_ok) AS tokens, (SELECT count(*) FROM wb) AS wb,
             (SELECT count(*) FROM eb_ok) AS eb, (SELECT id FROM ob) AS outbox_id`;
    const row = rows[0];
    return {
      slot: Number(row.slot),
      tokens: Number(row.tokens),
      workloadBudget: Number(row.wb),
      exceptionBudget: Number(row.eb),
      outboxId: row.outbox_id,
    };
  }

  /** Read inside the same transaction: its pool connection is the one holding the row. */
  private async budgetDenial(
    tx: Tx,
    scope: 'workload' | 'exception',
    scopeId: string,
    periodStart: Date,
  ): Promise<Exclude<AdmitResult, { ok: true }>> {
    const acct = await prismaTx(tx).budgetAccount.findUnique({ where: { scope_scopeId_periodStart: { scope, scopeId, periodStart } } });
    const used = acct ? acct.pendingMicrousd + acct.unresolvedMicrousd + acct.settledMicrousd : 0n;
    const remaining = acct ? acct.budgetMicrousd - used : 0n;
    return { ok: false, code: 'budget_exhausted', scope, remainingMicrousd: remaining > 0n ? remaining : 0n };
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
}

/** Deterministic, so every instance names the same account for the same scope and period. */
export function budgetAccountId(scope: string, scopeId: string, periodStart: Date): string {
  return `${scope}:${scopeId}:${periodStart.toISOString()}`;
}
