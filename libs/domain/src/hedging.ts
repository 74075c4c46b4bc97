/**
 * Extra attempts of one action (issue 10): hedges (a duplicate after a delay), retries (after a
 * transient failure) and fallbacks (another approved route), all inside one combined allowance.
 * This module holds the pure rules: who may be hedged, when the hedge timer fires, the decision
 * table the serialised hedge admission applies, which failures are transient, and the per-route
 * overload bucket. The transaction that applies them lives in libs/db; dispatch only asks.
 */
import { MAX_BUDGET_MICROUSD } from './reservation';
import { assertNonNegativeInteger, assertNonNegativeMicrousd, assertPositiveInteger } from './validation';

/** Failures a retry may follow (the policy picks which of these it treats as transient). */
export const TRANSIENT_FAILURES = ['connection_error', 'timeout_before_first_byte', 'rate_limited', 'server_error'] as const;
export type TransientFailure = (typeof TRANSIENT_FAILURES)[number];

export type HedgeDelay =
  | { kind: 'fixed'; ms: number }
  /**
   * The `quantile` (per mille, e.g. 950 = p95) of the route's recent primary latencies, clamped to
   * [floorMs, ceilingMs]. With fewer than `minSamples` latencies the ceiling applies (fewer hedges
   * while the route is unknown), and load never pulls the delay below the floor.
   */
  | { kind: 'quantile'; quantilePerMille: number; floorMs: number; ceilingMs: number; minSamples: number };

/** gRPC A6 retry throttling, in thousandths of a token so no float accumulates. */
export type OverloadBucketPolicy = {
  /** bucket size, in milli-tokens (gRPC's `maxTokens` × 1000) */
  maxMilliTokens: number;
  /** added on each success (gRPC's `tokenRatio` × 1000); each failure removes 1,000 */
  successRefillMilliTokens: number;
};

export type HedgePolicy = {
  /** every change is a new revision; every attempt records the one it ran under */
  revisionId: string;
  enabled: boolean;
  delay: HedgeDelay;
  /** at most one hedge per action (0 turns hedging off while keeping retries and fallbacks) */
  maxHedges: 0 | 1;
  retry: { transient: readonly TransientFailure[]; maxRetries: number };
  /** the combined allowance of one action: attempts including the primary, extra spend across hedges, retries, fallbacks */
  allowance: { maxAttempts: number; maxExtraSpendMicrousd: bigint };
  stop: {
    /** no hedge when the funding budget's remaining headroom is below this */
    spendFloorMicrousd: bigint;
    /** no hedge when the route's recent error rate (per mille) is above this */
    maxRouteErrorPerMille: number;
    /** no hedge when the route already has this many attempts in flight */
    maxRouteInFlight: number;
    /** no hedge with less than this left before the action's deadline */
    minUsefulRemainingMs: number;
  };
  bucket: OverloadBucketPolicy;
  /** who answers for the policy (a team or person; shown to operators, not used by dispatch) */
  owner: string;
  /**
   * The extra spend the owner approved per additional on-time answer (micro-USD): the bar the
   * issue's cohort comparison holds hedging to. Informational for dispatch; raising it is a spend raise.
   */
  approvedPremiumMicrousd: bigint;
  /**
   * A budget of its own that funds extra attempts (hedges, retries, fallbacks) per period; null:
   * extra attempts draw on the workload's budget like the primary.
   */
  experimentAllowance: ExperimentAllowance | null;
  /** tool names the workload declared read-only: only requests whose tools are all here may be hedged */
  readOnlyTools: readonly string[];
};

export type ExperimentAllowance = { budgetMicrousd: bigint; period: 'day' | 'month' };

/** The settings a revision carries (everything but its identity). */
const HEDGE_SETTINGS = [
  'enabled',
  'delay',
  'maxHedges',
  'retry',
  'allowance',
  'stop',
  'bucket',
  'owner',
  'approvedPremiumMicrousd',
  'experimentAllowance',
  'readOnlyTools',
] as const satisfies ReadonlyArray<keyof HedgePolicy>;

/** Whether two policies say the same thing (a repeated PUT, a duplicate pending request), whatever built them. */
export function sameHedgeSettings(a: Omit<HedgePolicy, 'revisionId'>, b: Omit<HedgePolicy, 'revisionId'>): boolean {
  return HEDGE_SETTINGS.every((k) => canonical(a[k]) === canonical(b[k]));
}

/** Values as text with object keys sorted and bigints marked, so key order and prototypes do not matter. */
function canonical(v: unknown): string {
  if (typeof v === 'bigint') return `${v}n`;
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v).filter(([, x]) => x !== undefined);
    return `{${entries
      .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))
      .map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'undefined';
}

/** A stored revision of a workload's hedge policy, optionally scoped to one route. */
export type HedgePolicyRevision = HedgePolicy & {
  workloadId: string;
  /** null: the workload-wide policy, in force on every route without a policy of its own */
  routeId: string | null;
  /** 1, 2, … per (workload, route) scope */
  revision: number;
  createdBy: string;
  createdAt: Date;
  reason: string;
};

/** Bounds `hedgePolicyProblems` enforces (the API's zod schema only checks types and list sizes). */
export const HEDGE_LIMITS = {
  maxDelayMs: 60_000,
  maxAttempts: 10,
  maxMinSamples: 100_000,
  maxRouteInFlight: 1_000_000,
  maxMilliTokens: 1_000_000_000,
  maxReadOnlyTools: 64,
  maxToolNameLength: 128,
} as const;

export type HedgePolicyProblem = { path: string; message: string };

/**
 * Every reason `p` cannot be stored, each with its camelCase path (dotted): the one check of a
 * hedge policy's ranges, whoever writes it.
 */
export function hedgePolicyProblems(p: Omit<HedgePolicy, 'revisionId'>): HedgePolicyProblem[] {
  const problems: HedgePolicyProblem[] = [];
  const int = (path: string, v: number, min: number, max: number) => {
    if (!Number.isInteger(v) || v < min || v > max) problems.push({ path, message: `must be an integer in ${min}..${max}` });
  };
  const money = (path: string, v: bigint) => {
    if (v < 0n || v > MAX_BUDGET_MICROUSD) problems.push({ path, message: `must be 0..${MAX_BUDGET_MICROUSD} micro-USD` });
  };
  if (p.owner.trim().length === 0) problems.push({ path: 'owner', message: 'must name who answers for the policy' });
  const d = p.delay;
  if (d.kind === 'fixed') int('delay.ms', d.ms, 0, HEDGE_LIMITS.maxDelayMs);
  else {
    int('delay.quantilePerMille', d.quantilePerMille, 1, 999);
    int('delay.floorMs', d.floorMs, 0, HEDGE_LIMITS.maxDelayMs);
    int('delay.ceilingMs', d.ceilingMs, 0, HEDGE_LIMITS.maxDelayMs);
    int('delay.minSamples', d.minSamples, 1, HEDGE_LIMITS.maxMinSamples);
    if (d.floorMs > d.ceilingMs) problems.push({ path: 'delay.floorMs', message: 'must not exceed delay.ceilingMs' });
  }
  if (p.maxHedges !== 0 && p.maxHedges !== 1) problems.push({ path: 'maxHedges', message: 'must be 0 or 1' });
  int('allowance.maxAttempts', p.allowance.maxAttempts, 1, HEDGE_LIMITS.maxAttempts);
  int('retry.maxRetries', p.retry.maxRetries, 0, Math.max(0, p.allowance.maxAttempts - 1));
  p.retry.transient.forEach((t, i) => {
    if (!TRANSIENT_FAILURES.includes(t))
      problems.push({ path: `retry.transient[${i}]`, message: `must be one of ${TRANSIENT_FAILURES.join(', ')}` });
    else if (p.retry.transient.indexOf(t) !== i) problems.push({ path: `retry.transient[${i}]`, message: `${t} is listed twice` });
  });
  money('allowance.maxExtraSpendMicrousd', p.allowance.maxExtraSpendMicrousd);
  money('stop.spendFloorMicrousd', p.stop.spendFloorMicrousd);
  int('stop.maxRouteErrorPerMille', p.stop.maxRouteErrorPerMille, 0, 1000);
  int('stop.maxRouteInFlight', p.stop.maxRouteInFlight, 1, HEDGE_LIMITS.maxRouteInFlight);
  int('stop.minUsefulRemainingMs', p.stop.minUsefulRemainingMs, 0, HEDGE_LIMITS.maxDelayMs);
  int('bucket.maxMilliTokens', p.bucket.maxMilliTokens, 1, HEDGE_LIMITS.maxMilliTokens);
  int('bucket.successRefillMilliTokens', p.bucket.successRefillMilliTokens, 1, HEDGE_LIMITS.maxMilliTokens);
  money('approvedPremiumMicrousd', p.approvedPremiumMicrousd);
  if (p.experimentAllowance) money('experimentAllowance.budgetMicrousd', p.experimentAllowance.budgetMicrousd);
  if (p.readOnlyTools.length > HEDGE_LIMITS.maxReadOnlyTools)
    problems.push({ path: 'readOnlyTools', message: `at most ${HEDGE_LIMITS.maxReadOnlyTools} tools` });
  p.readOnlyTools.forEach((t, i) => {
    if (t.length === 0 || t.length > HEDGE_LIMITS.maxToolNameLength)
      problems.push({ path: `readOnlyTools[${i}]`, message: `must be 1..${HEDGE_LIMITS.maxToolNameLength} characters` });
    else if (p.readOnlyTools.indexOf(t) !== i) problems.push({ path: `readOnlyTools[${i}]`, message: `${t} is listed twice` });
  });
  return problems;
}

/** Why a request runs primary-only; recorded on the decision. */
export type HedgeIneligibility = 'hedging_disabled' | 'streaming' | 'multi_candidate' | 'tools_not_read_only';

/**
 * Only non-streaming, single-candidate requests whose tools (if any) the workload declared
 * read-only are hedged: a duplicate of anything else could double a side effect or a stream.
 */
export function hedgeIneligibility(
  policy: Pick<HedgePolicy, 'enabled' | 'maxHedges'>,
  request: { stream: boolean; effectiveCandidates: number; toolNames: readonly string[]; readOnlyTools: readonly string[] },
): HedgeIneligibility | null {
  if (!policy.enabled || policy.maxHedges === 0) return 'hedging_disabled';
  if (request.stream) return 'streaming';
  if (request.effectiveCandidates !== 1) return 'multi_candidate';
  if (request.toolNames.some((t) => !request.readOnlyTools.includes(t))) return 'tools_not_read_only';
  return null;
}

/** Nearest-rank quantile of `samples` (per mille), or null when there are none. */
export function quantileMs(samples: readonly number[], perMille: number): number | null {
  if (samples.length === 0) return null;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((perMille / 1000) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/** When the hedge timer fires, in ms after the primary was dispatched. */
export function hedgeDelayMs(delay: HedgeDelay, recentPrimaryLatenciesMs: readonly number[]): number {
  if (delay.kind === 'fixed') return delay.ms;
  if (recentPrimaryLatenciesMs.length < delay.minSamples) return delay.ceilingMs;
  const q = quantileMs(recentPrimaryLatenciesMs, delay.quantilePerMille) ?? delay.ceilingMs;
  return Math.min(delay.ceilingMs, Math.max(delay.floorMs, q));
}

export type OverloadBucket = { milliTokens: number };

export const fullBucket = (p: OverloadBucketPolicy): OverloadBucket => ({ milliTokens: p.maxMilliTokens });

/** A failure drains one token; a success refills `successRefillMilliTokens`; the bucket stays in [0, max]. */
export function bucketAfter(bucket: OverloadBucket, outcome: 'success' | 'failure', p: OverloadBucketPolicy): OverloadBucket {
  const next = outcome === 'failure' ? bucket.milliTokens - 1000 : bucket.milliTokens + p.successRefillMilliTokens;
  return { milliTokens: Math.min(p.maxMilliTokens, Math.max(0, next)) };
}

/** gRPC A6: extra attempts are allowed only while the bucket is above half. */
export function bucketAllowsExtraAttempts(bucket: OverloadBucket, p: OverloadBucketPolicy): boolean {
  return bucket.milliTokens * 2 > p.maxMilliTokens;
}

/** One attempt of the action and the money it holds or cost (settled, pending or unresolved). */
export type AttemptExposure = { role: 'primary' | 'hedge' | 'retry' | 'fallback'; exposureMicrousd: bigint };

/** What the serialised hedge admission sees, read under the action's lock. */
export type HedgeTimerContext = {
  now: Date;
  deadline: Date;
  /** a winner was chosen, or the action is terminal */
  winnerChosen: boolean;
  actionTerminal: boolean;
  route: { errorPerMille: number; inFlight: number; bucket: OverloadBucket };
  /** headroom left on the budget that funds extra attempts (experiment allowance, else workload budget) */
  fundingHeadroomMicrousd: bigint;
  /** attempts of this action so far, the primary included, by role */
  attempts: readonly AttemptExposure[];
  /** the hold the hedge would take (input estimate + effective × ceiling at the route's price) */
  hedgeHoldMicrousd: bigint;
};

export type HedgeDenial =
  | 'winner_chosen'
  | 'action_terminal'
  | 'deadline_too_short'
  | 'route_unhealthy'
  | 'spend_floor'
  | 'overload'
  | 'hedge_limit'
  | 'attempt_allowance_spent'
  | 'spend_allowance_spent';

export type HedgeDecision = { fire: true; holdMicrousd: bigint } | { fire: false; reason: HedgeDenial };

/**
 * The hedge timer's decision table, in the order the issue fixes: winner / terminal; deadline;
 * route health; stop conditions (spend floor, overload bucket); the combined allowance (hedges,
 * attempts, extra money counting every prior extra attempt's exposure, settled or still uncertain).
 * A denial changes nothing for the primary and is never turned into a fallback.
 */
export function decideHedge(policy: HedgePolicy, ctx: HedgeTimerContext): HedgeDecision {
  assertNonNegativeMicrousd(ctx.hedgeHoldMicrousd, 'hedgeHoldMicrousd');
  if (ctx.winnerChosen) return { fire: false, reason: 'winner_chosen' };
  if (ctx.actionTerminal) return { fire: false, reason: 'action_terminal' };
  if (ctx.deadline.getTime() - ctx.now.getTime() < policy.stop.minUsefulRemainingMs) return { fire: false, reason: 'deadline_too_short' };
  if (ctx.route.errorPerMille > policy.stop.maxRouteErrorPerMille || ctx.route.inFlight >= policy.stop.maxRouteInFlight) {
    return { fire: false, reason: 'route_unhealthy' };
  }
  if (ctx.fundingHeadroomMicrousd - ctx.hedgeHoldMicrousd < policy.stop.spendFloorMicrousd) return { fire: false, reason: 'spend_floor' };
  if (!bucketAllowsExtraAttempts(ctx.route.bucket, policy.bucket)) return { fire: false, reason: 'overload' };
  if (ctx.attempts.filter((a) => a.role === 'hedge').length >= policy.maxHedges) return { fire: false, reason: 'hedge_limit' };
  const allowance = extraAttemptAllowance(policy, ctx.attempts);
  if (allowance.attemptsLeft < 1) return { fire: false, reason: 'attempt_allowance_spent' };
  if (ctx.hedgeHoldMicrousd > allowance.extraSpendLeftMicrousd) return { fire: false, reason: 'spend_allowance_spent' };
  return { fire: true, holdMicrousd: ctx.hedgeHoldMicrousd };
}

/** What is left of an action's combined allowance: extra attempts and extra money (every non-primary attempt counts). */
export function extraAttemptAllowance(
  policy: Pick<HedgePolicy, 'allowance'>,
  attempts: readonly AttemptExposure[],
): { attemptsLeft: number; extraSpendLeftMicrousd: bigint } {
  assertPositiveInteger(policy.allowance.maxAttempts, 'maxAttempts');
  const extra = attempts.filter((a) => a.role !== 'primary');
  const spent = extra.reduce((sum, a) => sum + a.exposureMicrousd, 0n);
  const left = policy.allowance.maxExtraSpendMicrousd - spent;
  return { attemptsLeft: Math.max(0, policy.allowance.maxAttempts - attempts.length), extraSpendLeftMicrousd: left > 0n ? left : 0n };
}

/** What an upstream attempt's failure was, as dispatch observed it. */
export type AttemptFailure =
  | { kind: 'connection_error' }
  | { kind: 'timeout'; firstByteReceived: boolean }
  | { kind: 'http'; status: number }
  /** the provider answered, but more than the gateway reads (UPSTREAM_ANSWER_MAX_BYTES) */
  | { kind: 'answer_too_large' };

/** The transient class of a failure, or null when retrying cannot help (4xx other than 429, timeouts after the first byte, an answer too large to read). */
export function transientFailureOf(f: AttemptFailure): TransientFailure | null {
  switch (f.kind) {
    case 'connection_error':
      return 'connection_error';
    case 'timeout':
      // after the first byte the provider is generating (and billing): a retry would pay twice
      return f.firstByteReceived ? null : 'timeout_before_first_byte';
    case 'http':
      if (f.status === 429) return 'rate_limited';
      if (f.status >= 500 && f.status <= 599) return 'server_error';
      return null;
    case 'answer_too_large':
      // the same request would be answered as large again, and paid for again
      return null;
  }
}

/** Whether a failed attempt may be followed by a retry, given the policy and what the action has used. */
export function retryDecision(
  policy: Pick<HedgePolicy, 'retry' | 'allowance'>,
  failure: AttemptFailure,
  ctx: {
    attempts: readonly AttemptExposure[];
    retryHoldMicrousd: bigint;
    remainingMs: number;
    minUsefulRemainingMs: number;
  },
):
  | { retry: true; failure: TransientFailure }
  | { retry: false; reason: 'not_transient' | 'retry_limit' | 'deadline_too_short' | 'attempt_allowance_spent' | 'spend_allowance_spent' } {
  assertNonNegativeInteger(policy.retry.maxRetries, 'maxRetries');
  const transient = transientFailureOf(failure);
  if (transient === null || !policy.retry.transient.includes(transient)) return { retry: false, reason: 'not_transient' };
  if (ctx.attempts.filter((a) => a.role === 'retry').length >= policy.retry.maxRetries) return { retry: false, reason: 'retry_limit' };
  if (ctx.remainingMs < ctx.minUsefulRemainingMs) return { retry: false, reason: 'deadline_too_short' };
  const allowance = extraAttemptAllowance(policy, ctx.attempts);
  if (allowance.attemptsLeft < 1) return { retry: false, reason: 'attempt_allowance_spent' };
  if (ctx.retryHoldMicrousd > allowance.extraSpendLeftMicrousd) return { retry: false, reason: 'spend_allowance_spent' };
  return { retry: true, failure: transient };
}

/**
 * The names of the tools a request declares, for `hedgeIneligibility`: a function tool by its
 * function's name, any other tool (hosted search, code execution…) by its kind, so only what the
 * workload listed as read-only passes. OpenAI chat: `tools[].function.name` or `tools[].type`;
 * Responses: `tools[].name` or `tools[].type`; Gemini: each `functionDeclarations[].name` and any
 * other key of a `tools[]` entry. A shape it cannot read counts as a tool nobody declared.
 */
export function requestToolNames(body: Record<string, unknown>, apiKind: 'openai-chat' | 'openai-responses' | 'gemini-generate'): string[] {
  const tools = body.tools;
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) return [UNREADABLE_TOOL];
  const names: string[] = [];
  for (const t of tools) {
    if (t === null || typeof t !== 'object' || Array.isArray(t)) {
      names.push(UNREADABLE_TOOL);
      continue;
    }
    const tool = t as Record<string, unknown>;
    if (apiKind === 'gemini-generate') {
      for (const [key, value] of Object.entries(tool)) {
        if (key !== 'functionDeclarations' && key !== 'function_declarations') names.push(key);
        else if (!Array.isArray(value)) names.push(UNREADABLE_TOOL);
        else for (const d of value) names.push(nameOf(d) ?? UNREADABLE_TOOL);
      }
      continue;
    }
    const fn = apiKind === 'openai-chat' ? nameOf(tool.function) : typeof tool.name === 'string' ? tool.name : null;
    names.push(fn ?? (typeof tool.type === 'string' ? tool.type : UNREADABLE_TOOL));
  }
  return names;
}

/** A placeholder for a tool entry whose name cannot be read: no policy lists it, so the request is not hedged. */
const UNREADABLE_TOOL = 'unreadable tool';

function nameOf(v: unknown): string | null {
  return v !== null && typeof v === 'object' && typeof (v as Record<string, unknown>).name === 'string'
    ? ((v as Record<string, unknown>).name as string)
    : null;
}
