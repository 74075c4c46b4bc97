import { contractFields } from '@gateway/db';
import type {
  ApiKeyView,
  ChangeDecision,
  ChangeRequestView,
  DecideResult,
  AppendHedgePolicyResult,
  NewHedgePolicyRevision,
  NewChangeRequest,
  Tx,
  CreateRouteResult,
  ExceptionEventView,
  ExceptionTransition,
  ExceptionView,
  NewException,
  PriceInput,
  PriceRevisionView,
  RevokeKeyResult,
  RouteContractInput,
  RouteView,
  VerifyVersionResult,
  ScopeLimitInput,
  ScopeLimitView,
  StartExperimentResult,
  WorkloadInput,
  WorkloadView,
} from '@gateway/db';
import type { Clock, Entropy, IdGenerator } from '@gateway/service-kit';
import { Experiment, ExperimentPause, ExperimentReportRow, HedgePolicyRevision, startedExperiment } from '@gateway/domain';
import type {
  ChangeRequestStore,
  ExceptionStore,
  ExperimentStore,
  HedgePolicyStore,
  RouteStore,
  ScopeLimitStore,
  WorkloadStore,
} from '../ports';

/** A policyChanged event as the fakes record it (the real repositories write it to the outbox). */
export interface RecordedChange {
  entity: string;
  entityId: string;
  change: string;
  actor: string;
}

const clone = <T>(v: T): T => structuredClone(v);

/** In-memory PolicyRepository for use-case specs: same results, no database. */
export class InMemoryPolicyStore implements RouteStore, WorkloadStore, ScopeLimitStore {
  readonly routes = new Map<string, RouteView>();
  readonly workloads = new Map<string, Omit<WorkloadView, 'keys'>>();
  readonly keys = new Map<string, ApiKeyView & { keyHash: string }>();
  readonly changes: RecordedChange[] = [];

  async createRoute(input: RouteContractInput, now: Date): Promise<CreateRouteResult> {
    if (this.routes.has(input.routeId)) return { ok: false, reason: 'id_taken' };
    if ((await this.routeIdByAlias(input.alias)) !== null) return { ok: false, reason: 'alias_taken' };
    return { ok: true, ...(await this.putRouteContract(input, now)) };
  }

  async putRouteContract(input: RouteContractInput, now: Date): Promise<{ version: number }> {
    const route = this.routes.get(input.routeId) ?? {
      id: input.routeId,
      alias: input.alias,
      currentVersion: 0,
      createdAt: now,
      versions: [],
      prices: [],
    };
    const version = route.currentVersion + 1;
    route.versions.unshift({
      routeId: input.routeId,
      version,
      ...contractFields(input),
      verifiedAt: null,
      verifiedBy: null,
      verificationNotes: null,
      createdAt: now,
      createdBy: input.actor,
      changeReason: input.reason,
    });
    route.currentVersion = version;
    route.alias = input.alias;
    this.routes.set(input.routeId, route);
    this.changed('route', input.routeId, `contract version ${version}`, input.actor);
    return { version };
  }

  async routeById(routeId: string): Promise<RouteView | null> {
    const r = this.routes.get(routeId);
    return r ? clone(r) : null;
  }

  async routeIdByAlias(alias: string): Promise<string | null> {
    return [...this.routes.values()].find((r) => r.alias === alias)?.id ?? null;
  }

  async listRoutes(): Promise<RouteView[]> {
    return [...this.routes.values()].sort((a, b) => a.alias.localeCompare(b.alias)).map(clone);
  }

  async verifyCurrentVersion(
    routeId: string,
    version: number,
    actor: string,
    notes: Record<string, unknown>,
    now: Date,
  ): Promise<VerifyVersionResult> {
    const r = this.routes.get(routeId);
    if (!r) return 'not_found';
    if (r.currentVersion !== version) return 'not_current';
    const v = r.versions.find((x) => x.version === version)!;
    Object.assign(v, { verifiedAt: now, verifiedBy: actor, verificationNotes: clone(notes) });
    this.changed('route', routeId, `contract version ${version} verified`, actor);
    return 'verified';
  }

  async recordVerificationNotes(routeId: string, version: number, notes: Record<string, unknown>): Promise<void> {
    const v = this.routes.get(routeId)?.versions.find((x) => x.version === version);
    if (!v) throw new Error(`no version ${routeId}@${version}`);
    v.verificationNotes = clone(notes);
  }

  async putPrice(input: PriceInput, now: Date): Promise<void> {
    if ([...this.routes.values()].some((r) => r.prices.some((p) => p.id === input.id))) return;
    const r = this.routes.get(input.routeId);
    if (!r) throw new Error(`foreign key: no route ${input.routeId}`);
    const { actor, reason, ...fields } = input;
    r.prices.push({ ...fields, createdAt: now, createdBy: actor, reason });
    r.prices.sort((a, b) => b.effectiveFrom.getTime() - a.effectiveFrom.getTime());
    this.changed('price_revision', input.id, reason, actor);
  }

  async priceById(id: string): Promise<PriceRevisionView | null> {
    for (const r of this.routes.values()) {
      const p = r.prices.find((x) => x.id === id);
      if (p) return clone(p);
    }
    return null;
  }

  async putWorkload(input: WorkloadInput, now: Date): Promise<void> {
    const { actor, reason, ...fields } = input;
    const existing = this.workloads.get(input.id);
    this.workloads.set(input.id, {
      ...fields,
      createdAt: existing?.createdAt ?? now,
      updatedAt: now,
      updatedBy: actor,
      changeReason: reason,
    });
    this.changed('workload', input.id, reason, actor);
  }

  readonly scopeLimits = new Map<string, ScopeLimitView>();

  async putScopeLimit(input: ScopeLimitInput, now: Date): Promise<void> {
    const { actor, reason, ...fields } = input;
    const key = `${input.scope}/${input.scopeId}`;
    const existing = this.scopeLimits.get(key);
    this.scopeLimits.set(key, { ...fields, createdAt: existing?.createdAt ?? now, updatedAt: now, updatedBy: actor, changeReason: reason });
    this.changes.push({ entity: 'scope_limit', entityId: key, change: reason, actor });
  }

  async scopeLimit(scope: string, scopeId: string): Promise<ScopeLimitView | null> {
    const l = this.scopeLimits.get(`${scope}/${scopeId}`);
    return l ? clone(l) : null;
  }

  async listScopeLimits(): Promise<ScopeLimitView[]> {
    return [...this.scopeLimits.values()].map(clone);
  }

  async workloadById(id: string): Promise<WorkloadView | null> {
    const w = this.workloads.get(id);
    if (!w) return null;
    const keys = [...this.keys.values()].filter((k) => k.workloadId === id).map(({ keyHash: _hash, ...k }) => k);
    return clone({ ...w, keys });
  }

  async addApiKey(input: { id: string; workloadId: string; keyHash: string; keyPrefix: string; actor: string }, now: Date): Promise<void> {
    if ([...this.keys.values()].some((k) => k.keyHash === input.keyHash)) return;
    if (!this.workloads.has(input.workloadId)) throw new Error(`foreign key: no workload ${input.workloadId}`);
    this.keys.set(input.id, {
      id: input.id,
      workloadId: input.workloadId,
      keyHash: input.keyHash,
      keyPrefix: input.keyPrefix,
      createdAt: now,
      createdBy: input.actor,
      revokedAt: null,
      revokedBy: null,
      revokedReason: null,
    });
    this.changed('api_key', input.id, 'issued', input.actor);
  }

  async apiKeyById(id: string): Promise<ApiKeyView | null> {
    const k = this.keys.get(id);
    if (!k) return null;
    const { keyHash: _hash, ...view } = k;
    return clone(view);
  }

  async revokeApiKey(input: { workloadId: string; keyId: string; actor: string; reason: string }, now: Date): Promise<RevokeKeyResult> {
    const k = this.keys.get(input.keyId);
    if (!k || k.workloadId !== input.workloadId) return { ok: false, reason: 'not_found' };
    if (k.revokedAt) return { ok: false, reason: 'already_revoked' };
    Object.assign(k, { revokedAt: now, revokedBy: input.actor, revokedReason: input.reason });
    this.changed('api_key', input.keyId, `revoked: ${input.reason}`, input.actor);
    return { ok: true, key: (await this.apiKeyById(input.keyId))! };
  }

  /** The workload a key hash belongs to (CatalogRepository.workloadByKeyHash's contract: revoked keys find nothing). */
  async workloadByKeyHash(keyHash: string): Promise<{ id: string } | null> {
    const k = [...this.keys.values()].find((x) => x.keyHash === keyHash && !x.revokedAt);
    return k ? { id: k.workloadId } : null;
  }

  private changed(entity: string, entityId: string, change: string, actor: string): void {
    this.changes.push({ entity, entityId, change, actor });
  }
}

/** In-memory ExceptionRepository: the same compare-and-set and audit rows, no database. */
export class InMemoryExceptionStore implements ExceptionStore {
  readonly rows = new Map<string, ExceptionView>();
  readonly events: ExceptionEventView[] = [];
  readonly changes: RecordedChange[] = [];
  /** Makes the next transition lose a race, as if someone else moved the row first. */
  loseNextRace = false;

  async create(input: NewException, now: Date): Promise<ExceptionView> {
    const row: ExceptionView = {
      ...input,
      requestProjection: input.requestProjection && { ...input.requestProjection, at: now },
      status: 'requested',
      requestedAt: now,
      updatedAt: now,
      approvalProjection: null,
      overrideReason: null,
    };
    this.rows.set(input.id, row);
    this.audit(input.id, 'request', null, 'requested', input.requestedBy, input.justification, now);
    return clone(row);
  }

  async findById(id: string): Promise<ExceptionView | null> {
    const r = this.rows.get(id);
    return r ? clone(r) : null;
  }

  async eventsOf(exceptionId: string): Promise<ExceptionEventView[]> {
    return this.events.filter((e) => e.exceptionId === exceptionId).map(clone);
  }

  async list(filter: { workloadId: string | null; limit: number }): Promise<ExceptionView[]> {
    return [...this.rows.values()]
      .filter((r) => filter.workloadId === null || r.workloadId === filter.workloadId)
      .sort((a, b) => b.requestedAt.getTime() - a.requestedAt.getTime())
      .slice(0, filter.limit)
      .map(clone);
  }

  async transition(t: ExceptionTransition): Promise<boolean> {
    const r = this.rows.get(t.id);
    if (this.loseNextRace) {
      this.loseNextRace = false;
      return false;
    }
    const unexpired = r !== undefined && r.expiresAt.getTime() > t.now.getTime();
    if (!r || r.status !== t.from || unexpired !== (t.expiry === 'unexpired')) return false;
    r.status = t.to;
    r.updatedAt = t.now;
    if (t.approval) {
      r.approvalProjection = t.approval.projection && { ...t.approval.projection, at: t.now };
      r.overrideReason = t.approval.overrideReason;
    }
    this.audit(t.id, t.event, t.from, t.to, t.actor, t.reason, t.now, t.approval?.overrideReason ?? null);
    return true;
  }

  async dueForExpiry(now: Date, limit: number): Promise<ExceptionView[]> {
    return [...this.rows.values()]
      .filter((r) => (r.status === 'requested' || r.status === 'active') && r.expiresAt.getTime() <= now.getTime())
      .slice(0, limit)
      .map(clone);
  }

  private audit(
    exceptionId: string,
    event: ExceptionEventView['event'],
    from: ExceptionView['status'] | null,
    to: ExceptionView['status'],
    actor: string,
    reason: string,
    at: Date,
    overrideReason: string | null = null,
  ): void {
    this.events.push({
      id: `evt-${this.events.length + 1}`,
      exceptionId,
      event,
      fromStatus: from,
      toStatus: to,
      actor,
      reason,
      at,
      overrideReason,
    });
    this.changes.push({ entity: 'exception', entityId: exceptionId, change: `${event}: ${from ?? 'none'} -> ${to}`, actor });
  }
}

/** A clock the spec moves by hand. */
export class FakeClock implements Clock {
  constructor(private current: Date) {}
  now(): Date {
    return new Date(this.current);
  }
  set(d: Date): void {
    this.current = new Date(d);
  }
  advance(ms: number): void {
    this.current = new Date(this.current.getTime() + ms);
  }
}

/** Deterministic "random" bytes: 0, 1, 2, ... */
export const countingEntropy: Entropy = {
  bytes: (n) => Buffer.from(Array.from({ length: n }, (_, i) => i % 256)),
};

/** Ids `<prefix>-1`, `<prefix>-2`, ... in the order they are asked for. */
export class SequentialIds implements IdGenerator {
  private n = 0;
  constructor(private readonly prefix = 'id') {}
  next(): string {
    return `${this.prefix}-${++this.n}`;
  }
}

/** In-memory ChangeRequestRepository: decided once, the apply step runs before the status moves. */
export class InMemoryChangeRequestStore implements ChangeRequestStore {
  readonly rows = new Map<string, ChangeRequestView>();

  async create(input: NewChangeRequest, now: Date): Promise<ChangeRequestView> {
    const row: ChangeRequestView = {
      ...input,
      status: 'pending',
      requestedAt: now,
      decidedBy: null,
      decidedAt: null,
      decisionReason: null,
    };
    this.rows.set(input.id, row);
    return clone(row);
  }

  async findById(id: string): Promise<ChangeRequestView | null> {
    const r = this.rows.get(id);
    return r ? clone(r) : null;
  }

  async list(filter: { status?: ChangeRequestView['status']; limit: number }): Promise<ChangeRequestView[]> {
    return [...this.rows.values()]
      .filter((r) => filter.status === undefined || r.status === filter.status)
      .sort((a, b) => b.requestedAt.getTime() - a.requestedAt.getTime())
      .slice(0, filter.limit)
      .map(clone);
  }

  async decide(d: ChangeDecision, apply: (tx: Tx, request: ChangeRequestView) => Promise<void>): Promise<DecideResult> {
    const r = this.rows.get(d.id);
    if (!r) return { ok: false, reason: 'not_found', request: null };
    if (r.status !== 'pending') return { ok: false, reason: 'not_pending', request: clone(r) };
    if (r.requestedBy === d.decidedBy) return { ok: false, reason: 'self_approval', request: clone(r) };
    if (d.status === 'approved') await apply(NO_TX, clone(r));
    Object.assign(r, { status: d.status, decidedBy: d.decidedBy, decidedAt: d.now, decisionReason: d.reason });
    return { ok: true, request: clone(r) };
  }
}

/** The fakes have no transactions; their writes ignore the token. */
const NO_TX = Object.freeze({}) as Tx;

/** In-memory HedgePolicyRepository: revisions numbered per (workload, route) scope. */
export class InMemoryHedgePolicyStore implements HedgePolicyStore {
  readonly rows: HedgePolicyRevision[] = [];

  async append(input: NewHedgePolicyRevision, now: Date): Promise<AppendHedgePolicyResult> {
    const last = this.rows.filter((r) => r.workloadId === input.workloadId && r.routeId === input.routeId).length;
    const revision: HedgePolicyRevision = { ...clone(input), revision: last + 1, createdAt: now };
    this.rows.push(revision);
    return { ok: true, revision: clone(revision) };
  }

  async hedgePolicyFor(workloadId: string, routeId: string | null): Promise<HedgePolicyRevision | null> {
    const latest = (route: string | null) =>
      this.rows.filter((r) => r.workloadId === workloadId && r.routeId === route).sort((a, b) => b.revision - a.revision)[0];
    const found = (routeId === null ? undefined : latest(routeId)) ?? latest(null);
    return found ? clone(found) : null;
  }

  async history(workloadId: string): Promise<HedgePolicyRevision[]> {
    return (
      this.rows
        .filter((r) => r.workloadId === workloadId)
        // route ids are never empty, so the workload-wide scope ('') sorts first
        .sort((a, b) => (a.routeId ?? '').localeCompare(b.routeId ?? '') || b.revision - a.revision)
        .map(clone)
    );
  }
}

/** In-memory ExperimentRepository: one running experiment per workload, the revision's premium copied at start. */
export class InMemoryExperimentStore implements ExperimentStore {
  readonly rows: Experiment[] = [];

  constructor(private readonly hedging: InMemoryHedgePolicyStore) {}

  async start(input: Parameters<ExperimentStore['start']>[0], now: Date): Promise<StartExperimentResult> {
    const revision = this.hedging.rows.find((r) => r.revisionId === input.hedgePolicyRevisionId && r.workloadId === input.workloadId);
    if (!revision) return { ok: false, reason: 'policy_revision_not_found' };
    const running = this.rows.find((e) => e.workloadId === input.workloadId && e.status === 'running');
    if (running) return { ok: false, reason: 'already_running', runningId: running.id };
    const experiment = startedExperiment(clone(input), revision.approvedPremiumMicrousd, now);
    this.rows.push(experiment);
    return { ok: true, experiment: clone(experiment) };
  }

  /** the report's action rows, as a test sets them (the database builds them from actions, attempts and the ledger) */
  readonly reportRowsById = new Map<string, ExperimentReportRow[]>();

  async reportRows(id: string): Promise<ExperimentReportRow[]> {
    return this.reportRowsById.get(id) ?? [];
  }

  /** the stored pauses, as a test sets them (dispatch records them in the database) */
  readonly pausesById = new Map<string, ExperimentPause[]>();

  async pausesOf(id: string): Promise<ExperimentPause[]> {
    return this.pausesById.get(id) ?? [];
  }

  async stop(id: string, actor: string, reason: string, now: Date): Promise<Experiment | null> {
    const e = this.rows.find((x) => x.id === id);
    if (!e) return null;
    if (e.status === 'running') Object.assign(e, { status: 'stopped', stoppedAt: now, stoppedBy: actor, stopReason: reason });
    return clone(e);
  }

  async findById(id: string): Promise<Experiment | null> {
    const e = this.rows.find((x) => x.id === id);
    return e ? clone(e) : null;
  }

  async listByWorkload(workloadId: string): Promise<Experiment[]> {
    return this.rows
      .filter((e) => e.workloadId === workloadId)
      .reverse()
      .map(clone);
  }
}
