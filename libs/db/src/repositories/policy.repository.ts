import { randomUUID } from 'node:crypto';
import type { PolicyChangedV1 } from '@gateway/contracts';
import { Database, isUniqueViolation, Tx, prismaTx } from '../database';
import type { PriceRevision } from '@gateway/domain';
import { OutboxRepository } from './outbox.repository';
import { priceFromRow, PriceRow, priceToRow } from './price-revision.row';
import { ScopeLimit, toScopeLimit, toWorkloadPolicy, WorkloadPolicy } from '../types';

/** The fields that define a route contract version (any change makes a new, unverified version). */
export interface ContractFields {
  providerKind: string;
  upstreamBaseUrl: string;
  upstreamModel: string;
  /** name of the upstream credential (never its value); null or omitted: none */
  credentialRef?: string | null;
  /** the upstream's idempotency header name; null or omitted: none */
  upstreamIdempotencyHeader?: string | null;
  candidateParam: string | null;
  maxCandidates: number;
  outputCapParam: string;
  outputCapSemantics: string | null;
  usageShape: string;
  streamingUsage: string;
  gatewayVersion: string;
  clientLibraryVersion: string;
  verificationTtlSeconds: number;
  /** price-changing features the contract prices; omitted = none (the database default) */
  pricedFeatures?: string[];
  /** input tokens per media item; omitted = the database defaults (libs/domain DEFAULT_MEDIA_INPUT_TOKENS) */
  imageInputTokens?: number;
  audioInputTokens?: number;
  videoInputTokens?: number;
  documentInputTokens?: number;
}

/** Exactly the contract-defining fields of `c` (so extra properties never reach storage). */
export function contractFields(c: ContractFields): ContractFields {
  return {
    providerKind: c.providerKind,
    upstreamBaseUrl: c.upstreamBaseUrl,
    upstreamModel: c.upstreamModel,
    credentialRef: c.credentialRef,
    upstreamIdempotencyHeader: c.upstreamIdempotencyHeader,
    candidateParam: c.candidateParam,
    maxCandidates: c.maxCandidates,
    outputCapParam: c.outputCapParam,
    outputCapSemantics: c.outputCapSemantics,
    usageShape: c.usageShape,
    streamingUsage: c.streamingUsage,
    gatewayVersion: c.gatewayVersion,
    clientLibraryVersion: c.clientLibraryVersion,
    verificationTtlSeconds: c.verificationTtlSeconds,
    pricedFeatures: c.pricedFeatures,
    imageInputTokens: c.imageInputTokens,
    audioInputTokens: c.audioInputTokens,
    videoInputTokens: c.videoInputTokens,
    documentInputTokens: c.documentInputTokens,
  };
}

export interface RouteContractInput extends ContractFields {
  routeId: string;
  alias: string;
  actor: string;
  reason: string;
}

/** A workload's policy as an operator sets it, with who changed it and why. */
export interface WorkloadInput extends Omit<
  WorkloadPolicy,
  'budgetPeriod' | 'allowProviderStorage' | 'maxCallsPerWorkflow' | 'workflowWindowSeconds' | 'workflowIdField'
> {
  budgetPeriod: 'day' | 'month';
  /** omitted = false (the database default): the provider may not keep prompts */
  allowProviderStorage?: boolean;
  /** fan-out settings; omitted = the database defaults (no limit, 60 s, header only) */
  maxCallsPerWorkflow?: number | null;
  workflowWindowSeconds?: number;
  workflowIdField?: string | null;
  actor: string;
  reason: string;
}

/** A new revision: the domain prices (base rates and structure), when they apply, who and why. */
export type PriceInput = PriceRevision & {
  routeId: string;
  effectiveFrom: Date;
  actor: string;
  reason: string;
};

/** One immutable contract version, as the policy API shows it. */
export interface RouteContractVersionView extends ContractFields {
  routeId: string;
  version: number;
  verifiedAt: Date | null;
  verifiedBy: string | null;
  verificationNotes: unknown;
  createdAt: Date;
  createdBy: string;
  changeReason: string;
}

/** One stored revision: the full domain prices, and when, by whom and why. */
export type PriceRevisionView = PriceRevision & {
  routeId: string;
  effectiveFrom: Date;
  createdAt: Date;
  createdBy: string;
  reason: string;
};

/** A route with every contract version (newest first) and every price revision (newest first). */
export interface RouteView {
  id: string;
  alias: string;
  currentVersion: number;
  createdAt: Date;
  versions: RouteContractVersionView[];
  prices: PriceRevisionView[];
}

export interface ApiKeyView {
  id: string;
  workloadId: string;
  keyPrefix: string;
  createdAt: Date;
  createdBy: string;
  revokedAt: Date | null;
  revokedBy: string | null;
  revokedReason: string | null;
}

export interface WorkloadView extends Omit<WorkloadInput, 'actor' | 'reason'> {
  createdAt: Date;
  updatedAt: Date;
  updatedBy: string;
  changeReason: string;
  keys: ApiKeyView[];
}

/** A team's or an environment's limits as an operator sets them. */
export interface ScopeLimitInput extends ScopeLimit {
  actor: string;
  reason: string;
}

export interface ScopeLimitView extends ScopeLimit {
  createdAt: Date;
  updatedAt: Date;
  updatedBy: string;
  changeReason: string;
}

export type CreateRouteResult = { ok: true; version: number } | { ok: false; reason: 'id_taken' | 'alias_taken' };
export interface OperatorTokenView {
  id: string;
  subject: string;
  roles: string[];
  createdAt: Date;
  expiresAt: Date | null;
  revokedAt: Date | null;
}

export type VerifyVersionResult = 'verified' | 'not_found' | 'not_current';
export type RevokeKeyResult = { ok: true; key: ApiKeyView } | { ok: false; reason: 'not_found' | 'already_revoked' };

/** Operator-side writes and reads: routes and contract versions, workloads, keys, prices. */
export class PolicyRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  /** Creates the route or appends a new, unverified contract version to it. */
  async putRouteContract(input: RouteContractInput, now: Date, outer?: Tx): Promise<{ version: number }> {
    return this.inTx(outer, async (tx) => {
      const route = await lockRoute(tx, input.routeId);
      if (!route) {
        await prismaTx(tx).route.create({ data: { id: input.routeId, alias: input.alias, currentVersion: 0, createdAt: now } });
      }
      return this.appendVersion(tx, input, route ? route.currentVersion + 1 : 1, now);
    });
  }

  /** Creates a new route with its first contract version; never touches an existing route. */
  async createRoute(input: RouteContractInput, now: Date): Promise<CreateRouteResult> {
    try {
      return await this.db.transaction(async (tx) => {
        if (await prismaTx(tx).route.findUnique({ where: { id: input.routeId } }))
          return { ok: false as const, reason: 'id_taken' as const };
        if (await prismaTx(tx).route.findUnique({ where: { alias: input.alias } }))
          return { ok: false as const, reason: 'alias_taken' as const };
        await prismaTx(tx).route.create({ data: { id: input.routeId, alias: input.alias, currentVersion: 0, createdAt: now } });
        const { version } = await this.appendVersion(tx, input, 1, now);
        return { ok: true as const, version };
      });
    } catch (err) {
      // A concurrent create of the same id or alias lost the race on the unique index.
      if (!isUniqueViolation(err)) throw err;
      const byId = await this.db.prisma.route.findUnique({ where: { id: input.routeId } });
      return { ok: false, reason: byId ? 'id_taken' : 'alias_taken' };
    }
  }

  async verifyRoute(routeId: string, version: number, actor: string, notes: Record<string, unknown>, now: Date): Promise<void> {
    await this.db.transaction(async (tx) => {
      await prismaTx(tx).routeContractVersion.update({
        where: { routeId_version: { routeId, version } },
        data: { verifiedAt: now, verifiedBy: actor, verificationNotes: notes as object },
      });
      await this.changed(tx, 'route', routeId, `contract version ${version} verified`, actor, now);
    });
  }

  /**
   * Records a verification on `version` only while it is still the route's current version
   * (the route row is locked, so a concurrent contract change cannot slip in between).
   */
  async verifyCurrentVersion(
    routeId: string,
    version: number,
    actor: string,
    notes: Record<string, unknown>,
    now: Date,
  ): Promise<VerifyVersionResult> {
    return this.db.transaction(async (tx) => {
      const route = await lockRoute(tx, routeId);
      if (!route) return 'not_found';
      if (route.currentVersion !== version) return 'not_current';
      await prismaTx(tx).routeContractVersion.update({
        where: { routeId_version: { routeId, version } },
        data: { verifiedAt: now, verifiedBy: actor, verificationNotes: notes as object },
      });
      await this.changed(tx, 'route', routeId, `contract version ${version} verified`, actor, now);
      return 'verified';
    });
  }

  /** Keeps the evidence of a refused verification without touching verified_at / verified_by. */
  async recordVerificationNotes(routeId: string, version: number, notes: Record<string, unknown>): Promise<void> {
    await this.db.prisma.routeContractVersion.update({
      where: { routeId_version: { routeId, version } },
      data: { verificationNotes: notes as object },
    });
  }

  async routeById(routeId: string): Promise<RouteView | null> {
    const r = await this.db.prisma.route.findUnique({
      where: { id: routeId },
      include: {
        versions: { orderBy: { version: 'desc' } },
        priceRevisions: { orderBy: [{ effectiveFrom: 'desc' }, { createdAt: 'desc' }] },
      },
    });
    return r ? toRouteView(r) : null;
  }

  async routeIdByAlias(alias: string): Promise<string | null> {
    const r = await this.db.prisma.route.findUnique({ where: { alias }, select: { id: true } });
    return r?.id ?? null;
  }

  async listRoutes(): Promise<RouteView[]> {
    const rows = await this.db.prisma.route.findMany({
      orderBy: { alias: 'asc' },
      include: {
        versions: { orderBy: { version: 'desc' } },
        priceRevisions: { orderBy: [{ effectiveFrom: 'desc' }, { createdAt: 'desc' }] },
      },
    });
    return rows.map(toRouteView);
  }

  async putWorkload(input: WorkloadInput, now: Date, outer?: Tx): Promise<void> {
    const { actor, reason, ...fields } = input;
    await this.inTx(outer, async (tx) => {
      await prismaTx(tx).workload.upsert({
        where: { id: input.id },
        create: { ...fields, createdAt: now, updatedAt: now, updatedBy: actor, changeReason: reason },
        update: { ...fields, updatedAt: now, updatedBy: actor, changeReason: reason },
      });
      await this.changed(tx, 'workload', input.id, reason, actor, now);
    });
  }

  async putScopeLimit(input: ScopeLimitInput, now: Date, outer?: Tx): Promise<void> {
    const { actor, reason, ...fields } = input;
    await this.inTx(outer, async (tx) => {
      await prismaTx(tx).scopeLimit.upsert({
        where: { scope_scopeId: { scope: input.scope, scopeId: input.scopeId } },
        create: { ...fields, createdAt: now, updatedAt: now, updatedBy: actor, changeReason: reason },
        update: { ...fields, updatedAt: now, updatedBy: actor, changeReason: reason },
      });
      await this.changed(tx, 'scope_limit', `${input.scope}/${input.scopeId}`, reason, actor, now);
    });
  }

  async scopeLimit(scope: string, scopeId: string): Promise<ScopeLimitView | null> {
    const r = await this.db.prisma.scopeLimit.findUnique({ where: { scope_scopeId: { scope, scopeId } } });
    return r ? toScopeLimitView(r) : null;
  }

  async listScopeLimits(): Promise<ScopeLimitView[]> {
    const rows = await this.db.prisma.scopeLimit.findMany({ orderBy: [{ scope: 'asc' }, { scopeId: 'asc' }] });
    return rows.map(toScopeLimitView);
  }

  async workloadById(id: string): Promise<WorkloadView | null> {
    const w = await this.db.prisma.workload.findUnique({ where: { id }, include: { apiKeys: { orderBy: { createdAt: 'asc' } } } });
    if (!w) return null;
    return {
      ...toWorkloadPolicy(w),
      createdAt: w.createdAt,
      updatedAt: w.updatedAt,
      updatedBy: w.updatedBy,
      changeReason: w.changeReason,
      keys: w.apiKeys.map(toKeyView),
    };
  }

  async putPrice(input: PriceInput, now: Date, outer?: Tx): Promise<void> {
    const { actor, reason, routeId, effectiveFrom } = input;
    await this.inTx(outer, async (tx) => {
      const existing = await prismaTx(tx).priceRevision.findUnique({ where: { id: input.id } });
      if (existing) return;
      await prismaTx(tx).priceRevision.create({
        data: { ...priceToRow(input), routeId, effectiveFrom, createdAt: now, createdBy: actor, reason },
      });
      await this.changed(tx, 'price_revision', input.id, reason, actor, now);
    });
  }

  async priceById(id: string): Promise<PriceRevisionView | null> {
    const p = await this.db.prisma.priceRevision.findUnique({ where: { id } });
    return p ? toPriceView(p) : null;
  }

  /** Stores only the key's hash; the caller shows the key once. */
  async addApiKey(input: { id: string; workloadId: string; keyHash: string; keyPrefix: string; actor: string }, now: Date): Promise<void> {
    await this.db.transaction(async (tx) => {
      const existing = await prismaTx(tx).apiKey.findUnique({ where: { keyHash: input.keyHash } });
      if (existing) return;
      await prismaTx(tx).apiKey.create({
        data: {
          id: input.id,
          workloadId: input.workloadId,
          keyHash: input.keyHash,
          keyPrefix: input.keyPrefix,
          createdAt: now,
          createdBy: input.actor,
        },
      });
      await this.changed(tx, 'api_key', input.id, 'issued', input.actor, now);
    });
  }

  async apiKeyById(id: string): Promise<ApiKeyView | null> {
    const k = await this.db.prisma.apiKey.findUnique({ where: { id } });
    return k ? toKeyView(k) : null;
  }

  /** Revokes once: the conditional update makes a second revocation a no-op the caller can report. */
  async revokeApiKey(input: { workloadId: string; keyId: string; actor: string; reason: string }, now: Date): Promise<RevokeKeyResult> {
    return this.db.transaction(async (tx) => {
      const { count } = await prismaTx(tx).apiKey.updateMany({
        where: { id: input.keyId, workloadId: input.workloadId, revokedAt: null },
        data: { revokedAt: now, revokedBy: input.actor, revokedReason: input.reason },
      });
      const key = await prismaTx(tx).apiKey.findUnique({ where: { id: input.keyId } });
      if (!key || key.workloadId !== input.workloadId) return { ok: false as const, reason: 'not_found' as const };
      if (count === 0) return { ok: false as const, reason: 'already_revoked' as const };
      await this.changed(tx, 'api_key', input.keyId, `revoked: ${input.reason}`, input.actor, now);
      return { ok: true as const, key: toKeyView(key) };
    });
  }

  async addOperatorToken(
    input: { id: string; subject: string; roles: string[]; tokenHash: string; expiresAt?: Date | null },
    now: Date,
  ): Promise<void> {
    await this.db.prisma.operatorToken.upsert({
      where: { tokenHash: input.tokenHash },
      create: { ...input, expiresAt: input.expiresAt ?? null, createdAt: now },
      update: { roles: input.roles, subject: input.subject },
    });
  }

  /** A token counts while it is neither revoked nor past its expiry (judged by the database clock). */
  async operatorByTokenHash(tokenHash: string): Promise<{ subject: string; roles: string[] } | null> {
    const rows = await this.db.prisma.$queryRaw<Array<{ subject: string; roles: string[] }>>`
      SELECT subject, roles FROM operator_token
      WHERE token_hash = ${tokenHash} AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`;
    return rows[0] ?? null;
  }

  async listOperatorTokens(): Promise<OperatorTokenView[]> {
    const rows = await this.db.prisma.operatorToken.findMany({ orderBy: { createdAt: 'asc' } });
    return rows.map((t) => ({
      id: t.id,
      subject: t.subject,
      roles: t.roles,
      createdAt: t.createdAt,
      expiresAt: t.expiresAt,
      revokedAt: t.revokedAt,
    }));
  }

  /** Revokes once; false when the token does not exist or was revoked already. */
  async revokeOperatorToken(id: string, now: Date): Promise<boolean> {
    const { count } = await this.db.prisma.operatorToken.updateMany({ where: { id, revokedAt: null }, data: { revokedAt: now } });
    return count === 1;
  }

  /** Joins the caller's transaction (an approved change request) or opens one. */
  private inTx<T>(outer: Tx | undefined, fn: (tx: Tx) => Promise<T>): Promise<T> {
    return outer ? fn(outer) : this.db.transaction(fn);
  }

  private async appendVersion(tx: Tx, input: RouteContractInput, version: number, now: Date): Promise<{ version: number }> {
    await prismaTx(tx).routeContractVersion.create({
      data: {
        id: randomUUID(),
        routeId: input.routeId,
        version,
        ...contractFields(input),
        createdAt: now,
        createdBy: input.actor,
        changeReason: input.reason,
      },
    });
    await prismaTx(tx).route.update({ where: { id: input.routeId }, data: { currentVersion: version, alias: input.alias } });
    await this.changed(tx, 'route', input.routeId, `contract version ${version}`, input.actor, now);
    return { version };
  }

  private async changed(
    tx: Tx,
    entity: PolicyChangedV1['entity'],
    entityId: string,
    change: string,
    actor: string,
    now: Date,
  ): Promise<void> {
    await this.outbox.policyChanged(tx, { entity, entityId, change, actor, now });
  }
}

/** Serialises contract changes and verifications of one route. */
async function lockRoute(tx: Tx, routeId: string): Promise<{ currentVersion: number } | null> {
  const rows = await prismaTx(tx).$queryRaw<Array<{ current_version: number }>>`
    SELECT current_version FROM route WHERE id = ${routeId} FOR UPDATE`;
  return rows.length > 0 ? { currentVersion: rows[0].current_version } : null;
}

type PriceViewRow = PriceRow & { routeId: string; effectiveFrom: Date; createdAt: Date; createdBy: string; reason: string };

function toPriceView(p: PriceViewRow): PriceRevisionView {
  return {
    ...priceFromRow(p),
    routeId: p.routeId,
    effectiveFrom: p.effectiveFrom,
    createdAt: p.createdAt,
    createdBy: p.createdBy,
    reason: p.reason,
  };
}

function toKeyView(k: ApiKeyView): ApiKeyView {
  return {
    id: k.id,
    workloadId: k.workloadId,
    keyPrefix: k.keyPrefix,
    createdAt: k.createdAt,
    createdBy: k.createdBy,
    revokedAt: k.revokedAt,
    revokedBy: k.revokedBy,
    revokedReason: k.revokedReason,
  };
}

function toRouteView(r: {
  id: string;
  alias: string;
  currentVersion: number;
  createdAt: Date;
  versions: RouteContractVersionView[];
  priceRevisions: PriceViewRow[];
}): RouteView {
  return {
    id: r.id,
    alias: r.alias,
    currentVersion: r.currentVersion,
    createdAt: r.createdAt,
    versions: r.versions.map((v) => ({
      routeId: v.routeId,
      version: v.version,
      providerKind: v.providerKind,
      upstreamBaseUrl: v.upstreamBaseUrl,
      upstreamModel: v.upstreamModel,
      credentialRef: v.credentialRef,
      upstreamIdempotencyHeader: v.upstreamIdempotencyHeader,
      candidateParam: v.candidateParam,
      maxCandidates: v.maxCandidates,
      outputCapParam: v.outputCapParam,
      outputCapSemantics: v.outputCapSemantics,
      usageShape: v.usageShape,
      streamingUsage: v.streamingUsage,
      gatewayVersion: v.gatewayVersion,
      clientLibraryVersion: v.clientLibraryVersion,
      verificationTtlSeconds: v.verificationTtlSeconds,
      pricedFeatures: v.pricedFeatures,
      imageInputTokens: v.imageInputTokens,
      audioInputTokens: v.audioInputTokens,
      videoInputTokens: v.videoInputTokens,
      documentInputTokens: v.documentInputTokens,
      verifiedAt: v.verifiedAt,
      verifiedBy: v.verifiedBy,
      verificationNotes: v.verificationNotes,
      createdAt: v.createdAt,
      createdBy: v.createdBy,
      changeReason: v.changeReason,
    })),
    prices: r.priceRevisions.map(toPriceView),
  };
}

function toScopeLimitView(
  r: Parameters<typeof toScopeLimit>[0] & { createdAt: Date; updatedAt: Date; updatedBy: string; changeReason: string },
): ScopeLimitView {
  return { ...toScopeLimit(r), createdAt: r.createdAt, updatedAt: r.updatedAt, updatedBy: r.updatedBy, changeReason: r.changeReason };
}
