import type { ExceptionStatus, MediaInputTokens, OutputCapSemantics, PriceRevision } from '@gateway/domain';
import type { ProviderKind } from '@gateway/contracts';

/** Read models returned by repositories: plain data, no Prisma types. */

export interface WorkloadPolicy {
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
  /** the workload lets the provider keep prompts (OpenAI `store`); otherwise the gateway sends `store: false` */
  allowProviderStorage: boolean;
}

export interface RouteContract {
  routeId: string;
  alias: string;
  /** when the route (not this version) was created: the model list's `created` */
  routeCreatedAt: Date;
  version: number;
  providerKind: ProviderKind;
  upstreamBaseUrl: string;
  upstreamModel: string;
  /** name of the upstream credential dispatch resolves; null: none */
  credentialRef: string | null;
  candidateParam: string | null;
  maxCandidates: number;
  outputCapParam: string;
  outputCapSemantics: OutputCapSemantics | null;
  usageShape: string;
  streamingUsage: string;
  gatewayVersion: string;
  clientLibraryVersion: string;
  verifiedAt: Date | null;
  verifiedBy: string | null;
  verificationTtlSeconds: number;
  /** price-changing features (libs/domain PRICED_FEATURES) this contract declares and prices */
  pricedFeatures: string[];
  /** input tokens added per media item in the estimate */
  mediaInputTokens: MediaInputTokens;
}

export interface ActiveException {
  id: string;
  workloadId: string;
  routeId: string | null;
  maxCandidates: number;
  perCandidateOutputCeiling: number;
  budgetMicrousd: bigint;
  expiresAt: Date;
  status: ExceptionStatus;
  allowsStreaming: boolean;
  allowsDeterministicSampling: boolean;
}

export type { PriceRevision };

/** The workload row's policy fields as the read model (the row type is Prisma's; it stays here). */
export function toWorkloadPolicy(w: {
  id: string;
  team: string;
  environment: string;
  defaultMaxCandidates: number;
  perCandidateOutputCeiling: number;
  budgetMicrousd: bigint;
  budgetPeriod: string;
  allowedAliases: string[];
  fallbackChain: string[];
  allowLength: boolean;
  allowContentFilter: boolean;
  deadlineMs: number;
  maxInFlight: number;
  tokensPerMinute: number | null;
  allowProviderStorage: boolean;
}): WorkloadPolicy {
  return {
    id: w.id,
    team: w.team,
    environment: w.environment,
    defaultMaxCandidates: w.defaultMaxCandidates,
    perCandidateOutputCeiling: w.perCandidateOutputCeiling,
    budgetMicrousd: w.budgetMicrousd,
    budgetPeriod: w.budgetPeriod === 'day' ? 'day' : 'month',
    allowedAliases: w.allowedAliases,
    fallbackChain: w.fallbackChain,
    allowLength: w.allowLength,
    allowContentFilter: w.allowContentFilter,
    deadlineMs: w.deadlineMs,
    maxInFlight: w.maxInFlight,
    tokensPerMinute: w.tokensPerMinute,
    allowProviderStorage: w.allowProviderStorage,
  };
}
