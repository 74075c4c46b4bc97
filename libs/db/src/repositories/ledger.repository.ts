import { acceptanceVerdict, settledCostFields } from '@gateway/contracts';
import type { AttemptRole, DeadlineOutcome, UsageSettledV1, UsageSource } from '@gateway/contracts';
import { FeeLine, PRICED_FEATURES, PricedFeature, Usage, UsageCost } from '@gateway/domain';
import { Database, Tx, prismaTx, txQuery } from '../database';
import { Prisma } from '../generated/prisma/client';
import type { OutboxRepository } from './outbox.repository';
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
 * What the ledger row got from its action and attempt when it was inserted (EXPERIMENT_FACTS:
 * the cohort; for an experiment action also the experiment, its
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
 * and, only when it was inserted, announces its `usage.settled` through the outbox in the same
 * transaction (one `ledger_settled` row for the batch: `OutboxRepository.appendLedgerSettled`), so
 * one attempt has one row and one settled event however often it is settled.
 */
export class LedgerRepository {
  constructor(private readonly outbox: Pick<OutboxRepository, 'appendLedgerSettled'>) {}

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
    // The rows travel as one JSON parameter, each row an array of its column values in
    // LEDGER_COLUMNS order (money as decimal strings), sent by `pg` on the transaction's connection
    // (`txQuery`). Arrays, not objects keyed by column name: the text is 2.5× shorter and Postgres
    // reads it as jsonb with one cast per column in ~8 µs a row, against ~26 µs for
    // json_populate_recordset of the keyed objects (docs/decisions.md, "Batched settlement").
    const rows = JSON.stringify(unique.map((e) => LEDGER_COLUMNS.map((c) => c[2](e.row))));
    const inserted = await txQuery<{ attempt_id: string; quota_scope: string | null } & CopiedFacts>(tx, INSERT_LEDGER_ROWS, [
      rows,
      unique.map((e) => e.row.actionId),
      unique.map((e) => e.row.attemptId),
    ]);
    // what the row got from its action and attempt (EXPERIMENT_FACTS), for the settled event
    const copiedOf = new Map(inserted.map((r) => [r.attempt_id, r]));
    const events = unique
      .filter(({ row }) => copiedOf.has(row.attemptId))
      .map(({ row, eventId }) => {
        const copied = copiedOf.get(row.attemptId)!;
        return { key: row.workloadId, payload: usageSettledEvent(row, eventId, copied.quota_scope, copied) };
      });
    await this.outbox.appendLedgerSettled(tx, events);
    return new Set(copiedOf.keys());
  }
}

/**
 * The `usage.settled` events of ledger rows already written, the same as `recordMany` built when it
 * inserted them (the row, what it copied from its action and attempt, the action's quota scope):
 * what a sweep publishes for an outbox row of kind `ledger_settled`. `pairs` are [attempt id, event
 * id]; an attempt without a ledger row is missing from the map. Keyed as `recordMany` keys them.
 */
export async function usageSettledOfLedger(
  tx: Tx,
  pairs: ReadonlyArray<readonly [string, string]>,
): Promise<Map<string, { key: string; payload: UsageSettledV1 }>> {
  const eventIdOf = new Map(pairs);
  const rows = await prismaTx(tx).$queryRaw<Array<LedgerRaw & CopiedRaw & { quota_scope: string | null }>>`
    SELECT l.*, a.quota_scope FROM ledger_entry l LEFT JOIN action a ON a.id = l.action_id
    WHERE l.attempt_id = ANY(${[...eventIdOf.keys()]}::text[])`;
  return new Map(
    rows.map((r) => {
      const copied: CopiedFacts = {
        cohort: r.cohort as UsageSettledV1['cohort'],
        winner: r.winner,
        experiment_id: r.experiment_id,
        action_admitted_at: r.action_admitted_at,
        attempt_ended_at: r.attempt_ended_at,
        acceptance_verdict: r.acceptance_verdict,
        candidate_outcomes: r.candidate_outcomes,
        experiment_pause_id: r.experiment_pause_id,
      };
      const row = toLedgerRow(r);
      return [r.attempt_id, { key: row.workloadId, payload: usageSettledEvent(row, eventIdOf.get(r.attempt_id)!, r.quota_scope, copied) }];
    }),
  );
}

/** The ledger columns EXPERIMENT_FACTS copied, as read back. */
type CopiedRaw = Omit<CopiedFacts, 'cohort'> & { cohort: string | null };

type ColumnValue = string | number | boolean | null | FeeLineJson[];
const money = (v: bigint | null): string | null => (v === null ? null : v.toString());

/**
 * The columns a writer sets: name, SQL type (the cast of its JSON value) and its value from the row
 * (JSON values: money as decimal strings, never numbers). The rest (the cohort and the experiment
 * facts) are copied from the action and attempt by the insert itself (EXPERIMENT_FACTS).
 */
const LEDGER_COLUMNS: ReadonlyArray<
  readonly [string, 'text' | 'int' | 'bigint' | 'boolean' | 'timestamptz' | 'jsonb', (r: LedgerRow) => ColumnValue]
> = [
  ['id', 'text', (r) => r.id],
  ['attempt_id', 'text', (r) => r.attemptId],
  ['action_id', 'text', (r) => r.actionId],
  ['attempt_role', 'text', (r) => r.attemptRole],
  ['request_id', 'text', (r) => r.requestId],
  ['workload_id', 'text', (r) => r.workloadId],
  ['environment', 'text', (r) => r.environment],
  ['route_id', 'text', (r) => r.routeId],
  ['route_version', 'int', (r) => r.routeVersion],
  ['model_alias', 'text', (r) => r.modelAlias],
  ['provider_request_id', 'text', (r) => r.providerRequestId],
  ['requested_candidates', 'int', (r) => r.requestedCandidates],
  ['effective_candidates', 'int', (r) => r.effectiveCandidates],
  ['returned_candidates', 'int', (r) => r.returnedCandidates],
  ['input_tokens', 'int', (r) => r.inputTokens],
  ['cached_input_tokens', 'int', (r) => r.cachedInputTokens],
  ['output_tokens_total', 'int', (r) => r.outputTokensTotal],
  ['reasoning_tokens', 'int', (r) => r.reasoningTokens],
  ['total_tokens', 'int', (r) => r.totalTokens],
  ['stream_mode', 'text', (r) => r.streamMode],
  ['usage_source', 'text', (r) => r.usageSource],
  ['price_revision_id', 'text', (r) => r.priceRevisionId],
  ['input_microusd', 'bigint', (r) => money(r.inputMicrousd)],
  ['cached_input_microusd', 'bigint', (r) => money(r.cachedInputMicrousd)],
  ['output_microusd', 'bigint', (r) => money(r.outputMicrousd)],
  ['reasoning_microusd', 'bigint', (r) => money(r.reasoningMicrousd)],
  ['cost_microusd', 'bigint', (r) => r.costMicrousd.toString()],
  ['settled_at', 'timestamptz', (r) => r.settledAt.toISOString()],
  ['case_id', 'text', (r) => r.caseId],
  ['attested_by', 'text', (r) => r.attestedBy],
  ['attestation_reason', 'text', (r) => r.attestationReason],
  ['cache_write_input_tokens', 'int', (r) => r.cacheWriteInputTokens],
  ['audio_input_tokens', 'int', (r) => r.audioInputTokens],
  ['audio_output_tokens', 'int', (r) => r.audioOutputTokens],
  ['image_output_tokens', 'int', (r) => r.imageOutputTokens],
  ['cache_write_microusd', 'bigint', (r) => money(r.cacheWriteMicrousd)],
  ['audio_input_microusd', 'bigint', (r) => money(r.audioInputMicrousd)],
  ['audio_output_microusd', 'bigint', (r) => money(r.audioOutputMicrousd)],
  ['image_output_microusd', 'bigint', (r) => money(r.imageOutputMicrousd)],
  ['fees_microusd', 'bigint', (r) => money(r.feesMicrousd)],
  ['fee_lines', 'jsonb', (r) => feeLinesValue(r.feeLines)],
  ['context_tier_above_input_tokens', 'int', (r) => r.contextTierAboveInputTokens],
  ['service_tier', 'text', (r) => r.serviceTier],
  ['attempt_no', 'int', (r) => r.attemptNo ?? null],
  ['winner', 'boolean', (r) => r.winner ?? null],
  ['attempts_total', 'int', (r) => r.attemptsTotal ?? null],
  ['hedge_policy_revision_id', 'text', (r) => r.policyRevisionId ?? null],
  ['deadline_outcome', 'text', (r) => r.deadlineOutcome ?? null],
];

/** Column i of a row array as its type (a JSON null is SQL NULL, for jsonb too). */
function columnOf([name, type]: (typeof LEDGER_COLUMNS)[number], i: number): string {
  switch (type) {
    case 'text':
      return `r->>${i} AS ${name}`;
    case 'jsonb':
      return `nullif(r->${i}, 'null') AS ${name}`;
    case 'int':
    case 'bigint':
    case 'boolean':
    case 'timestamptz':
      return `(r->>${i})::${type} AS ${name}`;
    default: {
      const unreachable: never = type;
      throw new Error(`Unhandled column type: ${String(unreachable)}`);
    }
  }
}

/**
 * What every ledger row copies from its action and attempt when it is written (issue 11: "per
 * attempt in the ledger and settled event … so finance can rebuild the report from the topic
 * alone"), as the row's extra columns over `src` (the rows joined to their action `a` and, for an
 * experiment action only, their attempt `t`): the action's cohort; for an experiment action also
 * the experiment, its admission time and acceptance verdict (as it stands now: the winner's row is
 * written after the winner ended the action, so it carries the final verdict), whether the attempt
 * won when the writer did not say (from action.winner_attempt_id, the one compare-and-set that
 * decides it) and the attempt's end, candidate outcomes and the experiment pause it was dispatched
 * under. Other rows keep NULLs. The one home of the rule: this is the one insert into ledger_entry
 * (it was the row trigger `ledger_experiment_facts`, dropped by migration 20261203900000, which ran
 * a plpgsql function and an action lookup per row).
 */
const EXPERIMENT_FACTS: ReadonlyArray<readonly [column: string, value: string]> = [
  ['cohort', 'x_cohort'],
  ['experiment_id', 'x_experiment'],
  ['action_admitted_at', 'CASE WHEN x_experiment IS NOT NULL THEN x_admitted END'],
  ['acceptance_verdict', 'CASE WHEN x_experiment IS NOT NULL THEN x_verdict END'],
  ['attempt_ended_at', 't_ended'],
  ['candidate_outcomes', 't_outcomes'],
  ['experiment_pause_id', 't_pause'],
];
const WRITTEN = LEDGER_COLUMNS.map(([name]) =>
  name === 'winner'
    ? 'CASE WHEN x_experiment IS NOT NULL AND winner IS NULL THEN x_winner IS NOT DISTINCT FROM attempt_id ELSE winner END'
    : name,
);

/**
 * `$1` the rows (arrays in LEDGER_COLUMNS order), `$2`/`$3` their action and attempt ids: the
 * `= ANY` beside each join keeps the lookups on the primary key whatever the planner guesses of
 * the JSON's size (as in `ReservationHoldRepository.moveMany`).
 */
const INSERT_LEDGER_ROWS = `
  WITH src AS (
    SELECT v.*, a.quota_scope, a.cohort AS x_cohort, a.experiment_id AS x_experiment, a.created_at AS x_admitted,
      a.acceptance_verdict AS x_verdict, a.winner_attempt_id AS x_winner,
      t.ended_at AS t_ended, t.candidate_outcomes AS t_outcomes, t.experiment_pause_id AS t_pause
    FROM (SELECT ${LEDGER_COLUMNS.map(columnOf).join(', ')} FROM jsonb_array_elements($1::jsonb) AS e(r)) v
    LEFT JOIN action a ON a.id = v.action_id AND a.id = ANY($2::text[])
    LEFT JOIN attempt t ON a.experiment_id IS NOT NULL AND t.id = v.attempt_id AND t.id = ANY($3::text[])
  ),
  ins AS (
    INSERT INTO ledger_entry (${[...LEDGER_COLUMNS.map(([name]) => name), ...EXPERIMENT_FACTS.map(([c]) => c)].join(', ')})
    SELECT ${[...WRITTEN, ...EXPERIMENT_FACTS.map(([, v]) => v)].join(', ')} FROM src
    ON CONFLICT (attempt_id) DO NOTHING
    RETURNING attempt_id, cohort, winner, experiment_id, action_admitted_at, attempt_ended_at, acceptance_verdict, candidate_outcomes,
      experiment_pause_id
  )
  SELECT ins.*, src.quota_scope FROM ins JOIN src USING (attempt_id)`;

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
