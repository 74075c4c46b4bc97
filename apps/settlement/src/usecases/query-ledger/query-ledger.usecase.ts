import { Inject, Injectable } from '@nestjs/common';
import { costFieldsOf, LedgerQueryRepository, LedgerRow } from '@gateway/db';
import { DomainError } from '@gateway/domain';

export interface QueryLedgerCommand {
  workloadId: string | null;
  actionId: string | null;
  /** ISO timestamps: settled_at >= from, settled_at < to */
  from: string | null;
  to: string | null;
  /** `next_cursor` of the previous page */
  cursor: string | null;
  limit: number;
}

/** Ledger rows newest first, keyset-paged on (settled_at, id) with an opaque cursor. */
@Injectable()
export class QueryLedger {
  constructor(@Inject(LedgerQueryRepository) private readonly ledger: Pick<LedgerQueryRepository, 'page'>) {}

  async execute(q: QueryLedgerCommand) {
    if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > 1000)
      throw new DomainError('invalid_request', 'limit must be an integer from 1 to 1000', 'limit');
    const { from, to } = timeRange(q.from, q.to);
    const after = q.cursor === null ? null : decodeCursor(q.cursor);
    const rows = await this.ledger.page({ workloadId: q.workloadId, actionId: q.actionId, from, to, after, limit: q.limit });
    const last = rows.length === q.limit ? rows[rows.length - 1] : null;
    return {
      entries: rows.map(toEntry),
      /** null on the last page */
      next_cursor: last ? encodeCursor(last) : null,
    };
  }
}

/** `[from, to)` on settled_at, both optional ISO timestamps. */
export function timeRange(fromText: string | null, toText: string | null): { from: Date | null; to: Date | null } {
  const from = instant(fromText, 'from');
  const to = instant(toText, 'to');
  if (from && to && from >= to) throw new DomainError('invalid_request', 'from must be before to', 'from');
  return { from, to };
}

function instant(value: string | null, param: string): Date | null {
  if (value === null) return null;
  const d = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(d.getTime()))
    throw new DomainError('invalid_request', `${param} must be an ISO 8601 timestamp`, param);
  return d;
}

export function encodeCursor(row: Pick<LedgerRow, 'settledAt' | 'id'>): string {
  return Buffer.from(JSON.stringify([row.settledAt.toISOString(), row.id])).toString('base64url');
}

function decodeCursor(cursor: string): { settledAt: Date; id: string } {
  try {
    const [at, id] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown[];
    const settledAt = new Date(String(at));
    if (typeof at === 'string' && typeof id === 'string' && !Number.isNaN(settledAt.getTime())) return { settledAt, id };
  } catch {
    // fall through: any malformed cursor is the same client error
  }
  throw new DomainError('invalid_request', 'cursor is not one this API returned', 'cursor');
}

/** One ledger row as finance reads it (GET /ledger, the export): money in integer micro-USD strings. */
export function toEntry(r: LedgerRow) {
  const cost = costFieldsOf(r);
  return {
    ledger_entry_id: r.id,
    attempt_id: r.attemptId,
    action_id: r.actionId,
    request_id: r.requestId,
    attempt_role: r.attemptRole,
    workload_id: r.workloadId,
    route_id: r.routeId,
    route_version: r.routeVersion,
    model_alias: r.modelAlias,
    provider_request_id: r.providerRequestId,
    requested_candidate_count: r.requestedCandidates,
    effective_candidate_count: r.effectiveCandidates,
    returned_candidate_count: r.returnedCandidates,
    input_tokens: r.inputTokens,
    cached_input_tokens: r.cachedInputTokens,
    output_tokens_total: r.outputTokensTotal,
    reasoning_tokens: r.reasoningTokens,
    total_tokens: r.totalTokens,
    cache_write_input_tokens: r.cacheWriteInputTokens,
    audio_input_tokens: r.audioInputTokens,
    audio_output_tokens: r.audioOutputTokens,
    image_output_tokens: r.imageOutputTokens,
    usage_source: r.usageSource,
    price_revision: r.priceRevisionId,
    cost_microusd: cost.cost_microusd,
    cost_microusd_by_category: cost.cost_microusd_by_category,
    /** null: base rates, an operator release, or a row settled before tiers */
    context_tier_above_input_tokens: r.contextTierAboveInputTokens,
    /** the tier whose rates priced the usage; null on an operator release or a row settled before tiers */
    service_tier: r.serviceTier,
    fee_lines: r.feeLines === null ? null : (cost.fee_lines ?? []),
    attested_by: r.attestedBy,
    attestation_reason: r.attestationReason,
    case_id: r.caseId,
    settled_at: r.settledAt.toISOString(),
    /** the attempt tree (issue 10); null on rows settled before it or when the settling path did not know */
    attempt_no: r.attemptNo ?? null,
    winner: r.winner ?? null,
    attempts_total: r.attemptsTotal ?? null,
    policy_revision_id: r.policyRevisionId ?? null,
    deadline_outcome: r.deadlineOutcome ?? null,
  };
}
