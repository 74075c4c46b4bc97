import { acceptanceVerdict, settledCostFields } from '@gateway/contracts';
import type { AttemptRole, DeadlineOutcome, UsageSettledV1, UsageSource } from '@gateway/contracts';
import { FeeLine, PRICED_FEATURES, PricedFeature, Usage, UsageCost } from '@gateway/domain';
import { Database, Tx, txQuery } from '../database';
import { Prisma } from '../generated/prisma/client';
import { OutboxRepository } from './outbox.repository';
import { recordedCandidatesOf } from './recorded-candidates';

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
  /**
   * The attempt tree (issue 10), when the settling path knows it (the attempt event carries it;
   * absent or null: unknown, as on rows settled before it).
   */
  attemptNo?: number | null;
  winner?: boolean | null;
  attemptsTotal?: number | null;
  policyRevisionId?: string | null;
  deadlineOutcome?: DeadlineOutcome | null;
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
  /**
   * Billable detail (issue 14), null on an operator release and on rows settled before it: the
   * token counts of the categories a structured price bills apart (subsets of the totals above),
   * their cost lines, the per-call fees, the context tier crossed and the service tier that priced it.
   */
  cacheWriteInputTokens: number | null;
  audioInputTokens: number | null;
  audioOutputTokens: number | null;
  imageOutputTokens: number | null;
  cacheWriteMicrousd: bigint | null;
  audioInputMicrousd: bigint | null;
  audioOutputMicrousd: bigint | null;
  imageOutputMicrousd: bigint | null;
  feesMicrousd: bigint | null;
  feeLines: FeeLine[] | null;
  contextTierAboveInputTokens: number | null;
  serviceTier: string | null;
}

/** Where the settled amount comes from: provider-reported usage priced, or an operator's attestation. */
export type SettlementEvidence =
  | { kind: 'usage'; source: Exclude<UsageSource, 'operator_release'>; usage: Usage; cost: UsageCost }
  | { kind: 'attested'; amountMicrousd: bigint; caseId: string; attestedBy: string; reason: string };

/**
 * The one ledger-row builder, for settlement and reconciliation alike. The row is built with
 * `Object.assign` on a literal of the facts, never `{ ...base, <more fields> }`: V8 (Node 20)
 * builds that spread of a ~45-field row in ~25–90 µs against ~1 µs, and settlement builds one row
 * per event (docs/decisions.md, "Batched settlement").
 */
export function buildLedgerRow(input: {
  id: string;
  facts: AttemptFacts;
  evidence: SettlementEvidence;
  priceRevisionId: string;
  settledAt: Date;
}): LedgerRow {
  const { evidence } = input;
  switch (evidence.kind) {
    case 'usage': {
      const { usage, cost } = evidence;
      return Object.assign(rowHead(input), {
        inputTokens: usage.inputTokens,
        cachedInputTokens: usage.cachedInputTokens,
        outputTokensTotal: usage.outputTokens,
        reasoningTokens: usage.reasoningTokens,
        totalTokens: usage.inputTokens + usage.outputTokens,
        usageSource: evidence.source,
        inputMicrousd: cost.input,
        cachedInputMicrousd: cost.cachedInput,
        outputMicrousd: cost.output,
        reasoningMicrousd: cost.reasoning,
        costMicrousd: cost.total,
        caseId: null,
        attestedBy: null,
        attestationReason: null,
        cacheWriteInputTokens: usage.cacheWriteInputTokens ?? 0,
        audioInputTokens: usage.audioInputTokens ?? 0,
        audioOutputTokens: usage.audioOutputTokens ?? 0,
        imageOutputTokens: usage.imageOutputTokens ?? 0,
        cacheWriteMicrousd: cost.cacheWrite,
        audioInputMicrousd: cost.audioInput,
        audioOutputMicrousd: cost.audioOutput,
        imageOutputMicrousd: cost.imageOutput,
        feesMicrousd: cost.fees,
        feeLines: cost.feeLines,
        contextTierAboveInputTokens: cost.contextTier,
        serviceTier: cost.serviceTier,
      });
    }
    case 'attested':
      return Object.assign(
        rowHead(input),
        {
          inputTokens: null,
          cachedInputTokens: null,
          outputTokensTotal: null,
          reasoningTokens: null,
          totalTokens: null,
          usageSource: 'operator_release' as const,
          inputMicrousd: null,
          cachedInputMicrousd: null,
          outputMicrousd: null,
          reasoningMicrousd: null,
          costMicrousd: evidence.amountMicrousd,
          caseId: evidence.caseId,
          attestedBy: evidence.attestedBy,
          attestationReason: evidence.reason,
        },
        NO_DETAIL,
      );
    default: {
      const unreachable: never = evidence;
      throw new Error(`Unhandled settlement evidence: ${String(unreachable)}`);
    }
  }
}

/** The fields every row takes from the attempt's facts, as one literal. */
function rowHead(input: { id: string; facts: AttemptFacts; priceRevisionId: string; settledAt: Date }) {
  const f = input.facts;
  return {
    id: input.id,
    attemptId: f.attemptId,
    actionId: f.actionId,
    attemptRole: f.attemptRole,
    requestId: f.requestId,
    workloadId: f.workloadId,
    environment: f.environment,
    routeId: f.routeId,
    routeVersion: f.routeVersion,
    modelAlias: f.modelAlias,
    providerRequestId: f.providerRequestId,
    requestedCandidates: f.requestedCandidates,
    effectiveCandidates: f.effectiveCandidates,
    returnedCandidates: f.returnedCandidates,
    streamMode: f.streamMode,
    attemptNo: f.attemptNo ?? null,
    winner: f.winner ?? null,
    attemptsTotal: f.attemptsTotal ?? null,
    policyRevisionId: f.policyRevisionId ?? null,
    deadlineOutcome: f.deadlineOutcome ?? null,
    priceRevisionId: input.priceRevisionId,
    settledAt: input.settledAt,
  };
}

const NO_DETAIL = {
  cacheWriteInputTokens: null,
  audioInputTokens: null,
  audioOutputTokens: null,
  imageOutputTokens: null,
  cacheWriteMicrousd: null,
  audioInputMicrousd: null,
  audioOutputMicrousd: null,
  imageOutputMicrousd: null,
  feesMicrousd: null,
  feeLines: null,
  contextTierAboveInputTokens: null,
  serviceTier: null,
} satisfies Partial<LedgerRow>;

/**
 * The row's cost as finance reads it (`settledCostFields`, the one home of those fields): the split
 * is null when only a total was attested; a line a row settled before it lacks is zero.
 */
export function costFieldsOf(
  row: LedgerRow,
): Pick<UsageSettledV1, 'cost_microusd' | 'cost_microusd_by_category' | 'context_tier_above_input_tokens' | 'service_tier' | 'fee_lines'> {
  if (row.inputMicrousd === null || row.cachedInputMicrousd === null || row.outputMicrousd === null || row.reasoningMicrousd === null) {
    return { cost_microusd: row.costMicrousd.toString(), cost_microusd_by_category: null };
  }
  return settledCostFields({
    total: row.costMicrousd,
    input: row.inputMicrousd,
    cachedInput: row.cachedInputMicrousd,
    output: row.outputMicrousd,
    reasoning: row.reasoningMicrousd,
    cacheWrite: row.cacheWriteMicrousd ?? 0n,
    audioInput: row.audioInputMicrousd ?? 0n,
    audioOutput: row.audioOutputMicrousd ?? 0n,
    imageOutput: row.imageOutputMicrousd ?? 0n,
    fees: row.feesMicrousd ?? 0n,
    feeLines: row.feeLines ?? [],
    contextTier: row.contextTierAboveInputTokens,
    serviceTier: row.serviceTier,
  });
}

/**
 * `gateway.usage.settled.v1` for a ledger row: the same fields whichever service settled it.
 * `quotaScope` is what admission recorded on the action (every scope the money was held on).
 */
export function usageSettledEvent(
  row: LedgerRow,
  eventId: string,
  quotaScope: string | null = null,
  copied: CopiedFacts | null = null,
): UsageSettledV1 {
  const cohort = copied?.cohort ?? null;
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
    ...costFieldsOf(row),
    settled_at: row.settledAt.toISOString(),
    attempt_no: row.attemptNo ?? null,
    winner: row.winner ?? copied?.winner ?? null,
    attempts_total: row.attemptsTotal ?? null,
    policy_revision_id: row.policyRevisionId ?? null,
    deadline_outcome: row.deadlineOutcome ?? null,
    ...(cohort ? { cohort } : {}),
    ...(copied ? experimentFieldsOf(copied) : {}),
  };
}

/**
 * What the ledger row got from its action and attempt when it was inserted (the trigger
 * `ledger_experiment_facts`: the cohort; for an experiment action also the experiment, its
 * admission time and acceptance verdict, whether the attempt won when the writer did not say, and
 * the attempt's end, candidate outcomes and the experiment pause it was dispatched under), as the
 * insert returns it.
 */
export type CopiedFacts = {
  cohort: UsageSettledV1['cohort'];
  /** as the row was stored: for an experiment row without it, from action.winner_attempt_id */
  winner: boolean | null;
  experiment_id: string | null;
  action_admitted_at: Date | null;
  attempt_ended_at: Date | null;
  acceptance_verdict: string | null;
  candidate_outcomes: unknown;
  experiment_pause_id: string | null;
};

const copiedVerdict = acceptanceVerdict.nullable().catch(null);

/** The settled event's experiment fields (issue 11): only on rows of an experiment action. */
export function experimentFieldsOf(c: CopiedFacts): Partial<UsageSettledV1> {
  if (c.experiment_id === null || c.action_admitted_at === null) return {};
  return {
    experiment_id: c.experiment_id,
    action_admitted_at: c.action_admitted_at.toISOString(),
    attempt_ended_at: c.attempt_ended_at?.toISOString() ?? null,
    action_acceptance_verdict: copiedVerdict.parse(c.acceptance_verdict),
    attempt_candidates: recordedCandidatesOf(c.candidate_outcomes),
    experiment_pause_id: c.experiment_pause_id,
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
    // The rows travel as one JSON parameter (column name → value, money as decimal strings) that
    // json_populate_recordset reads with the table's own column types, sent by `pg` on the
    // transaction's connection (`txQuery`): one string to pass instead of 43 arrays of 500
    // elements for Prisma to round-trip through JSON and `pg` to escape one by one.
    const rows = JSON.stringify(unique.map((e) => ledgerColumns(e.row)));
    const inserted = await txQuery<{ attempt_id: string; quota_scope: string | null } & CopiedFacts>(tx, INSERT_LEDGER_ROWS, [rows]);
    // what the row got from its action and attempt (trigger ledger_experiment_facts), for the settled event
    const copiedOf = new Map(inserted.map((r) => [r.attempt_id, r]));
    const events = unique
      .filter(({ row }) => copiedOf.has(row.attemptId))
      .map(({ row, eventId }) => {
        const copied = copiedOf.get(row.attemptId)!;
        return { key: row.workloadId, payload: usageSettledEvent(row, eventId, copied.quota_scope, copied) };
      });
    await this.outbox.appendMany(tx, 'usageSettled', events);
    return new Set(copiedOf.keys());
  }
}

/** A ledger row as its table's columns (JSON values: money as decimal strings, never numbers). */
function ledgerColumns(r: LedgerRow): Record<(typeof LEDGER_COLUMNS)[number], string | number | boolean | null | FeeLineJson[]> {
  const money = (v: bigint | null) => (v === null ? null : v.toString());
  return {
    id: r.id,
    attempt_id: r.attemptId,
    action_id: r.actionId,
    attempt_role: r.attemptRole,
    request_id: r.requestId,
    workload_id: r.workloadId,
    environment: r.environment,
    route_id: r.routeId,
    route_version: r.routeVersion,
    model_alias: r.modelAlias,
    provider_request_id: r.providerRequestId,
    requested_candidates: r.requestedCandidates,
    effective_candidates: r.effectiveCandidates,
    returned_candidates: r.returnedCandidates,
    input_tokens: r.inputTokens,
    cached_input_tokens: r.cachedInputTokens,
    output_tokens_total: r.outputTokensTotal,
    reasoning_tokens: r.reasoningTokens,
    total_tokens: r.totalTokens,
    stream_mode: r.streamMode,
    usage_source: r.usageSource,
    price_revision_id: r.priceRevisionId,
    input_microusd: money(r.inputMicrousd),
    cached_input_microusd: money(r.cachedInputMicrousd),
    output_microusd: money(r.outputMicrousd),
    reasoning_microusd: money(r.reasoningMicrousd),
    cost_microusd: r.costMicrousd.toString(),
    settled_at: r.settledAt.toISOString(),
    case_id: r.caseId,
    attested_by: r.attestedBy,
    attestation_reason: r.attestationReason,
    cache_write_input_tokens: r.cacheWriteInputTokens,
    audio_input_tokens: r.audioInputTokens,
    audio_output_tokens: r.audioOutputTokens,
    image_output_tokens: r.imageOutputTokens,
    cache_write_microusd: money(r.cacheWriteMicrousd),
    audio_input_microusd: money(r.audioInputMicrousd),
    audio_output_microusd: money(r.audioOutputMicrousd),
    image_output_microusd: money(r.imageOutputMicrousd),
    fees_microusd: money(r.feesMicrousd),
    fee_lines: feeLinesValue(r.feeLines),
    context_tier_above_input_tokens: r.contextTierAboveInputTokens,
    service_tier: r.serviceTier,
    attempt_no: r.attemptNo ?? null,
    winner: r.winner ?? null,
    attempts_total: r.attemptsTotal ?? null,
    hedge_policy_revision_id: r.policyRevisionId ?? null,
    deadline_outcome: r.deadlineOutcome ?? null,
  };
}

const LEDGER_COLUMNS = [
  'id',
  'attempt_id',
  'action_id',
  'attempt_role',
  'request_id',
  'workload_id',
  'environment',
  'route_id',
  'route_version',
  'model_alias',
  'provider_request_id',
  'requested_candidates',
  'effective_candidates',
  'returned_candidates',
  'input_tokens',
  'cached_input_tokens',
  'output_tokens_total',
  'reasoning_tokens',
  'total_tokens',
  'stream_mode',
  'usage_source',
  'price_revision_id',
  'input_microusd',
  'cached_input_microusd',
  'output_microusd',
  'reasoning_microusd',
  'cost_microusd',
  'settled_at',
  'case_id',
  'attested_by',
  'attestation_reason',
  'cache_write_input_tokens',
  'audio_input_tokens',
  'audio_output_tokens',
  'image_output_tokens',
  'cache_write_microusd',
  'audio_input_microusd',
  'audio_output_microusd',
  'image_output_microusd',
  'fees_microusd',
  'fee_lines',
  'context_tier_above_input_tokens',
  'service_tier',
  'attempt_no',
  'winner',
  'attempts_total',
  'hedge_policy_revision_id',
  'deadline_outcome',
] as const;
const INSERT_LEDGER_ROWS = `
  INSERT INTO ledger_entry (${LEDGER_COLUMNS.join(', ')})
  SELECT ${LEDGER_COLUMNS.join(', ')} FROM json_populate_recordset(NULL::ledger_entry, $1::json)
  ON CONFLICT (attempt_id) DO NOTHING
  RETURNING attempt_id, (SELECT a.quota_scope FROM action a WHERE a.id = ledger_entry.action_id) AS quota_scope, cohort, winner,
    experiment_id, action_admitted_at, attempt_ended_at, acceptance_verdict, candidate_outcomes, experiment_pause_id`;

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
  cache_write_input_tokens: number | null;
  audio_input_tokens: number | null;
  audio_output_tokens: number | null;
  image_output_tokens: number | null;
  cache_write_microusd: bigint | null;
  audio_input_microusd: bigint | null;
  audio_output_microusd: bigint | null;
  image_output_microusd: bigint | null;
  fees_microusd: bigint | null;
  fee_lines: unknown;
  context_tier_above_input_tokens: number | null;
  service_tier: string | null;
  attempt_no: number | null;
  winner: boolean | null;
  attempts_total: number | null;
  hedge_policy_revision_id: string | null;
  deadline_outcome: string | null;
}

interface FeeLineJson {
  feature: string;
  calls: number;
  microusd: string;
}

/** Fee lines as stored (and published): money as decimal strings, never JSON numbers. */
function feeLinesValue(lines: readonly FeeLine[] | null): FeeLineJson[] | null {
  return lines === null ? null : lines.map((l) => ({ feature: l.feature, calls: l.calls, microusd: l.microusd.toString() }));
}

function feeLinesOf(stored: unknown): FeeLine[] | null {
  if (!Array.isArray(stored)) return null;
  return stored.map((l: { feature: string; calls: number; microusd: string }) => {
    if (!(PRICED_FEATURES as readonly string[]).includes(l.feature)) throw new Error(`ledger fee line for unknown feature ${l.feature}`);
    return { feature: l.feature as PricedFeature, calls: l.calls, microusd: BigInt(l.microusd) };
  });
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
    cacheWriteInputTokens: r.cache_write_input_tokens,
    audioInputTokens: r.audio_input_tokens,
    audioOutputTokens: r.audio_output_tokens,
    imageOutputTokens: r.image_output_tokens,
    cacheWriteMicrousd: big(r.cache_write_microusd),
    audioInputMicrousd: big(r.audio_input_microusd),
    audioOutputMicrousd: big(r.audio_output_microusd),
    imageOutputMicrousd: big(r.image_output_microusd),
    feesMicrousd: big(r.fees_microusd),
    feeLines: feeLinesOf(r.fee_lines),
    contextTierAboveInputTokens: r.context_tier_above_input_tokens,
    serviceTier: r.service_tier,
    attemptNo: r.attempt_no,
    winner: r.winner,
    attemptsTotal: r.attempts_total,
    policyRevisionId: r.hedge_policy_revision_id,
    deadlineOutcome: r.deadline_outcome as DeadlineOutcome | null,
  };
}
