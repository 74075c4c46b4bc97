import { randomBytes, randomUUID } from 'node:crypto';
import { hashCredential, HedgePolicy, OPERATIONS_WORKLOAD_ID, PriceRevision } from '@gateway/domain';
import { Database, HedgePolicyRepository, OutboxRepository, PolicyRepository, RouteContractInput, WorkloadInput } from '@gateway/db';

/**
 * Builders for routes, workloads, keys and operator tokens, written through the same
 * repositories the policy service uses. Shared by the demo seed and the integration/e2e tests.
 */
export function newWorkloadKey(): string {
  return `gw_${randomBytes(24).toString('base64url')}`;
}

export class Seeder {
  readonly policy: PolicyRepository;

  constructor(private readonly db: Database) {
    this.policy = new PolicyRepository(db, new OutboxRepository(db));
  }

  async route(
    input: Partial<RouteContractInput> &
      Pick<RouteContractInput, 'routeId' | 'alias' | 'providerKind' | 'upstreamBaseUrl' | 'upstreamModel'>,
    opts: { verified?: boolean; verifiedAt?: Date; price?: Partial<Prices> } = {},
  ): Promise<void> {
    const now = new Date();
    const gemini = input.providerKind === 'gemini-generate';
    const { version } = await this.policy.putRouteContract(
      {
        candidateParam: gemini ? 'candidateCount' : 'n',
        maxCandidates: 8,
        outputCapParam: gemini ? 'maxOutputTokens' : 'max_completion_tokens',
        outputCapSemantics: 'per_candidate',
        usageShape: gemini ? 'gemini.usageMetadata' : 'openai.usage',
        streamingUsage: gemini ? 'final_chunk_usageMetadata' : 'final_chunk_with_include_usage',
        gatewayVersion: '0.1.0',
        clientLibraryVersion: gemini ? '@google/genai@2.32.0' : 'openai@6.49.0',
        verificationTtlSeconds: 30 * 24 * 3600,
        actor: 'seed',
        reason: 'seeded',
        ...input,
      },
      now,
    );
    if (opts.verified ?? true) {
      await this.policy.verifyRoute(input.routeId, version, 'seed', { method: 'seeded as verified' }, opts.verifiedAt ?? now);
    }
    const p = { ...DEFAULT_PRICES, ...opts.price };
    await this.policy.putPrice(
      {
        id: `price-${input.routeId}-v1`,
        routeId: input.routeId,
        effectiveFrom: new Date('2026-01-01T00:00:00Z'),
        ...p,
        actor: 'seed',
        reason: 'seeded price',
      },
      now,
    );
  }

  async workload(input: Partial<WorkloadInput> & Pick<WorkloadInput, 'id'>): Promise<{ key: string }> {
    const now = new Date();
    await this.policy.putWorkload(
      {
        team: 'demo',
        environment: 'dev',
        defaultMaxCandidates: 1,
        perCandidateOutputCeiling: 256,
        budgetMicrousd: 50_000_000n,
        budgetPeriod: 'month',
        allowedAliases: [],
        fallbackChain: [],
        allowLength: true,
        allowContentFilter: false,
        deadlineMs: 15_000,
        maxInFlight: 64,
        tokensPerMinute: null,
        actor: 'seed',
        reason: 'seeded',
        ...input,
      },
      now,
    );
    return { key: await this.key(input.id) };
  }

  /**
   * Sets the operations workload's budget (what route verification probes are reserved against;
   * its migration creates it unfunded). Operators raise it through a budget change request.
   */
  async fundOperations(budgetMicrousd: bigint): Promise<void> {
    const ops = await this.policy.workloadById(OPERATIONS_WORKLOAD_ID);
    if (!ops) throw new Error(`the operations workload ${OPERATIONS_WORKLOAD_ID} is missing: is the database migrated?`);
    const { createdAt: _c, updatedAt: _u, updatedBy: _b, changeReason: _r, keys: _k, ...policy } = ops;
    await this.policy.putWorkload({ ...policy, budgetMicrousd, actor: 'seed', reason: 'seeded operations budget' }, new Date());
  }

  /**
   * Stores a hedge policy revision as the policy service does once approved (the same row writer),
   * workload-wide unless `routeId` is given; returns the revision id every attempt records.
   */
  async hedgePolicy(workloadId: string, settings: Omit<HedgePolicy, 'revisionId'>, routeId: string | null = null): Promise<string> {
    const repo = new HedgePolicyRepository(this.db, new OutboxRepository(this.db));
    const result = await repo.append(
      { ...settings, revisionId: randomUUID(), workloadId, routeId, createdBy: 'seed', reason: 'seeded hedge policy' },
      new Date(),
    );
    if (!result.ok) throw new Error(`hedge policy for ${workloadId}: ${result.reason}`);
    return result.revision.revisionId;
  }

  async key(workloadId: string, key = newWorkloadKey()): Promise<string> {
    await this.policy.addApiKey(
      { id: randomUUID(), workloadId, keyHash: hashCredential(key), keyPrefix: key.slice(0, 7), actor: 'seed' },
      new Date(),
    );
    return key;
  }

  async operator(subject: string, roles: string[], token = `op_${randomBytes(18).toString('base64url')}`): Promise<string> {
    await this.policy.addOperatorToken({ id: randomUUID(), subject, roles, tokenHash: hashCredential(token) }, new Date());
    return token;
  }

  /** An approved exception, written directly (tests of the approval flow use the policy API). */
  async approvedException(input: {
    workloadId: string;
    routeId?: string | null;
    maxCandidates: number;
    perCandidateOutputCeiling: number;
    budgetMicrousd: bigint;
    expiresAt: Date;
    allowsStreaming?: boolean;
    allowsDeterministicSampling?: boolean;
    requestedBy?: string;
    approvedBy?: string;
  }): Promise<string> {
    const id = randomUUID();
    const now = new Date();
    await this.db.prisma.candidateException.create({
      data: {
        id,
        workloadId: input.workloadId,
        routeId: input.routeId ?? null,
        owner: 'demo-owner',
        maxCandidates: input.maxCandidates,
        perCandidateOutputCeiling: input.perCandidateOutputCeiling,
        budgetMicrousd: input.budgetMicrousd,
        allowsStreaming: input.allowsStreaming ?? false,
        allowsDeterministicSampling: input.allowsDeterministicSampling ?? false,
        expiresAt: input.expiresAt,
        justification: 'seeded exception',
        status: 'active',
        requestedBy: input.requestedBy ?? 'seed-operator',
        requestedAt: now,
        updatedAt: now,
        events: {
          create: [
            {
              id: randomUUID(),
              event: 'request',
              fromStatus: null,
              toStatus: 'requested',
              actor: input.requestedBy ?? 'seed-operator',
              reason: 'seeded',
              at: now,
            },
            {
              id: randomUUID(),
              event: 'approve',
              fromStatus: 'requested',
              toStatus: 'active',
              actor: input.approvedBy ?? 'seed-approver',
              reason: 'seeded',
              at: now,
            },
          ],
        },
      },
    });
    return id;
  }
}

/** A route's prices: base rates and, optionally, the structure (tiers, fees, modality rates). */
export type Prices = Omit<PriceRevision, 'id'>;

/** $2.50 / $1.25 / $10 / $10 per million tokens. */
export const DEFAULT_PRICES: Prices = {
  inputPerMTokMicrousd: 2_500_000n,
  cachedInputPerMTokMicrousd: 1_250_000n,
  outputPerMTokMicrousd: 10_000_000n,
  reasoningPerMTokMicrousd: 10_000_000n,
};
