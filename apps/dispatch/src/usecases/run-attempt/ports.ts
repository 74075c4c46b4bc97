import type { ClaimInput, DispatchRepository } from '@gateway/db';
import type { ContentCipher, KafkaBus } from '@gateway/messaging';
import type { UpstreamCredentials } from '@gateway/providers';

/**
 * The slices of dispatch's collaborators that RunAttempt uses. The real classes are injected under
 * these narrow types, so its spec hands in small in-memory fakes without casts.
 */
export type AttemptStore = Pick<DispatchRepository, 'complete'> & {
  claim(input: PrimaryClaimInput): ReturnType<DispatchRepository['claim']>;
  admitExtraAttempt(input: ExtraAttemptInput): Promise<ExtraAttemptResult>;
  chooseWinner(input: { actionId: string; attemptId: string; now: Date }): Promise<{ won: boolean; winnerAttemptId: string | null }>;
};
export type ReplyPublisher = Pick<KafkaBus, 'publish'>;
export type ReplySealer = Pick<ContentCipher, 'encrypt'>;
export type CredentialSource = Pick<UpstreamCredentials, 'lookup'>;

// The store side of issue 10 (h/hedge-store, /work/briefs/interface-10.md); replaced by the
// repository's own types once merged.
export type PrimaryClaimInput = ClaimInput & { holdMicrousd: bigint | null; policyRevisionId: string | null };
export type ExtraAttemptRole = 'hedge' | 'retry' | 'fallback';
export interface ExtraAttemptInput {
  actionId: string;
  attemptId: string;
  attemptNo: number;
  role: ExtraAttemptRole;
  routeId: string;
  routeVersion: number;
  effectiveCandidates: number;
  holdMicrousd: bigint;
  policyRevisionId: string;
  limits: {
    maxAttempts: number;
    maxHedges: number;
    maxRetries: number;
    maxExtraSpendMicrousd: bigint;
    spendFloorMicrousd: bigint;
    minUsefulRemainingMs: number;
  };
  claimedBy: string;
  now: Date;
}
export type ExtraAttemptDenial =
  | 'winner_chosen'
  | 'action_terminal'
  | 'deadline_too_short'
  | 'spend_floor'
  | 'hedge_limit'
  | 'retry_limit'
  | 'attempt_allowance_spent'
  | 'spend_allowance_spent'
  | 'budget_exhausted'
  | 'already_claimed';
export type ExtraAttemptResult = { ok: true; attemptsTotal: number } | { ok: false; reason: ExtraAttemptDenial };
