/**
 * In-memory fake of every repository reconciliation's use cases use (ReconciliationStore and the
 * case, ledger, hold and attempt ports): the same rows and effects as the Postgres repositories,
 * including the events the case and ledger writers append, with transactions that roll back on
 * error. Row locks are not modelled (the integration test covers concurrency against Postgres).
 */
import type {
  AttemptEvidence,
  BudgetAccountView,
  CaseQuery,
  CaseResolution,
  LedgerRow,
  NewCase,
  ReconciliationActionView,
  ReconciliationAttemptView,
  ReconciliationCaseView,
  ReconciliationStore,
  ReservationView,
  Tx,
  Undispatchable,
  UndispatchedActionLock,
} from '@gateway/db';
import { usageSettledEvent } from '@gateway/db';
import { SanitisedFields, Topics } from '@gateway/contracts';
import {
  ActionState,
  applyMovement,
  attemptMachine,
  AttemptEvent,
  AttemptState,
  awaitsSettlement,
  Movement,
  PriceRevision,
} from '@gateway/domain';
import type { SweepConfig } from '../src/reconciliation.config';
import type { AttemptPort, CasePort, HoldPort, LedgerPort } from '../src/usecases/ports';
import { SweepReservations } from '../src/usecases/sweep-reservations/sweep-reservations.usecase';

interface State {
  actions: Map<string, ReconciliationActionView>;
  attempts: Map<
    string,
    ReconciliationAttemptView & {
      usageSource: string | null;
      statusReason: string;
      financialState: string | null;
      tokens: Omit<AttemptEvidence, 'usageSource'>;
    }
  >;
  reservations: Map<string, Omit<ReservationView, 'actionStatus'> & { statusReason: string }>;
  accounts: Map<string, BudgetAccountView>;
  cases: Map<string, ReconciliationCaseView>;
  ledger: Map<string, LedgerRow>;
  claims: Set<string>;
  inFlight: Map<string, number>;
}

const TX = {} as Tx;

export class InMemoryReconciliationStore implements ReconciliationStore, LedgerPort, AttemptPort {
  readonly outbox = new RecordingOutbox();

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
      requestId: `req-${input.actionId}`,
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
    holdMicrousd?: bigint | null;
    priceRevisionId?: string | null;
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
      holdMicrousd: input.holdMicrousd ?? null,
      winner: false,
      policyRevisionId: null,
      priceRevisionId: input.priceRevisionId ?? null,
      usageSource: null,
      financialState: null,
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
    const events = this.outbox.events.length;
    try {
      return await fn(TX);
    } catch (err) {
      this.s = before;
      this.outbox.events.length = events;
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

  async lockUndispatchedActions(_tx: Tx, actionIds: readonly string[], why: Undispatchable): Promise<Map<string, UndispatchedActionLock>> {
    const locks = new Map<string, UndispatchedActionLock>();
    for (const id of actionIds) {
      const a = this.s.actions.get(id);
      if (a && a.status === 'admitted' && (why === 'withdrawn' || a.dispatchDeadlineAt < why.deadlinePassedBefore))
        locks.set(id, { workloadId: a.workloadId, status: a.status, claimed: this.s.claims.has(id) });
    }
    return locks;
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

  async setActionStatus(_tx: Tx, actionIds: readonly string[], status: ActionState): Promise<void> {
    for (const id of actionIds) this.s.actions.get(id)!.status = status;
  }

  async releaseInFlightSlots(_tx: Tx, workloadIds: readonly string[]): Promise<void> {
    for (const wl of workloadIds) this.s.inFlight.set(wl, Math.max((this.s.inFlight.get(wl) ?? 0) - 1, 0));
  }

  // ------------------------------------------------------------------ attempts

  async lockAttempt(_tx: Tx, attemptId: string): Promise<boolean> {
    return this.s.attempts.has(attemptId);
  }

  async byId(_tx: Tx, attemptId: string): Promise<ReconciliationAttemptView | null> {
    const t = this.s.attempts.get(attemptId);
    return t ? { ...t } : null;
  }

  async transition(_tx: Tx, attemptId: string, event: AttemptEvent, reason: string, _now: Date, evidence?: AttemptEvidence): Promise<void> {
    const t = this.s.attempts.get(attemptId)!;
    // the real repository is a compare-and-set on the states the machine allows
    t.status = attemptMachine.transition(t.status, event);
    t.statusReason = reason;
    if (event === 'settle') t.financialState = 'settled';
    if (event === 'require_reconciliation') t.financialState = 'unresolved';
    if (evidence) {
      const { usageSource, ...tokens } = evidence;
      t.usageSource = usageSource;
      t.tokens = tokens;
      if (tokens.providerRequestId) t.providerRequestId = tokens.providerRequestId;
    }
  }

  async awaitingSettlement(_tx: Tx, actionId: string): Promise<number> {
    return [...this.s.attempts.values()].filter((t) => t.actionId === actionId && awaitsSettlement(t.status as AttemptState)).length;
  }

  // ------------------------------------------------------------------ holds

  /** The hold port (its `lock` takes an action id; the case port's takes a case id). */
  readonly holds: HoldPort = {
    lock: async (_tx, actionId) => {
      const r = this.s.reservations.get(actionId);
      return r ? { ...r, accountIds: [...r.accountIds], actionStatus: this.s.actions.get(actionId)!.status } : null;
    },
    lockMany: async (tx, actionIds) => {
      const locked = new Map<string, ReservationView>();
      for (const id of actionIds) {
        const r = await this.holds.lock(tx, id);
        if (r) locked.set(id, r);
      }
      return locked;
    },
    move: (tx, r, m, reason) => this.move(tx, r, m, reason),
    // no experiment allowance here: every step lands on the reservation's accounts
    moveMany: async (tx, moves) => {
      for (const { r, steps, reason } of moves) for (const m of steps) await this.move(tx, r, m, reason);
    },
  };

  async move(_tx: Tx, r: ReservationView, m: Movement, reason: string): Promise<void> {
    const row = this.s.reservations.get(r.actionId)!;
    Object.assign(row, applyMovement(row, m), { statusReason: reason });
    for (const id of r.accountIds) {
      const a = this.s.accounts.get(id)!;
      a.pendingMicrousd -= m.fromPendingMicrousd;
      a.unresolvedMicrousd += m.toUnresolvedMicrousd - m.fromUnresolvedMicrousd;
      a.settledMicrousd += m.toSettledMicrousd;
    }
  }

  // ------------------------------------------------------------------ cases

  readonly cases: CasePort = {
    open: (tx, c, announce) => this.open(tx, c, announce),
    lock: async (_tx, caseId) => {
      const c = this.s.cases.get(caseId);
      return c ? { ...c } : null;
    },
    resolve: (tx, caseId, r) => this.resolve(tx, caseId, r),
    openExposureOnAction: (tx, actionId, exceptCaseId) => this.openExposureOnAction(tx, actionId, exceptCaseId),
    list: (q) => this.list(q),
  };

  async open(_tx: Tx, c: NewCase, announce: { eventId: string; fields: SanitisedFields }): Promise<boolean> {
    if ([...this.s.cases.values()].some((x) => x.attemptId === c.attemptId && x.reason === c.reason)) return false;
    this.addCase(c);
    await this.outbox.append(TX, 'reconciliationRequired', announce.fields.workload_id ?? 'unknown', {
      ...announce.fields,
      event_id: announce.eventId,
      case_id: c.id,
      reason: c.reason,
      exposure_microusd: c.exposureMicrousd.toString(),
    });
    return true;
  }

  async resolve(_tx: Tx, caseId: string, r: CaseResolution): Promise<void> {
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

  async list(q: CaseQuery): Promise<ReconciliationCaseView[]> {
    return [...this.s.cases.values()]
      .filter((c) => (q.status ? c.status === q.status : true) && (q.workloadId ? c.workloadId === q.workloadId : true))
      .slice(0, q.limit);
  }

  // ------------------------------------------------------------------ ledger

  async record(_tx: Tx, row: LedgerRow, eventId: string): Promise<boolean> {
    if (this.s.ledger.has(row.attemptId)) return false;
    this.s.ledger.set(row.attemptId, row);
    await this.outbox.append(TX, 'usageSettled', row.workloadId, usageSettledEvent(row, eventId));
    return true;
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

/** Deterministic ids (valid UUIDs, as event ids must be). */
export function sequentialIds(): { next(): string } {
  let n = 0;
  return { next: () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}` };
}

/** The real sweeper over the fake, so case fixtures are what production makes. */
export function sweeperFor(store: InMemoryReconciliationStore, config: SweepConfig = ORPHAN_SWEEP): SweepReservations {
  return new SweepReservations(store, store.cases, store.holds, store, config, sequentialIds(), silentLog);
}

const ORPHAN_SWEEP: SweepConfig = { intervalMs: 0, orphanGraceMs: 60_000, dispatchClockSkewMs: 0, batchSize: 10 };
