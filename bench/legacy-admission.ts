// The admission reservation as it was before issue 12 (commit 9568451), kept verbatim for the
// hot-budget bench only: one CTE inside a Prisma interactive transaction (BEGIN / statement /
// COMMIT), relying on ROLLBACK when a step refuses. `bench/hot-budget.ts` runs it in the same
// process as today's path, so the ratio between the two means something on a noisy machine.
// Not used by any service.
import { Topics } from '@gateway/contracts';
import type { AdmitInput, AdmitResult, BudgetScope, OutboxRepository } from '@gateway/db';
import { budgetAccountId } from '@gateway/db';
import { COUNTER_SCOPES, pendingOf, planReserve, quotaScopeName } from '@gateway/domain';
import { Database, isUniqueViolation, prismaTx, Tx } from '../libs/db/src/database';
import { Prisma } from '../libs/db/src/generated/prisma/client';

class Denied extends Error {
  constructor(readonly result: Exclude<AdmitResult, { ok: true }>) {
    super(result.code);
  }
}

const EXCEPTION_PERIOD = new Date(0);
const NO_WINDOW = new Date(0);

/**
 * (Pre-change copy.) Admission's one transaction (DESIGN §3 step 2): in-flight ceiling, token quota, budget(s),
 * action, reservation and the decision event commit together or not at all. Budget holds are
 * conditional upserts, so pending + unresolved + settled never exceeds the budget under any
 * concurrency. All of it is one SQL statement: the hot per-workload rows are locked for one
 * round trip plus the commit.
 */
export class LegacyAdmission {
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
          if (outcome.tokens === 0)
            throw new Denied({ ok: false, code: 'token_quota_exceeded', limit: input.tokenRate?.limit ?? 0, quotaScope: 'workload' });
          if (outcome.workflow === 0)
            throw new Denied({ ok: false, code: 'fanout_limit_exceeded', limit: input.workflowCalls?.limit ?? 0 });
          for (const [i, t] of (input.scopeTokenRates ?? []).entries()) {
            if (outcome.scopeTokens[i] === 0)
              throw new Denied({
                ok: false,
                code: 'token_quota_exceeded',
                limit: t.limit,
                quotaScope: quotaScopeName(t.scope, t.scopeId, t.instanceId),
              });
          }
          if (outcome.workloadBudget === 0)
            throw new Denied(await this.budgetDenial(tx, 'workload', input.action.workloadId, input.workloadBudget.periodStart));
          if (outcome.exceptionBudget === 0 && input.exceptionBudget) {
            throw new Denied(await this.budgetDenial(tx, 'exception', input.exceptionBudget.exceptionId, EXCEPTION_PERIOD));
          }
          for (const [i, b] of (input.scopeBudgets ?? []).entries()) {
            if (outcome.scopeBudgets[i] === 0) throw new Denied(await this.budgetDenial(tx, b.scope, b.scopeId, b.periodStart));
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
  ): Promise<{
    slot: number;
    tokens: number;
    workflow: number;
    scopeTokens: number[];
    workloadBudget: number;
    exceptionBudget: number;
    scopeBudgets: number[];
    outboxId: bigint | null;
  }> {
    const a = input.action;
    // The hold admission places is the domain's reserve plan: the whole worst case pending.
    const r = pendingOf(planReserve(input.reservation.reservedMicrousd));
    const c = input.concurrency;
    const t = input.tokenRate;
    const w = input.workloadBudget;
    const e = input.exceptionBudget;
    const wf = input.workflowCalls ?? null;
    const scopeRates = input.scopeTokenRates ?? [];
    const scopeBudgets = input.scopeBudgets ?? [];
    const workloadAccountId = budgetAccountId('workload', a.workloadId, w.periodStart);
    const exceptionAccountId = e ? budgetAccountId('exception', e.exceptionId, EXCEPTION_PERIOD) : null;
    const scopeAccountIds = scopeBudgets.map((b) => budgetAccountId(b.scope, b.scopeId, b.periodStart));
    const event = Topics.admissionDecisions.schema.parse(input.decisionEvent);

    // Steps after the workload's token counter, each running only when the one before passed. The
    // lock order is fixed (docs/architecture.md): quota counters workload → workflow → team →
    // environment, then budget accounts workload → exception → team → environment.
    const counterSteps: Prisma.Sql[] = [];
    let prev = 'tok_ok';
    if (wf) {
      counterSteps.push(Prisma.sql`wf AS (
        INSERT INTO quota_counter AS q (scope, scope_id, window_start, instance_id, calls, updated_at)
        SELECT ${COUNTER_SCOPES.workflow}, ${wf.scopeId}, ${wf.windowStart}, '', 1, now() FROM tok_ok WHERE 1 <= ${wf.limit}::int
        ON CONFLICT (scope, scope_id, window_start, instance_id) DO UPDATE SET calls = q.calls + 1, updated_at = now()
          WHERE q.calls + 1 <= ${wf.limit}::int
        RETURNING 1 AS ok
      ),`);
      prev = 'wf';
    }
    for (const [i, st] of scopeRates.entries()) {
      const name = Prisma.raw(`st${i}`);
      counterSteps.push(Prisma.sql`${name} AS (
        INSERT INTO quota_counter AS q (scope, scope_id, window_start, instance_id, tokens, in_flight, updated_at)
        SELECT ${COUNTER_SCOPES[st.scope]}, ${st.scopeId}, ${st.windowStart}, ${st.instanceId ?? ''}, ${st.tokens}::int, 0, now()
        FROM ${Prisma.raw(prev)} WHERE ${st.tokens}::int <= ${st.limit}::int
        ON CONFLICT (scope, scope_id, window_start, instance_id) DO UPDATE SET tokens = q.tokens + EXCLUDED.tokens, updated_at = now()
          WHERE q.tokens + EXCLUDED.tokens <= ${st.limit}::int
        RETURNING 1 AS ok
      ),`);
      prev = `st${i}`;
    }
    const countersOk = Prisma.raw(prev);
    const budgetSteps: Prisma.Sql[] = [];
    let prevBudget = 'eb_ok';
    for (const [i, b] of scopeBudgets.entries()) {
      const name = Prisma.raw(`sb${i}`);
      budgetSteps.push(Prisma.sql`${name} AS (
        INSERT INTO budget_account AS b (id, scope, scope_id, period_start, budget_microusd, pending_microusd, updated_at)
        SELECT ${scopeAccountIds[i]}, ${b.scope}, ${b.scopeId}, ${b.periodStart}, ${b.budgetMicrousd}::bigint, ${r}::bigint, now()
        FROM ${Prisma.raw(prevBudget)} WHERE ${r}::bigint <= ${b.budgetMicrousd}::bigint
        ON CONFLICT (scope, scope_id, period_start) DO UPDATE
          SET pending_microusd = b.pending_microusd + EXCLUDED.pending_microusd, budget_microusd = EXCLUDED.budget_microusd, updated_at = now()
          WHERE b.pending_microusd + b.unresolved_microusd + b.settled_microusd + EXCLUDED.pending_microusd <= EXCLUDED.budget_microusd
        RETURNING 1 AS ok
      ),`);
      prevBudget = `sb${i}`;
    }
    const budgetsOk = Prisma.raw(prevBudget);
    const stepCounts = [...(wf ? ['wf'] : []), ...scopeRates.map((_, i) => `st${i}`), ...scopeBudgets.map((_, i) => `sb${i}`)].map((name) =>
      Prisma.raw(`(SELECT count(*) FROM ${name}) AS c_${name}`),
    );

    const rows = await prismaTx(tx).$queryRaw<Array<Record<string, bigint | null>>>`
      WITH
      slot AS (
        INSERT INTO quota_counter AS q (scope, scope_id, window_start, instance_id, tokens, in_flight, updated_at)
        SELECT ${c.scope}, ${c.scopeId}, ${NO_WINDOW}, '', 0, 1, now() WHERE ${c.maxInFlight}::int >= 1
        ON CONFLICT (scope, scope_id, window_start, instance_id) DO UPDATE SET in_flight = q.in_flight + 1, updated_at = now()
          WHERE q.in_flight < ${c.maxInFlight}::int
        RETURNING 1 AS ok
      ),
      tok AS (
        INSERT INTO quota_counter AS q (scope, scope_id, window_start, instance_id, tokens, in_flight, updated_at)
        SELECT 'workload_tokens_per_minute', ${t?.scopeId ?? ''}, ${t?.windowStart ?? NO_WINDOW}, '', ${t?.tokens ?? 0}::int, 0, now()
        FROM slot WHERE ${t !== null} AND ${t?.tokens ?? 0}::int <= ${t?.limit ?? 0}::int
        ON CONFLICT (scope, scope_id, window_start, instance_id) DO UPDATE SET tokens = q.tokens + EXCLUDED.tokens, updated_at = now()
          WHERE q.tokens + EXCLUDED.tokens <= ${t?.limit ?? 0}::int
        RETURNING 1 AS ok
      ),
      tok_ok AS (SELECT ok FROM slot WHERE ${t === null} UNION ALL SELECT ok FROM tok),
      ${counterSteps.length > 0 ? Prisma.join(counterSteps, '\n', '', '') : Prisma.empty}
      wb AS (
        INSERT INTO budget_account AS b (id, scope, scope_id, period_start, budget_microusd, pending_microusd, updated_at)
        SELECT ${workloadAccountId}, 'workload', ${a.workloadId}, ${w.periodStart}, ${w.budgetMicrousd}::bigint, ${r}::bigint, now()
        FROM ${countersOk} WHERE ${r}::bigint <= ${w.budgetMicrousd}::bigint
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
      ${budgetSteps.length > 0 ? Prisma.join(budgetSteps, '\n', '', '') : Prisma.empty}
      act AS (
        INSERT INTO action (id, workload_id, environment, route_id, route_version, model_alias, api_kind, stream_mode,
          requested_candidates, effective_candidates, output_ceiling, input_tokens_estimate, exception_id, idempotency_key,
          request_fingerprint, status, status_reason, deadline_at, dispatch_deadline_at, created_at, updated_at, request_id,
          quota_scope, workflow_id_hash)
        SELECT ${a.id}, ${a.workloadId}, ${a.environment}, ${a.routeId}, ${a.routeVersion}::int, ${a.modelAlias}, ${a.apiKind}, ${a.streamMode},
          ${a.requestedCandidates}::int, ${a.effectiveCandidates}::int, ${a.outputCeiling}::int, ${a.inputTokensEstimate}::int, ${a.exceptionId}, ${a.idempotencyKey},
          ${a.requestFingerprint}, 'admitted', 'admitted', ${a.deadlineAt}, ${a.dispatchDeadlineAt}, ${input.now}, ${input.now},
          ${event.request_id}, ${input.quotaScope ?? event.quota_scope}, ${input.workflowIdHash ?? null}
        FROM ${budgetsOk}
        RETURNING id
      ),
      res AS (
        INSERT INTO reservation (id, action_id, workload_account_id, exception_account_id, scope_account_ids, reserved_output_tokens,
          reserved_microusd, price_revision_id, status, status_reason, created_at, updated_at)
        SELECT ${input.reservation.id}, act.id, ${workloadAccountId}, ${exceptionAccountId}, ${scopeAccountIds}::text[],
          ${input.reservation.reservedOutputTokens}::int, ${r}::bigint, ${input.reservation.priceRevisionId}, 'pending', 'reserved at admission',
          ${input.now}, ${input.now}
        FROM act
        RETURNING id
      ),
      ob AS (
        INSERT INTO outbox_message (event_id, topic, key, payload)
        SELECT ${event.event_id}, ${Topics.admissionDecisions.name}, ${a.workloadId}, ${JSON.stringify(event)}::jsonb FROM res
        RETURNING id
      )
      SELECT (SELECT count(*) FROM slot) AS slot, (SELECT count(*) FROM tok_ok) AS tokens, (SELECT count(*) FROM wb) AS wb,
             (SELECT count(*) FROM eb_ok) AS eb, (SELECT id FROM ob) AS outbox_id
             ${stepCounts.length > 0 ? Prisma.sql`, ${Prisma.join(stepCounts)}` : Prisma.empty}`;
    const row = rows[0];
    const n = (name: string): number => Number(row[`c_${name}`] ?? 0);
    return {
      slot: Number(row.slot),
      tokens: Number(row.tokens),
      workflow: wf ? n('wf') : 1,
      scopeTokens: scopeRates.map((_, i) => n(`st${i}`)),
      workloadBudget: Number(row.wb),
      exceptionBudget: Number(row.eb),
      scopeBudgets: scopeBudgets.map((_, i) => n(`sb${i}`)),
      outboxId: row.outbox_id,
    };
  }

  /** Read inside the same transaction: its pool connection is the one holding the row. */
  private async budgetDenial(tx: Tx, scope: BudgetScope, scopeId: string, periodStart: Date): Promise<Exclude<AdmitResult, { ok: true }>> {
    const acct = await prismaTx(tx).budgetAccount.findUnique({ where: { scope_scopeId_periodStart: { scope, scopeId, periodStart } } });
    const used = acct ? acct.pendingMicrousd + acct.unresolvedMicrousd + acct.settledMicrousd : 0n;
    const remaining = acct ? acct.budgetMicrousd - used : 0n;
    const quotaScope = scope === 'team' || scope === 'environment' ? quotaScopeName(scope, scopeId) : quotaScopeName(scope);
    return { ok: false, code: 'budget_exhausted', scope, quotaScope, remainingMicrousd: remaining > 0n ? remaining : 0n };
  }
}
