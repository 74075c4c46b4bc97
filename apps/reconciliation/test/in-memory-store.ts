/**
 * In-memory ReconciliationStore for use-case specs: the same rows and effects as the Postgres
 * repository, with transactions that roll back on error. Row locks are not modelled (the
 * integration test covers concurrency against Postgres).
 */
import type {
  BudgetAccountView,
  CaseQuery,
  CaseResolution,
  HoldMovement,
  LedgerRow,
  NewCase,
  ReconciliationActionView,
  ReconciliationAttemptView,
  ReconciliationCaseView,
  ReconciliationStore,
  ReservationView,
  Tx,
  AttemptEvidence,
} from '@gateway/db';
import { Topics } from '@gateway/contracts';
import type { ActionState, AttemptState, PriceRevision } from '@gateway/domain';

interface State {
  actions: Map<string, ReconciliationActionView>;
  attempts: Map<
    string,
    ReconciliationAttemptView & { usageSource: string | null; statusReason: string; tokens: Omit<AttemptEvidence, 'usageSource'> }
  >;
  reservations: Map<string, ReservationView & { statusReason: string }>;
  accounts: Map<string, BudgetAccountView>;
  cases: Map<string, ReconciliationCaseView>;
  ledger: Map<string, LedgerRow>;
  claims: Set<string>;
  inFlight: Map<string, number>;
}

const TX = {} as Tx;

export class InMemoryReconciliationStore implements ReconciliationStore {
  s: State = {
    actions: new Map(),
    attempts: new Map(),
    reservations: new Map(),
    accounts: new Map(),
    cases: new Map(),
    ledger: new Map(),
    claims: new Set(),
    inFlight: new Map(),
  };

  // ------------------------------------------------------------------ builders for specs

  addAccount(id: string, budget: bigint, scope = 'workload', scopeId = 'wl-1'): void {
    this.s.accounts.set(id, {
      id,
      scope,
      scopeId,
      periodStart: new Date('2026-11-01T00:00:00Z'),
      budgetMicrousd: budget,
      pendingMicrousd: 0n,
      unresolvedMicrousd: 0n,
      settledMicrousd: 0n,
      updatedAt: new Date(0),
    });
  }

  /** An admitted action with its reservation held on the given accounts (pending added to them). */
  addAdmitted(input: {
    actionId: string;
    workloadId?: string;
    reservedMicrousd: bigint;
    accountIds: string[];
    deadlineAt: Date;
    dispatchDeadlineAt: Date;
    status?: ActionState;
  }): void {
    const workloadId = input.workloadId ?? 'wl-1';
    this.s.actions.set(input.actionId, {
      id: input.actionId,
      workloadId,
      environment: 'dev',
      routeId: 'route-1',
      routeVersion: 1,
      modelAlias: 'approved-standard',
      streamMode: 'none',
      requestedCandidates: null,
      effectiveCandidates: 1,
      status: input.status ?? 'admitted',
      deadlineAt: input.deadlineAt,
      dispatchDeadlineAt: input.dispatchDeadlineAt,
    });
    this.s.reservations.set(input.actionId, {
      id: `res-${input.actionId}`,
      actionId: input.actionId,
      status: 'pending',
      statusReason: 'reserved at admission',
      reservedMicrousd: input.reservedMicrousd,
      settledMicrousd: 0n,
      unresolvedMicrousd: 0n,
      releasedMicrousd: 0n,
      priceRevisionId: 'price-1',
      accountIds: input.accountIds,
    });
    for (const id of input.accountIds) this.s.accounts.get(id)!.pendingMicrousd += input.reservedMicrousd;
    this.s.inFlight.set(workloadId, (this.s.inFlight.get(workloadId) ?? 0) + 1);
  }

  addAttempt(input: {
    attemptId: string;
    actionId: string;
    attemptNo?: number;
    status?: AttemptState;
    role?: ReconciliationAttemptView['role'];
  }): void {
    this.s.attempts.set(input.attemptId, {
      id: input.attemptId,
      actionId: input.actionId,
      attemptNo: input.attemptNo ?? 1,
      role: input.role ?? 'primary',
      routeId: 'route-1',
      routeVersion: 1,
      status: input.status ?? 'in_flight',
      statusReason: 'sent upstream',
      providerRequestId: null,
      returnedCandidates: null,
      startedAt: new Date('2026-11-30T09:00:00Z'),
      usageSource: null,
      tokens: {},
    });
    this.s.claims.add(input.actionId);
    const action = this.s.actions.get(input.actionId)!;
    if (action.status === 'admitted') action.status = 'dispatched';
  }

  addCase(c: Omit<ReconciliationCaseView, 'status' | 'resolvedAt' | 'resolvedBy' | 'resolution' | 'workloadId'>): void {
    this.s.cases.set(c.id, {
      ...c,
      workloadId: this.s.actions.get(c.actionId)?.workloadId ?? null,
      status: 'open',
      resolvedAt: null,
      resolvedBy: null,
      resolution: null,
    });
  }

  // ------------------------------------------------------------------ ReconciliationStore

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const before = structuredClone(this.s);
    try {
      return await fn(TX);
    } catch (err) {
      this.s = before;
      throw err;
    }
  }

  async admittedPastDispatchDeadline(cutoff: Date, limit: number): Promise<string[]> {
    return [...this.s.actions.values()]
      .filter((a) => a.status === 'admitted' && a.dispatchDeadlineAt < cutoff)
      .slice(0, limit)
      .map((a) => a.id);
  }

  async actionsWithInFlightAttemptsPastDeadline(cutoff: Date, limit: number): Promise<string[]> {
    const ids = [...this.s.attempts.values()]
      .filter((t) => t.status === 'in_flight' && this.s.actions.get(t.actionId)!.deadlineAt < cutoff)
      .map((t) => t.actionId);
    return [...new Set(ids)].slice(0, limit);
  }

  async lockUndispatchedExpiredAction(_tx: Tx, actionId: string, cutoff: Date): Promise<ReconciliationActionView | null> {
    const a = this.s.actions.get(actionId);
    return a && a.status === 'admitted' && a.dispatchDeadlineAt < cutoff ? { ...a } : null;
  }

  async lockOrphanedAttempts(_tx: Tx, actionId: string, cutoff: Date): Promise<ReconciliationAttemptView[]> {
    const action = this.s.actions.get(actionId);
    if (!action || !(action.deadlineAt < cutoff)) return [];
    return [...this.s.attempts.values()]
      .filter((t) => t.actionId === actionId && t.status === 'in_flight')
      .sort((a, b) => a.attemptNo - b.attemptNo)
      .map((t) => ({ ...t }));
  }

  async lockAction(_tx: Tx, actionId: string): Promise<ReconciliationActionView | null> {
    const a = this.s.actions.get(actionId);
    return a ? { ...a } : null;
  }

  async lockReservation(_tx: Tx, actionId: string): Promise<ReservationView | null> {
    const r = this.s.reservations.get(actionId);
    return r ? { ...r, accountIds: [...r.accountIds] } : null;
  }

  async hasDispatchClaim(_tx: Tx, actionId: string): Promise<boolean> {
    return this.s.claims.has(actionId);
  }

  async attempt(_tx: Tx, attemptId: string): Promise<ReconciliationAttemptView | null> {
    const t = this.s.attempts.get(attemptId);
    return t ? { ...t } : null;
  }

  async attemptsAwaitingSettlement(_tx: Tx, actionId: string): Promise<number> {
    return [...this.s.attempts.values()].filter(
      (t) => t.actionId === actionId && t.status !== 'settled' && t.status !== 'reconciliation_required',
    ).length;
  }

  async setActionStatus(_tx: Tx, actionId: string, status: ActionState): Promise<void> {
    this.s.actions.get(actionId)!.status = status;
  }

  async setAttemptStatus(
    _tx: Tx,
    attemptId: string,
    status: AttemptState,
    reason: string,
    _now: Date,
    evidence?: AttemptEvidence,
  ): Promise<void> {
    const t = this.s.attempts.get(attemptId)!;
    t.status = status;
    t.statusReason = reason;
    if (evidence) {
      const { usageSource, ...tokens } = evidence;
      t.usageSource = usageSource;
      t.tokens = tokens;
      if (tokens.providerRequestId) t.providerRequestId = tokens.providerRequestId;
    }
  }

  async releaseInFlightSlot(_tx: Tx, workloadId: string): Promise<void> {
    this.s.inFlight.set(workloadId, Math.max((this.s.inFlight.get(workloadId) ?? 0) - 1, 0));
  }

  async moveHold(_tx: Tx, r: ReservationView, m: HoldMovement): Promise<void> {
    const row = this.s.reservations.get(r.actionId)!;
    row.settledMicrousd += m.toSettledMicrousd;
    row.unresolvedMicrousd += m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd;
    row.releasedMicrousd += m.toReleasedMicrousd;
    row.status = m.status;
    row.statusReason = m.reason;
    for (const id of r.accountIds) {
      const a = this.s.accounts.get(id)!;
      a.pendingMicrousd -= m.fromPendingMicrousd;
      a.unresolvedMicrousd += m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd;
      a.settledMicrousd += m.toSettledMicrousd;
    }
  }

  async openCase(_tx: Tx, c: NewCase): Promise<boolean> {
    if ([...this.s.cases.values()].some((x) => x.attemptId === c.attemptId && x.reason === c.reason)) return false;
    this.addCase(c);
    return true;
  }

  async lockCase(_tx: Tx, caseId: string): Promise<ReconciliationCaseView | null> {
    const c = this.s.cases.get(caseId);
    return c ? { ...c } : null;
  }

  async resolveCase(_tx: Tx, caseId: string, r: CaseResolution): Promise<void> {
    const c = this.s.cases.get(caseId)!;
    Object.assign(c, {
      status: 'resolved',
      resolution: r.resolution,
      resolvedBy: r.resolvedBy,
      resolvedAt: r.resolvedAt,
      details: { ...c.details, ...r.details },
    });
  }

  async openExposureOnAction(_tx: Tx, actionId: string, exceptCaseId: string): Promise<bigint> {
    return [...this.s.cases.values()]
      .filter((c) => c.actionId === actionId && c.status === 'open' && c.id !== exceptCaseId)
      .reduce((sum, c) => sum + c.exposureMicrousd, 0n);
  }

  async insertLedger(_tx: Tx, row: LedgerRow): Promise<boolean> {
    if (this.s.ledger.has(row.attemptId)) return false;
    this.s.ledger.set(row.attemptId, row);
    return true;
  }

  async listCases(q: CaseQuery): Promise<ReconciliationCaseView[]> {
    return [...this.s.cases.values()]
      .filter((c) => (q.status ? c.status === q.status : true) && (q.workloadId ? c.workloadId === q.workloadId : true))
      .slice(0, q.limit);
  }

  async budgetAccounts(workloadId: string | null, limit: number): Promise<BudgetAccountView[]> {
    return [...this.s.accounts.values()].filter((a) => workloadId === null || a.scopeId === workloadId).slice(0, limit);
  }
}

/** Records outbox appends; the payload is checked against its topic's schema like the real outbox. */
export class RecordingOutbox {
  readonly events: Array<{ topic: string; key: string; payload: Record<string, unknown> }> = [];

  async append(_tx: Tx, topic: string, key: string, payload: unknown): Promise<void> {
    const spec = (Topics as Record<string, { schema: { parse(v: unknown): unknown } }>)[topic];
    this.events.push({ topic, key, payload: spec.schema.parse(payload) as Record<string, unknown> });
  }
}

export const silentLog = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** $2.50 / $1.25 / $10 / $10 per million tokens. */
export const PRICE: PriceRevision = {
  id: 'price-1',
  inputPerMTokMicrousd: 2_500_000n,
  cachedInputPerMTokMicrousd: 1_250_000n,
  outputPerMTokMicrousd: 10_000_000n,
  reasoningPerMTokMicrousd: 10_000_000n,
};

export const catalogWith = (price: PriceRevision | null = PRICE) => ({
  priceById: async (id: string) => (price && price.id === id ? price : null),
});
