/**
 * Quota scopes (DESIGN §7 Quotas and ceilings, issue 16): which counter or budget a limit is kept
 * on, how that scope is named on decisions and events, and the fan-out rule for requests that
 * share a workflow id. Every counter records its scope; a counter kept by one gateway instance is
 * named `instance:<id>/…` so no report calls it organisation-wide.
 */
import { createHash } from 'node:crypto';

export type ScopeKind = 'team' | 'environment';
export const SCOPE_KINDS: readonly ScopeKind[] = ['team', 'environment'];

/** `organisation`: one counter every instance shares; `instance`: one counter per gateway instance. */
export type TokenRateEnforcement = 'organisation' | 'instance';

/** A team's or an environment's limits, as the policy API sets them. */
export interface ScopeLimitSpend {
  tokensPerMinute: number | null;
  tokenRateEnforcement: TokenRateEnforcement;
  budgetMicrousd: bigint | null;
  budgetPeriod: 'day' | 'month';
}

/**
 * What a change of a scope limit raises (four-eyes, like a workload's). A new limit where there
 * was none only restricts spend; removing one, raising it, shortening the budget period or moving
 * the token rate from one shared counter to one per instance (N instances admit N times the rate)
 * raises it.
 */
export function scopeLimitSpendRaises(before: ScopeLimitSpend | null, after: ScopeLimitSpend): string[] {
  if (before === null) return [];
  const raises: string[] = [];
  if (before.tokensPerMinute !== null) {
    if (after.tokensPerMinute === null) raises.push('tokens_per_minute removed');
    else if (after.tokensPerMinute > before.tokensPerMinute) raises.push('tokens_per_minute up');
    else if (before.tokenRateEnforcement === 'organisation' && after.tokenRateEnforcement === 'instance')
      raises.push('token rate enforced per instance');
  }
  if (before.budgetMicrousd !== null) {
    if (after.budgetMicrousd === null) raises.push('budget removed');
    else if (after.budgetMicrousd > before.budgetMicrousd) raises.push('budget up');
    if (after.budgetMicrousd !== null && before.budgetPeriod === 'month' && after.budgetPeriod === 'day')
      raises.push('budget period shortened');
  }
  return raises;
}

/** The name of a scope on decisions, events and counters. */
export function quotaScopeName(kind: 'workload' | 'exception' | 'workflow'): string;
export function quotaScopeName(kind: ScopeKind, id: string, instanceId?: string | null): string;
export function quotaScopeName(kind: ScopeKind | 'workload' | 'exception' | 'workflow', id?: string, instanceId?: string | null): string {
  const base = id === undefined ? kind : `${kind}:${id}`;
  return instanceId ? `instance:${instanceId}/${base}` : base;
}

/** Counter scopes in quota_counter.scope (scope_id names the team, environment or workflow). */
export const COUNTER_SCOPES = {
  team: 'team_tokens_per_minute',
  environment: 'environment_tokens_per_minute',
  workflow: 'workflow_calls',
} as const;

/** A fixed window of `seconds` aligned to the epoch, and the seconds until it ends (at least 1). */
export function fixedWindow(now: Date, seconds: number): { windowStart: Date; retryAfterSeconds: number } {
  if (!Number.isInteger(seconds) || seconds < 1) throw new RangeError('window seconds must be a positive integer');
  const ms = seconds * 1000;
  const start = Math.floor(now.getTime() / ms) * ms;
  return { windowStart: new Date(start), retryAfterSeconds: Math.max(1, Math.ceil((start + ms - now.getTime()) / 1000)) };
}

export const WORKFLOW_ID_HEADER = 'x-gateway-workflow-id';
export const MAX_WORKFLOW_ID_LENGTH = 256;
/** `user`, or `metadata.<key>`: the body field a workload designates as its workflow id. */
export const WORKFLOW_ID_FIELD = /^(user|metadata\.[A-Za-z0-9_-]{1,64})$/;

export type WorkflowIdReading =
  { ok: true; workflowId: string | null } | { ok: false; code: 'invalid_request'; message: string; param: string };

/**
 * The request's workflow id: the header when sent, else the body field the workload designates.
 * A present value must be 1–256 printable characters (no control or format characters), else the
 * request is refused — it is a counter key, and a hostile one must not become a row per byte.
 */
export function readWorkflowId(input: { header: string | null; body: Record<string, unknown>; field: string | null }): WorkflowIdReading {
  if (input.header !== null) return checkWorkflowId(input.header, WORKFLOW_ID_HEADER);
  if (input.field === null || !WORKFLOW_ID_FIELD.test(input.field)) return { ok: true, workflowId: null };
  let value: unknown;
  if (input.field === 'user') value = input.body.user;
  else {
    const metadata = input.body.metadata;
    const key = input.field.slice('metadata.'.length);
    value =
      metadata !== null && typeof metadata === 'object' && !Array.isArray(metadata)
        ? (metadata as Record<string, unknown>)[key]
        : undefined;
  }
  if (value === undefined || value === null) return { ok: true, workflowId: null };
  if (typeof value !== 'string') return invalidWorkflowId(input.field, 'must be a string');
  return checkWorkflowId(value, input.field);
}

function checkWorkflowId(value: string, param: string): WorkflowIdReading {
  if (value.length === 0 || value.length > MAX_WORKFLOW_ID_LENGTH)
    return invalidWorkflowId(param, `must be 1–${MAX_WORKFLOW_ID_LENGTH} characters`);
  if (/\p{C}/u.test(value)) return invalidWorkflowId(param, 'must be printable (no control or format characters)');
  return { ok: true, workflowId: value };
}

function invalidWorkflowId(param: string, why: string): WorkflowIdReading {
  return { ok: false, code: 'invalid_request', message: `workflow id (${param}) ${why}`, param };
}

/** What decisions and counters record instead of the workflow id: its SHA-256, hex. */
export function workflowIdHash(workflowId: string): string {
  return createHash('sha256').update(workflowId, 'utf8').digest('hex');
}

/** One counter a gateway instance kept for a team's or an environment's token rate. */
export interface InstanceCounter {
  scope: ScopeKind;
  scopeId: string;
  windowStart: Date;
  instanceId: string;
  tokens: number;
  /** the limit in force now (each instance enforced it on its own counter), null when removed */
  limit: number | null;
}

/** The organisation-wide view of one window of instance-scoped counters. */
export interface ReconciledWindow {
  scope: ScopeKind;
  scopeId: string;
  windowStart: Date;
  instances: Array<{ instanceId: string; tokens: number }>;
  /** the sum over instances: what the organisation actually admitted in the window */
  organisationTokens: number;
  /** what the busiest instance saw (each instance judged the limit against its own figure) */
  largestInstanceTokens: number;
  /** organisation − largest instance: admitted tokens no single instance counted */
  unseenByAnyInstanceTokens: number;
  limit: number | null;
  /** how far the organisation went past the configured limit because it was enforced per instance */
  overLimitTokens: number;
}

/** Sums instance-scoped counters into one organisation-wide figure per scope and window. */
export function reconcileInstanceCounters(counters: readonly InstanceCounter[]): ReconciledWindow[] {
  const byWindow = new Map<string, InstanceCounter[]>();
  for (const c of counters) {
    const key = `${c.scope}\u0000${c.scopeId}\u0000${c.windowStart.toISOString()}`;
    byWindow.set(key, [...(byWindow.get(key) ?? []), c]);
  }
  return [...byWindow.values()]
    .map((cs) => {
      const first = cs[0];
      const instances = cs
        .map((c) => ({ instanceId: c.instanceId, tokens: c.tokens }))
        .sort((a, b) => a.instanceId.localeCompare(b.instanceId));
      const organisationTokens = instances.reduce((sum, i) => sum + i.tokens, 0);
      const largest = instances.reduce((max, i) => Math.max(max, i.tokens), 0);
      return {
        scope: first.scope,
        scopeId: first.scopeId,
        windowStart: first.windowStart,
        instances,
        organisationTokens,
        largestInstanceTokens: largest,
        unseenByAnyInstanceTokens: organisationTokens - largest,
        limit: first.limit,
        overLimitTokens: first.limit === null ? 0 : Math.max(0, organisationTokens - first.limit),
      };
    })
    .sort(
      (a, b) => b.windowStart.getTime() - a.windowStart.getTime() || a.scope.localeCompare(b.scope) || a.scopeId.localeCompare(b.scopeId),
    );
}
