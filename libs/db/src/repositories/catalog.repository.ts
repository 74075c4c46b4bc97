import type { ProviderKind } from '@gateway/contracts';
import type { ExceptionStatus, OutputCapSemantics } from '@gateway/domain';
import { Database } from '../database';
import { priceFromRow } from './price-revision.row';
import { ActiveException, PriceRevision, RouteContract, ScopeLimits, toScopeLimit, toWorkloadPolicy, WorkloadPolicy } from '../types';

/** Read side of policy: workloads by key hash, routes with their current contract, prices. */
export class CatalogRepository {
  private readonly pricesById = new Map<string, PriceRevision>();

  constructor(private readonly db: Database) {}

  async workloadByKeyHash(keyHash: string): Promise<WorkloadPolicy | null> {
    const key = await this.db.prisma.apiKey.findUnique({ where: { keyHash }, include: { workload: true } });
    if (!key || key.revokedAt) return null;
    return toWorkloadPolicy(key.workload);
  }

  /** The limits of a team and an environment, in one round trip. */
  async scopeLimitsFor(team: string, environment: string): Promise<ScopeLimits> {
    const rows = await this.db.prisma.scopeLimit.findMany({
      where: {
        OR: [
          { scope: 'team', scopeId: team },
          { scope: 'environment', scopeId: environment },
        ],
      },
    });
    const find = (scope: string) => rows.find((r) => r.scope === scope);
    const team_ = find('team');
    const env = find('environment');
    return { team: team_ ? toScopeLimit(team_) : null, environment: env ? toScopeLimit(env) : null };
  }

  /**
   * The contract admission serves: the newest *verified* version (at or below the current one),
   * so a new version waits for its verification while the previous verified one keeps serving
   * until it goes stale. With no verified version at all, the newest version is returned (and
   * admission refuses it as unverified rather than as an unknown route).
   */
  async routeByAlias(alias: string): Promise<RouteContract | null> {
    // One round trip: the route, its newest verified version and its newest version.
    const route = await this.db.prisma.route.findUnique({
      where: { alias },
      include: { versions: { where: { verifiedAt: { not: null } }, orderBy: { version: 'desc' }, take: 1 } },
    });
    if (!route) return null;
    const v =
      route.versions.find((x) => x.version <= route.currentVersion) ??
      (await this.db.prisma.routeContractVersion.findUnique({
        where: { routeId_version: { routeId: route.id, version: route.currentVersion } },
      }));
    if (!v) return null;
    return {
      routeId: route.id,
      alias: route.alias,
      routeCreatedAt: route.createdAt,
      version: v.version,
      providerKind: v.providerKind as ProviderKind,
      upstreamBaseUrl: v.upstreamBaseUrl,
      upstreamModel: v.upstreamModel,
      credentialRef: v.credentialRef,
      upstreamIdempotencyHeader: v.upstreamIdempotencyHeader,
      candidateParam: v.candidateParam,
      maxCandidates: v.maxCandidates,
      outputCapParam: v.outputCapParam,
      outputCapSemantics: v.outputCapSemantics as OutputCapSemantics | null,
      usageShape: v.usageShape,
      streamingUsage: v.streamingUsage,
      gatewayVersion: v.gatewayVersion,
      clientLibraryVersion: v.clientLibraryVersion,
      verifiedAt: v.verifiedAt,
      verifiedBy: v.verifiedBy,
      verificationTtlSeconds: v.verificationTtlSeconds,
      pricedFeatures: v.pricedFeatures,
      mediaInputTokens: {
        image: v.imageInputTokens,
        audio: v.audioInputTokens,
        video: v.videoInputTokens,
        document: v.documentInputTokens,
      },
    };
  }

  /** The revision in force at `at` (latest effective_from ≤ at). */
  async priceAt(routeId: string, at: Date): Promise<PriceRevision | null> {
    const p = await this.db.prisma.priceRevision.findFirst({
      where: { routeId, effectiveFrom: { lte: at } },
      orderBy: { effectiveFrom: 'desc' },
    });
    return p ? priceFromRow(p) : null;
  }

  /** Price revisions are immutable (a change is a new revision), so they are cached for good. */
  async priceById(id: string): Promise<PriceRevision | null> {
    const cached = this.pricesById.get(id);
    if (cached) return cached;
    const p = await this.db.prisma.priceRevision.findUnique({ where: { id } });
    if (!p) return null;
    const price = priceFromRow(p);
    if (this.pricesById.size > 10_000) this.pricesById.clear();
    this.pricesById.set(id, price);
    return price;
  }

  async activeExceptions(workloadId: string, now: Date): Promise<ActiveException[]> {
    const rows = await this.db.prisma.candidateException.findMany({
      where: { workloadId, status: 'active', expiresAt: { gt: now } },
      orderBy: { maxCandidates: 'desc' },
    });
    return rows.map((e) => ({
      id: e.id,
      workloadId: e.workloadId,
      routeId: e.routeId,
      maxCandidates: e.maxCandidates,
      perCandidateOutputCeiling: e.perCandidateOutputCeiling,
      budgetMicrousd: e.budgetMicrousd,
      expiresAt: e.expiresAt,
      status: e.status as ExceptionStatus,
      allowsStreaming: e.allowsStreaming,
      allowsDeterministicSampling: e.allowsDeterministicSampling,
    }));
  }
}
