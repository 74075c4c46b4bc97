import type { AttemptRole, FinancialState, UsageSource } from '@gateway/contracts';
import { attemptMachine, AttemptEvent, AttemptState, InvalidTransitionError, transitionGuard } from '@gateway/domain';
import { prismaTx, Tx } from '../database';

export interface AttemptView {
  id: string;
  actionId: string;
  attemptNo: number;
  role: AttemptRole;
  routeId: string;
  routeVersion: number;
  status: AttemptState;
  providerRequestId: string | null;
  returnedCandidates: number | null;
  startedAt: Date;
}

/** What a late piece of evidence records on the attempt row. */
export interface AttemptEvidence {
  usageSource: Extract<UsageSource, 'provider_export' | 'operator_release'>;
  providerRequestId?: string | null;
  inputTokens?: number;
  cachedInputTokens?: number;
  outputTokensTotal?: number;
  reasoningTokens?: number;
}

/** Where an attempt's money stands after an event: only settling and needing evidence decide it. */
function financialStateAfter(event: AttemptEvent): FinancialState | null {
  switch (event) {
    case 'settle':
      return 'settled';
    case 'require_reconciliation':
      return 'unresolved';
    case 'start':
    case 'succeed':
    case 'fail':
    case 'cancel':
    case 'cut':
      return null;
    default: {
      const unreachable: never = event;
      throw new Error(`Unhandled attempt event: ${String(unreachable)}`);
    }
  }
}

/** The attempt aggregate as settlement and reconciliation move it. */
export class AttemptRepository {
  /** Locks the attempt row first (the global lock order in docs/architecture.md); false when it does not exist. */
  async lockAttempt(tx: Tx, attemptId: string): Promise<boolean> {
    const rows = await prismaTx(tx).$queryRaw<Array<{ id: string }>>`SELECT id FROM attempt WHERE id = ${attemptId} FOR UPDATE`;
    return rows.length === 1;
  }

  async byId(tx: Tx, attemptId: string): Promise<AttemptView | null> {
    const a = await prismaTx(tx).attempt.findUnique({ where: { id: attemptId } });
    return a ? toAttemptView(a) : null;
  }

  /**
   * Compare-and-set on the states libs/domain allows for `event` (throws when the attempt is
   * elsewhere); records the attempt's financial state and any late evidence with it.
   */
  async transition(tx: Tx, attemptId: string, event: AttemptEvent, reason: string, now: Date, evidence?: AttemptEvidence): Promise<void> {
    const guard = transitionGuard(attemptMachine, event);
    const e = evidence;
    const updated = await prismaTx(tx).$executeRaw`
      UPDATE attempt SET status = ${guard.to}, status_reason = ${reason}, updated_at = ${now},
        financial_state = COALESCE(${financialStateAfter(event)}, financial_state),
        usage_source = COALESCE(${e?.usageSource ?? null}, usage_source),
        provider_request_id = COALESCE(${e?.providerRequestId ?? null}, provider_request_id),
        input_tokens = COALESCE(${e?.inputTokens ?? null}::int, input_tokens),
        cached_input_tokens = COALESCE(${e?.cachedInputTokens ?? null}::int, cached_input_tokens),
        output_tokens_total = COALESCE(${e?.outputTokensTotal ?? null}::int, output_tokens_total),
        reasoning_tokens = COALESCE(${e?.reasoningTokens ?? null}::int, reasoning_tokens)
      WHERE id = ${attemptId} AND status = ANY(${guard.from}::text[])`;
    if (updated !== 1) throw new InvalidTransitionError('attempt', `${attemptId} not in ${guard.from.join('|')}`, event);
  }

  /** Attempts of the action that may still bring usage through settlement (not settled, not under reconciliation). */
  async awaitingSettlement(tx: Tx, actionId: string): Promise<number> {
    const [row] = await prismaTx(tx).$queryRaw<Array<{ n: bigint }>>`
      SELECT count(*) AS n FROM attempt WHERE action_id = ${actionId} AND status NOT IN ('settled', 'reconciliation_required')`;
    return Number(row.n);
  }
}

export function toAttemptView(a: {
  id: string;
  actionId: string;
  attemptNo: number;
  role: string;
  routeId: string;
  routeVersion: number;
  status: string;
  providerRequestId: string | null;
  returnedCandidates: number | null;
  startedAt: Date;
}): AttemptView {
  return {
    id: a.id,
    actionId: a.actionId,
    attemptNo: a.attemptNo,
    role: a.role as AttemptRole,
    routeId: a.routeId,
    routeVersion: a.routeVersion,
    status: a.status as AttemptState,
    providerRequestId: a.providerRequestId,
    returnedCandidates: a.returnedCandidates,
    startedAt: a.startedAt,
  };
}
