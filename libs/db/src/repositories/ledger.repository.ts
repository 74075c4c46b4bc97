import type { AttemptRole, UsageSettledV1, UsageSource } from '@gateway/contracts';
import type { UsageCost } from '@gateway/domain';
import { Database, prismaTx, Tx } from '../database';
import { Prisma } from '../generated/prisma/client';
import { OutboxRepository } from './outbox.repository';

/** What the ledger row and the settled event say about the attempt, whoever settles it. */
export interface AttemptFacts {
  attemptId: string;
  actionId: string;
  attemptRole: AttemptRole;
  requestId: string | null;
  workloadId: string;
  environment: string;
  routeId: string;
  routeVersion: number;
  modelAlias: string;
  providerRequestId: string | null;
  requestedCandidates: number | null;
  effectiveCandidates: number;
  returnedCandidates: number;
  streamMode: 'none' | 'sse';
}

/** One immutable ledger row per upstream attempt (DESIGN §6, §7 Settlement). */
export interface LedgerRow extends AttemptFacts {
  id: string;
  /** null when no provider reported usage (operator release): unknown, never zero */
  inputTokens: number | null;
  cachedInputTokens: number | null;
  outputTokensTotal: number | null;
  reasoningTokens: number | null;
  totalTokens: number | null;
  usageSource: UsageSource;
  priceRevisionId: string;
  /** per-category cost; null for an operator release, which attests a total only */
  inputMicrousd: bigint | null;
  cachedInputMicrousd: bigint | null;
  outputMicrousd: bigint | null;
  reasoningMicrousd: bigint | null;
  costMicrousd: bigint;
  settledAt: Date;
  /** set on operator_release rows: the case, who attested the amount, and why */
  caseId: string | null;
  attestedBy: string | null;
  attestationReason: string | null;
}

export interface ReportedUsage {
  inputTokens: number;
  cachedInputTokens: number;
  outputTokensTotal: number;
  reasoningTokens: number;
}

/** Where the settled amount comes from: provider-reported usage priced, or an operator's attestation. */
export type SettlementEvidence =
  | { kind: 'usage'; source: Exclude<UsageSource, 'operator_release'>; usage: ReportedUsage; cost: UsageCost }
  | { kind: 'attested'; amountMicrousd: bigint; caseId: string; attestedBy: string; reason: string };

/** The one ledger-row builder, for settlement and reconciliation alike. */
export function buildLedgerRow(input: {
  id: string;
  facts: AttemptFacts;
  evidence: SettlementEvidence;
  priceRevisionId: string;
  settledAt: Date;
}): LedgerRow {
  const { facts, evidence } = input;
  const base = { id: input.id, ...facts, priceRevisionId: input.priceRevisionId, settledAt: input.settledAt };
  switch (evidence.kind) {
    case 'usage':
      return {
        ...base,
        inputTokens: evidence.usage.inputTokens,
        cachedInputTokens: evidence.usage.cachedInputTokens,
        outputTokensTotal: evidence.usage.outputTokensTotal,
        reasoningTokens: evidence.usage.reasoningTokens,
        totalTokens: evidence.usage.inputTokens + evidence.usage.outputTokensTotal,
        usageSource: evidence.source,
        inputMicrousd: evidence.cost.input,
        cachedInputMicrousd: evidence.cost.cachedInput,
        outputMicrousd: evidence.cost.output,
        reasoningMicrousd: evidence.cost.reasoning,
        costMicrousd: evidence.cost.total,
        caseId: null,
        attestedBy: null,
        attestationReason: null,
      };
    case 'attested':
      return {
        ...base,
        inputTokens: null,
        cachedInputTokens: null,
        outputTokensTotal: null,
        reasoningTokens: null,
        totalTokens: null,
        usageSource: 'operator_release',
        inputMicrousd: null,
        cachedInputMicrousd: null,
        outputMicrousd: null,
        reasoningMicrousd: null,
        costMicrousd: evidence.amountMicrousd,
        caseId: evidence.caseId,
        attestedBy: evidence.attestedBy,
        attestationReason: evidence.reason,
      };
    default: {
      const unreachable: never = evidence;
      throw new Error(`Unhandled settlement evidence: ${String(unreachable)}`);
    }
  }
}

/** The row's per-category cost as finance reads it (decimal strings); null when only a total was attested. */
export function costByCategory(
  row: Pick<LedgerRow, 'inputMicrousd' | 'cachedInputMicrousd' | 'outputMicrousd' | 'reasoningMicrousd'>,
): UsageSettledV1['cost_microusd_by_category'] {
  if (row.inputMicrousd === null || row.cachedInputMicrousd === null || row.outputMicrousd === null || row.reasoningMicrousd === null) {
    return null;
  }
  return {
    input: row.inputMicrousd.toString(),
    cached_input: row.cachedInputMicrousd.toString(),
    output: row.outputMicrousd.toString(),
    reasoning: row.reasoningMicrousd.toString(),
  };
}

/**
 * `gateway.usage.settled.v1` for a ledger row: the same fields whichever service settled it.
 * `quotaScope` is what admission recorded on the action (every scope the money was held on).
 */
export function usageSettledEvent(row: LedgerRow, eventId: string, quotaScope: string | null = null): UsageSettledV1 {
  const byCategory = costByCategory(row);
  return {
    event_id: eventId,
    timestamp: row.settledAt.toISOString(),
    // Rows from before request ids were stored fall back to the action id.
    request_id: row.requestId ?? row.actionId,
    action_id: row.actionId,
    attempt_id: row.attemptId,
    attempt_role: row.attemptRole,
    workload_id: row.workloadId,
    environment: row.environment,
    route_id: row.routeId,
    route_version: row.routeVersion,
    model_alias: row.modelAlias,
    provider_request_id: row.providerRequestId,
    requested_candidate_count: row.requestedCandidates,
    effective_candidate_count: row.effectiveCandidates,
    returned_candidate_count: row.returnedCandidates,
    input_tokens: row.inputTokens,
    output_tokens_total: row.outputTokensTotal,
    total_tokens: row.totalTokens,
    stream_mode: row.streamMode,
    usage_source: row.usageSource,
    // actions admitted before scopes were recorded held money on their workload only
    quota_scope: quotaScope ?? 'workload',
    policy_result: null,
    policy_reason: null,
    price_revision: row.priceRevisionId,
    cost_microusd: row.costMicrousd.toString(),
    cost_microusd_by_category: byCategory,
    settled_at: row.settledAt.toISOString(),
  };
}

/**
 * The one ledger writer: inserts the attempt's row once (`ON CONFLICT (attempt_id) DO NOTHING`)
 * and, only when it was inserted, appends `usage.settled` to the outbox in the same transaction,
 * so one attempt has one row and one settled event however often it is settled.
 */
export class LedgerRepository {
  constructor(private readonly outbox: Pick<OutboxRepository, 'appendMany'>) {}

  /** false when the attempt already had its ledger row (nothing written). */
  async record(tx: Tx, row: LedgerRow, eventId: string): Promise<boolean> {
    return (await this.recordMany(tx, [{ row, eventId }])).has(row.attemptId);
  }

  /**
   * A batch of rows in one insert and their `usage.settled` events in one outbox insert; returns
   * the attempt ids whose row was inserted now (a repeated attempt keeps its first row).
   */
  async recordMany(tx: Tx, entries: ReadonlyArray<{ row: LedgerRow; eventId: string }>): Promise<Set<string>> {
    const seen = new Set<string>();
    const unique = entries.filter((e) => !seen.has(e.row.attemptId) && seen.add(e.row.attemptId));
    if (unique.length === 0) return new Set();
    const rows = unique.map((e) => e.row);
    const col = <T>(pick: (r: LedgerRow) => T) => rows.map(pick);
    const inserted = await prismaTx(tx).$queryRaw<Array<{ attempt_id: string; quota_scope: string | null }>>`
      INSERT INTO ledger_entry (id, attempt_id, action_id, attempt_role, request_id, workload_id, environment, route_id, route_version,
        model_alias, provider_request_id, requested_candidates, effective_candidates, returned_candidates, input_tokens,
        cached_input_tokens, output_tokens_total, reasoning_tokens, total_tokens, stream_mode, usage_source, price_revision_id,
        input_microusd, cached_input_microusd, output_microusd, reasoning_microusd, cost_microusd, settled_at, case_id,
        attested_by, attestation_reason)
      SELECT * FROM unnest(${col((r) => r.id)}::text[], ${col((r) => r.attemptId)}::text[], ${col((r) => r.actionId)}::text[],
        ${col((r) => r.attemptRole)}::text[], ${col((r) => r.requestId)}::text[], ${col((r) => r.workloadId)}::text[],
        ${col((r) => r.environment)}::text[], ${col((r) => r.routeId)}::text[], ${col((r) => r.routeVersion)}::int[],
        ${col((r) => r.modelAlias)}::text[], ${col((r) => r.providerRequestId)}::text[], ${col((r) => r.requestedCandidates)}::int[],
        ${col((r) => r.effectiveCandidates)}::int[], ${col((r) => r.returnedCandidates)}::int[], ${col((r) => r.inputTokens)}::int[],
        ${col((r) => r.cachedInputTokens)}::int[], ${col((r) => r.outputTokensTotal)}::int[], ${col((r) => r.reasoningTokens)}::int[],
        ${col((r) => r.totalTokens)}::int[], ${col((r) => r.streamMode)}::text[], ${col((r) => r.usageSource)}::text[],
        ${col((r) => r.priceRevisionId)}::text[], ${col((r) => r.inputMicrousd)}::bigint[], ${col((r) => r.cachedInputMicrousd)}::bigint[],
        ${col((r) => r.outputMicrousd)}::bigint[], ${col((r) => r.reasoningMicrousd)}::bigint[], ${col((r) => r.costMicrousd)}::bigint[],
        ${col((r) => r.settledAt)}::timestamptz[], ${col((r) => r.caseId)}::text[], ${col((r) => r.attestedBy)}::text[],
        ${col((r) => r.attestationReason)}::text[])
      ON CONFLICT (attempt_id) DO NOTHING
      RETURNING attempt_id, (SELECT a.quota_scope FROM action a WHERE a.id = ledger_entry.action_id) AS quota_scope`;
    const scopeOf = new Map(inserted.map((r) => [r.attempt_id, r.quota_scope]));
    const events = unique
      .filter(({ row }) => scopeOf.has(row.attemptId))
      .map(({ row, eventId }) => ({ key: row.workloadId, payload: usageSettledEvent(row, eventId, scopeOf.get(row.attemptId) ?? null) }));
    await this.outbox.appendMany(tx, 'usageSettled', events);
    return new Set(scopeOf.keys());
  }
}

export interface LedgerQuery {
  workloadId: string | null;
  actionId: string | null;
  /** settled_at >= from */
  from: Date | null;
  /** settled_at < to */
  to: Date | null;
  /** the last row of the previous page */
  after: { settledAt: Date; id: string } | null;
  limit: number;
}

/** Finance's read side of the ledger: newest first, keyset-paged on (settled_at, id). */
export class LedgerQueryRepository {
  constructor(private readonly db: Database) {}

  async page(q: LedgerQuery): Promise<LedgerRow[]> {
    const where = [
      q.workloadId ? Prisma.sql`workload_id = ${q.workloadId}` : null,
      q.actionId ? Prisma.sql`action_id = ${q.actionId}` : null,
      q.from ? Prisma.sql`settled_at >= ${q.from}` : null,
      q.to ? Prisma.sql`settled_at < ${q.to}` : null,
      q.after ? Prisma.sql`(settled_at, id) < (${q.after.settledAt}, ${q.after.id})` : null,
    ].filter((c): c is Prisma.Sql => c !== null);
    const rows = await this.db.prisma.$queryRaw<LedgerRaw[]>`
      SELECT * FROM ledger_entry
      ${where.length > 0 ? Prisma.sql`WHERE ${Prisma.join(where, ' AND ')}` : Prisma.empty}
      ORDER BY settled_at DESC, id DESC
      LIMIT ${q.limit}`;
    return rows.map(toLedgerRow);
  }
}

interface LedgerRaw {
  id: string;
  attempt_id: string;
  action_id: string;
  attempt_role: string;
  request_id: string | null;
  workload_id: string;
  environment: string;
  route_id: string;
  route_version: number;
  model_alias: string;
  provider_request_id: string | null;
  requested_candidates: number | null;
  effective_candidates: number;
  returned_candidates: number;
  input_tokens: number | null;
  cached_input_tokens: number | null;
  output_tokens_total: number | null;
  reasoning_tokens: number | null;
  total_tokens: number | null;
  stream_mode: string;
  usage_source: string;
  price_revision_id: string;
  input_microusd: bigint | null;
  cached_input_microusd: bigint | null;
  output_microusd: bigint | null;
  reasoning_microusd: bigint | null;
  cost_microusd: bigint;
  settled_at: Date;
  case_id: string | null;
  attested_by: string | null;
  attestation_reason: string | null;
}

const big = (v: bigint | null): bigint | null => (v === null ? null : BigInt(v));

function toLedgerRow(r: LedgerRaw): LedgerRow {
  return {
    id: r.id,
    attemptId: r.attempt_id,
    actionId: r.action_id,
    attemptRole: r.attempt_role as AttemptRole,
    requestId: r.request_id,
    workloadId: r.workload_id,
    environment: r.environment,
    routeId: r.route_id,
    routeVersion: r.route_version,
    modelAlias: r.model_alias,
    providerRequestId: r.provider_request_id,
    requestedCandidates: r.requested_candidates,
    effectiveCandidates: r.effective_candidates,
    returnedCandidates: r.returned_candidates,
    inputTokens: r.input_tokens,
    cachedInputTokens: r.cached_input_tokens,
    outputTokensTotal: r.output_tokens_total,
    reasoningTokens: r.reasoning_tokens,
    totalTokens: r.total_tokens,
    streamMode: r.stream_mode === 'sse' ? 'sse' : 'none',
    usageSource: r.usage_source as UsageSource,
    priceRevisionId: r.price_revision_id,
    inputMicrousd: big(r.input_microusd),
    cachedInputMicrousd: big(r.cached_input_microusd),
    outputMicrousd: big(r.output_microusd),
    reasoningMicrousd: big(r.reasoning_microusd),
    costMicrousd: BigInt(r.cost_microusd),
    settledAt: r.settled_at,
    caseId: r.case_id,
    attestedBy: r.attested_by,
    attestationReason: r.attestation_reason,
  };
}
