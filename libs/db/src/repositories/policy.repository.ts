import { randomUUID } from 'node:crypto';
import type { PolicyChangedV1 } from '@gateway/contracts';
import { Database, Tx } from '../database';
import { OutboxRepository } from './outbox.repository';

export interface RouteContractInput {
  routeId: string;
  alias: string;
  providerKind: string;
  upstreamBaseUrl: string;
  upstreamModel: string;
  candidateParam: string | null;
  maxCandidates: number;
  outputCapParam: string;
  outputCapSemantics: string | null;
  usageShape: string;
  streamingUsage: string;
  gatewayVersion: string;
  clientLibraryVersion: string;
  verificationTtlSeconds: number;
  actor: string;
  reason: string;
}

export interface WorkloadInput {
  id: string;
  team: string;
  environment: string;
  defaultMaxCandidates: number;
  perCandidateOutputCeiling: number;
  budgetMicrousd: bigint;
  budgetPeriod: 'day' | 'month';
  allowedAliases: string[];
  fallbackChain: string[];
  allowLength: boolean;
  allowContentFilter: boolean;
  deadlineMs: number;
  maxInFlight: number;
  tokensPerMinute: number | null;
  actor: string;
  reason: string;
}

export interface PriceInput {
  id: string;
  routeId: string;
  effectiveFrom: Date;
  inputPerMTokMicrousd: bigint;
  cachedInputPerMTokMicrousd: bigint;
  outputPerMTokMicrousd: bigint;
  reasoningPerMTokMicrousd: bigint;
  actor: string;
  reason: string;
}

/** Operator-side writes: routes and contract versions, workloads, keys, prices. */
export class PolicyRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  /** Creates the route or appends a new, unverified contract version to it. */
  async putRouteContract(input: RouteContractInput, now: Date): Promise<{ version: number }> {
    return this.db.transaction(async (tx) => {
      const route = await tx.route.findUnique({ where: { id: input.routeId } });
      const version = route ? route.currentVersion + 1 : 1;
      if (!route) {
        await tx.route.create({ data: { id: input.routeId, alias: input.alias, currentVersion: 0, createdAt: now } });
      }
      await tx.routeContractVersion.create({
        data: {
          id: randomUUID(),
          routeId: input.routeId,
          version,
          providerKind: input.providerKind,
          upstreamBaseUrl: input.upstreamBaseUrl,
          upstreamModel: input.upstreamModel,
          candidateParam: input.candidateParam,
          maxCandidates: input.maxCandidates,
          outputCapParam: input.outputCapParam,
          outputCapSemantics: input.outputCapSemantics,
          usageShape: input.usageShape,
          streamingUsage: input.streamingUsage,
          gatewayVersion: input.gatewayVersion,
          clientLibraryVersion: input.clientLibraryVersion,
          verificationTtlSeconds: input.verificationTtlSeconds,
          createdAt: now,
          createdBy: input.actor,
          changeReason: input.reason,
        },
      });
      await tx.route.update({ where: { id: input.routeId }, data: { currentVersion: version, alias: input.alias } });
      await this.changed(tx, 'route', input.routeId, `contract version ${version}`, input.actor, now);
      return { version };
    });
  }

  async verifyRoute(routeId: string, version: number, actor: string, notes: Record<string, unknown>, now: Date): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.routeContractVersion.update({
        where: { routeId_version: { routeId, version } },
        data: { verifiedAt: now, verifiedBy: actor, verificationNotes: notes as object },
      });
      await this.changed(tx, 'route', routeId, `contract version ${version} verified`, actor, now);
    });
  }

  async putWorkload(input: WorkloadInput, now: Date): Promise<void> {
    const { actor, reason, ...fields } = input;
    await this.db.transaction(async (tx) => {
      await tx.workload.upsert({
        where: { id: input.id },
        create: { ...fields, createdAt: now, updatedAt: now, updatedBy: actor, changeReason: reason },
        update: { ...fields, updatedAt: now, updatedBy: actor, changeReason: reason },
      });
      await this.changed(tx, 'workload', input.id, reason, actor, now);
    });
  }

  async putPrice(input: PriceInput, now: Date): Promise<void> {
    const { actor, reason, ...fields } = input;
    await this.db.transaction(async (tx) => {
      const existing = await tx.priceRevision.findUnique({ where: { id: input.id } });
      if (existing) return;
      await tx.priceRevision.create({ data: { ...fields, createdAt: now, createdBy: actor, reason } });
      await this.changed(tx, 'price_revision', input.id, reason, actor, now);
    });
  }

  /** Stores only the key's hash; the caller shows the key once. */
  async addApiKey(input: { id: string; workloadId: string; keyHash: string; keyPrefix: string; actor: string }, now: Date): Promise<void> {
    await this.db.transaction(async (tx) => {
      const existing = await tx.apiKey.findUnique({ where: { keyHash: input.keyHash } });
      if (existing) return;
      await tx.apiKey.create({
        data: { id: input.id, workloadId: input.workloadId, keyHash: input.keyHash, keyPrefix: input.keyPrefix, createdAt: now, createdBy: input.actor },
      });
      await this.changed(tx, 'api_key', input.id, 'issued', input.actor, now);
    });
  }

  async addOperatorToken(input: { id: string; subject: string; roles: string[]; tokenHash: string }, now: Date): Promise<void> {
    await this.db.prisma.operatorToken.upsert({
      where: { tokenHash: input.tokenHash },
      create: { ...input, createdAt: now },
      update: { roles: input.roles, subject: input.subject },
    });
  }

  async operatorByTokenHash(tokenHash: string): Promise<{ subject: string; roles: string[] } | null> {
    const t = await this.db.prisma.operatorToken.findUnique({ where: { tokenHash } });
    return t && !t.revokedAt ? { subject: t.subject, roles: t.roles } : null;
  }

  private async changed(tx: Tx, entity: PolicyChangedV1['entity'], entityId: string, change: string, actor: string, now: Date): Promise<void> {
    await this.outbox.append(tx, 'policyChanged', entityId, {
      event_id: randomUUID(),
      timestamp: now.toISOString(),
      entity,
      entity_id: entityId,
      change,
      actor,
    });
  }
}
