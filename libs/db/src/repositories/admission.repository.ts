import { AdmissionDecisionV1, Topics } from '@gateway/contracts';
import { COUNTER_SCOPES, pendingOf, planReserve, quotaScopeName, ScopeKind } from '@gateway/domain';
import { Database, PreparedStatement } from '../database';
import { OutboxRepository } from './outbox.repository';
import { StatementGroups } from '../statement-groups';

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
    /** the running experiment and the action's cohort in it (issue 11); absent or null: none */
    experimentId?: string | null;
    cohort?: 'hedged' | 'holdout' | 'ineligible' | null;
  };
  reservation: { id: string; reservedOutputTokens: number; reservedMicrousd: bigint; priceRevisionId: string };
  workloadBudget: { budgetMicrousd: bigint; periodStart: Date };
  exceptionBudget: { exceptionId: string; budgetMicrousd: bigint } | null;
  concurrency: { scope: 'workload'; scopeId: string; maxInFlight: number };
  /** tokens per minute for the workload: input estimate + reserved output, counted at admission */
  tokenRate: { scopeId: string; windowStart: Date; tokens: number; limit: number } | null;
  decisionEvent: AdmissionDecisionV1;
  /**
   * Tokens per minute of the workload's team and environment, in that order (the lock order).
   * `instanceId` set: the limit is kept on this gateway instance's own counter.
   */
  scopeTokenRates?: ScopeTokenRate[];
  /** Calls per workflow id per window (fan-out); scopeId is `<workload>/<sha-256 of the id>`. */
  workflowCalls?: { scopeId: string; windowStart: Date; limit: number } | null;
  /** Budgets of the workload's team and environment, in that order (the lock order). */
  scopeBudgets?: ScopeBudget[];
  /** what the action row and its settled events record as the scopes that applied */
  quotaScope?: string;
  workflowIdHash?: string | null;
}

export interface ScopeTokenRate {
  scope: ScopeKind;
  scopeId: string;
  instanceId: string | null;
  windowStart: Date;
  tokens: number;
  limit: number;
}

export interface ScopeBudget {
  scope: ScopeKind;
  scopeId: string;
  budgetMicrousd: bigint;
  periodStart: Date;
}

export type BudgetScope = 'workload' | 'exception' | ScopeKind;

export type AdmitResult =
  | { ok: true }
  | { ok: false; code: 'budget_exhausted'; scope: BudgetScope; quotaScope: string; remainingMicrousd: bigint }
  | { ok: false; code: 'concurrency_limit_exceeded'; inFlight: number }
  | { ok: false; code: 'token_quota_exceeded'; limit: number; quotaScope: string }
  | { ok: false; code: 'fanout_limit_exceeded'; limit: number }
  | { ok: false; code: 'idempotency_conflict' };

/** What `admission_admit` answers per admission: the step that refused, or the outbox row it wrote. */
interface Decision {
  refused: string | null;
  outboxId: bigint | null;
}

/** One admission as the `admission_admit` function takes it, with what its group commit needs. */
interface PreparedAdmission {
  item: unknown;
  outbox: { topic: string; key: string; payload: unknown };
  maxWaitMs: number;
}

/**
 * The prepared statement of every admission (prisma/migrations/20261202010000_admission_admit_function).
 *
 * Its commit does not wait for the WAL flush (`synchronous_commit` off for this transaction only,
 * set before the commit by the select list). Nothing outside Postgres acts on an admission until a
 * later commit that waits for the flush: dispatch sends nothing upstream before its claim commits,
 * and the claim, which reads the action this statement wrote, commits after it in the WAL, so its
 * flush is this one's too. A crash of the server before then undoes the admission and the
 * command that names it is refused at the claim (no such action); nothing was sent or billed. The
 * statement's decision events wait for the flush in `OutboxRepository.committedBeforeFlush`
 * (docs/decisions.md, "The admission's commit does not wait for the disk").
 */
const ADMIT: PreparedStatement = {
  name: 'admission_admit_unflushed',
  text: `SELECT refused, outbox_id, set_config('synchronous_commit', 'off', true) AS commit_mode,
    pg_postmaster_start_time()::text AS server_started
  FROM admission_admit($1::jsonb)`,
};

/**
 * At most this many admissions per statement by default. bench:hot-budget on a quiet 2-core box
 * (2026-12-03, 200 in flight, one hot row): groups of at most 50 / 100 / 200 gave 4,103 / 5,529 /
 * 5,864 reservations/s at 220 / 179 / 132 µs of Postgres CPU each: the statement's own cost and
 * the row's lock hand-over spread over more admissions.
 */
const MAX_GROUP = 200;

/**
 * At most this many per statement for admissions whose group is always decided one admission at
 * a time (a workflow fan-out limit: `admission_admit_group` does not take them), each in a
 * subtransaction: a transaction with more than 64 subtransactions that wrote makes every other
 * backend's snapshot check `pg_subtrans` while it runs. A fast-path group that goes the slow way
 * after all (its token window's counter row not created yet: the first group of each minute; a
 * key taken concurrently) may still run up to `MAX_GROUP` of them, once, for a few tens of ms.
 */
const SLOW_MAX_GROUP = 50;

/**
 * Group statements of one workload in flight at once (`StatementGroups` lanes): a second one starts
 * only when a whole group (`MAX_GROUP`) is waiting behind the first, so under a hot workload the
 * next group is already on its way, waiting on the rows' locks in Postgres while the first
 * commits, and the rows are never idle between two statements; below that, admissions wait to
 * form a larger group as before. bench:hot-budget, alternating pairs on one box (groups of 50,
 * 200 in flight): 2,247 / 3,003 / 2,870 / 2,571 / 2,312 → 3,346 / 3,724 / 3,584 / 2,857 / 4,086
 * reservations/s (the first three pairs with a second lane always open, the last two as here);
 * three lanes measured worse. Two groups are decided in the order their statements take the first
 * row lock; within a group, in arrival order.
 */
const LANES = 2;

/** The group-commit defaults, for the benches that compare against them. */
export const ADMISSION_GROUPS = { maxGroup: MAX_GROUP, slowMaxGroup: SLOW_MAX_GROUP, lanes: LANES } as const;

const EXCEPTION_PERIOD = new Date(0);

/**
 * Admission's reservation (DESIGN §3 step 2): in-flight ceiling, token quotas, budget(s), action,
 * reservation and the decision event commit together or not at all. Budget holds are conditional
 * upserts, so pending + unresolved + settled never exceeds the budget under any concurrency.
 *
 * All of it is one autocommit statement calling the `admission_admit` function, which decides a
 * list of admissions in order, each in its own subtransaction: a refusal undoes that admission's
 * writes only. The hot rows are locked for one statement and its commit, never across an
 * event-loop turn. Group commit: admissions of the same workload (same counters and accounts)
 * that arrive while one of its statements runs, or in the same event-loop turn, wait and go
 * together in the next statement — one round trip and one commit for the group, each decided
 * exactly as if alone in sequence.
 */
export class AdmissionRepository {
  private readonly groups: StatementGroups<PreparedAdmission, Decision>;
  private readonly slowGroups: StatementGroups<PreparedAdmission, Decision>;

  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
    private readonly opts: { groupCommit?: boolean; maxGroup?: number; lanes?: number } = {},
  ) {
    const lanes = opts.lanes ?? LANES;
    const maxGroup = opts.maxGroup ?? MAX_GROUP;
    this.groups = new StatementGroups((admissions) => this.decide(admissions), maxGroup, lanes);
    this.slowGroups = new StatementGroups((admissions) => this.decide(admissions), Math.min(maxGroup, SLOW_MAX_GROUP), lanes);
  }

  /**
   * `signal`: the admission is wanted no longer once it aborts (its client left). Until its
   * statement starts it is dropped, rejected with the signal's reason, and nothing is reserved;
   * after that it completes as ever (the caller withdraws what it will not dispatch).
   */
  async admit(input: AdmitInput, opts: { signal?: AbortSignal } = {}): Promise<AdmitResult> {
    const admission = prepare(input);
    const key = this.opts.groupCommit === false ? null : groupKey(input);
    const groups = input.workflowCalls ? this.slowGroups : this.groups;
    opts.signal?.throwIfAborted();
    const decision = key === null ? (await this.decide([admission]))[0] : await groups.submit(key, admission, opts.signal);
    return this.result(input, decision);
  }

  /** One statement, in autocommit, deciding `admissions` in order. */
  private async decide(admissions: PreparedAdmission[]): Promise<Decision[]> {
    // A pool connection that comes after an action's deadline is of no use: wait at most until then
    // (the caller answers 503 service_unavailable when the pool cannot serve in time).
    const maxWaitMs = Math.min(...admissions.map((a) => a.maxWaitMs));
    const rows = await this.db.query<{ refused: string | null; outbox_id: string | null; server_started: string }>(
      ADMIT,
      [JSON.stringify(admissions.map((a) => a.item))],
      { maxWaitMs },
    );
    const decisions = rows.map((r) => ({ refused: r.refused, outboxId: r.outbox_id === null ? null : BigInt(r.outbox_id) }));
    const committed = decisions.flatMap((d, i) => (d.outboxId === null ? [] : [{ id: d.outboxId, ...admissions[i].outbox }]));
    if (rows.length > 0) this.outbox.committedBeforeFlush(committed, rows[0].server_started);
    return decisions;
  }

  private async result(input: AdmitInput, decision: Decision): Promise<AdmitResult> {
    const step = decision.refused;
    if (step === null) return { ok: true };
    const [name, index] = step.split(':');
    const i = Number(index);
    switch (name) {
      case 'slot':
        return { ok: false, code: 'concurrency_limit_exceeded', inFlight: input.concurrency.maxInFlight };
      case 'tokens':
        return { ok: false, code: 'token_quota_exceeded', limit: input.tokenRate?.limit ?? 0, quotaScope: 'workload' };
      case 'workflow':
        return { ok: false, code: 'fanout_limit_exceeded', limit: input.workflowCalls?.limit ?? 0 };
      case 'scope_tokens': {
        const t = (input.scopeTokenRates ?? [])[i];
        return { ok: false, code: 'token_quota_exceeded', limit: t.limit, quotaScope: quotaScopeName(t.scope, t.scopeId, t.instanceId) };
      }
      case 'workload_budget':
        return this.budgetDenial('workload', input.action.workloadId, input.workloadBudget.periodStart);
      case 'exception_budget':
        return this.budgetDenial('exception', input.exceptionBudget!.exceptionId, EXCEPTION_PERIOD);
      case 'scope_budget': {
        const b = (input.scopeBudgets ?? [])[i];
        return this.budgetDenial(b.scope, b.scopeId, b.periodStart);
      }
      case 'unique_violation':
        return { ok: false, code: 'idempotency_conflict' };
      default:
        throw new Error(`admission_admit refused at an unknown step: ${step}`);
    }
  }

  /** Informational, read after the refusal in autocommit: what was left when this request asked. */
  private async budgetDenial(scope: BudgetScope, scopeId: string, periodStart: Date): Promise<Exclude<AdmitResult, { ok: true }>> {
    const acct = await this.db.prisma.budgetAccount.findUnique({ where: { scope_scopeId_periodStart: { scope, scopeId, periodStart } } });
    const used = acct ? acct.pendingMicrousd + acct.unresolvedMicrousd + acct.settledMicrousd : 0n;
    const remaining = acct ? acct.budgetMicrousd - used : 0n;
    const quotaScope = scope === 'team' || scope === 'environment' ? quotaScopeName(scope, scopeId) : quotaScopeName(scope);
    return { ok: false, code: 'budget_exhausted', scope, quotaScope, remainingMicrousd: remaining > 0n ? remaining : 0n };
  }

  /** A denial writes only its (sanitised) decision event. */
  async recordDenial(workloadKey: string, event: AdmissionDecisionV1): Promise<void> {
    await this.db.transaction((tx) => this.outbox.append(tx, 'admissionDecisions', workloadKey, event));
  }

  async findByIdempotencyKey(
    workloadId: string,
    key: string,
  ): Promise<{ id: string; requestFingerprint: string; status: string; streamMode: string } | null> {
    const a = await this.db.prisma.action.findUnique({
      where: { workloadId_idempotencyKey: { workloadId, idempotencyKey: key } },
      select: { id: true, requestFingerprint: true, status: true, streamMode: true },
    });
    return a;
  }
}

/** Deterministic, so every instance names the same account for the same scope and period. */
export function budgetAccountId(scope: string, scopeId: string, periodStart: Date): string {
  return `${scope}:${scopeId}:${periodStart.toISOString()}`;
}

/**
 * Admissions that lock the same rows (one workload's in-flight and token counters and budget
 * account, one exception) share a statement; the group then takes its row locks in the order of
 * docs/architecture.md, as one admission does (a workflow counter differs per admission, but
 * whoever locks it has locked the workload's in-flight counter first). Admissions on team or
 * environment quotas go alone (null): those rows are shared with other workloads, whose requests
 * must be decided in arrival order against them, not a whole group of one workload at a time.
 */
function groupKey(input: AdmitInput): string | null {
  if ((input.scopeTokenRates ?? []).length > 0 || (input.scopeBudgets ?? []).length > 0) return null;
  const t = input.tokenRate;
  return JSON.stringify([
    input.action.workloadId,
    input.concurrency.scopeId,
    t ? [t.scopeId, t.windowStart.getTime()] : null,
    input.workloadBudget.periodStart.getTime(),
    input.exceptionBudget?.exceptionId ?? null,
  ]);
}

/** The JSON `admission_admit_one` reads (prisma/migrations/20261202010000_admission_admit_function). */
function prepare(input: AdmitInput): PreparedAdmission {
  const a = input.action;
  // The hold admission places is the domain's reserve plan: the whole worst case pending.
  const hold = pendingOf(planReserve(input.reservation.reservedMicrousd));
  const t = input.tokenRate;
  const w = input.workloadBudget;
  const e = input.exceptionBudget;
  const wf = input.workflowCalls ?? null;
  const scopeBudgets = input.scopeBudgets ?? [];
  const workloadAccountId = budgetAccountId('workload', a.workloadId, w.periodStart);
  const exceptionAccountId = e ? budgetAccountId('exception', e.exceptionId, EXCEPTION_PERIOD) : null;
  const scopeAccountIds = scopeBudgets.map((b) => budgetAccountId(b.scope, b.scopeId, b.periodStart));
  const event = Topics.admissionDecisions.schema.parse(input.decisionEvent);
  const outbox = { topic: Topics.admissionDecisions.name, key: a.workloadId, payload: event };
  // Budget accounts in lock order: workload, exception, team, environment.
  const budgets = [
    {
      step: 'workload_budget',
      id: workloadAccountId,
      scope: 'workload',
      scope_id: a.workloadId,
      period_start: w.periodStart,
      budget: w.budgetMicrousd,
    },
    ...(e
      ? [
          {
            step: 'exception_budget',
            id: exceptionAccountId,
            scope: 'exception',
            scope_id: e.exceptionId,
            period_start: EXCEPTION_PERIOD,
            budget: e.budgetMicrousd,
          },
        ]
      : []),
    ...scopeBudgets.map((b, i) => ({
      step: `scope_budget:${i}`,
      id: scopeAccountIds[i],
      scope: b.scope,
      scope_id: b.scopeId,
      period_start: b.periodStart,
      budget: b.budgetMicrousd,
    })),
  ].map((b) => ({ ...b, period_start: b.period_start.toISOString(), budget: String(b.budget) }));
  const item = {
    hold: String(hold),
    slot: { scope: input.concurrency.scope, scope_id: input.concurrency.scopeId, max: input.concurrency.maxInFlight },
    tok: t ? { scope_id: t.scopeId, window_start: t.windowStart.toISOString(), tokens: t.tokens, limit: t.limit } : null,
    wf: wf ? { scope: COUNTER_SCOPES.workflow, scope_id: wf.scopeId, window_start: wf.windowStart.toISOString(), limit: wf.limit } : null,
    st: (input.scopeTokenRates ?? []).map((s) => ({
      scope: COUNTER_SCOPES[s.scope],
      scope_id: s.scopeId,
      window_start: s.windowStart.toISOString(),
      instance_id: s.instanceId ?? '',
      tokens: s.tokens,
      limit: s.limit,
    })),
    budgets,
    action: {
      id: a.id,
      workload_id: a.workloadId,
      environment: a.environment,
      route_id: a.routeId,
      route_version: a.routeVersion,
      model_alias: a.modelAlias,
      api_kind: a.apiKind,
      stream_mode: a.streamMode,
      requested_candidates: a.requestedCandidates,
      effective_candidates: a.effectiveCandidates,
      output_ceiling: a.outputCeiling,
      input_tokens_estimate: a.inputTokensEstimate,
      exception_id: a.exceptionId,
      idempotency_key: a.idempotencyKey,
      request_fingerprint: a.requestFingerprint,
      deadline_at: a.deadlineAt.toISOString(),
      dispatch_deadline_at: a.dispatchDeadlineAt.toISOString(),
      now: input.now.toISOString(),
      request_id: event.request_id,
      quota_scope: input.quotaScope ?? event.quota_scope,
      workflow_id_hash: input.workflowIdHash ?? null,
      experiment_id: a.experimentId ?? null,
      cohort: a.cohort ?? null,
    },
    reservation: {
      id: input.reservation.id,
      workload_account_id: workloadAccountId,
      exception_account_id: exceptionAccountId,
      scope_account_ids: scopeAccountIds,
      reserved_output_tokens: input.reservation.reservedOutputTokens,
      price_revision_id: input.reservation.priceRevisionId,
    },
    outbox: { event_id: event.event_id, ...outbox },
  };
  const maxWaitMs = Math.max(100, Math.min(5000, a.deadlineAt.getTime() - input.now.getTime()));
  return { item, outbox, maxWaitMs };
}
