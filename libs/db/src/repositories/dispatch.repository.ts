import type { AttemptCompletedV1 } from '@gateway/contracts';
import { actionMachine, ActionState, attemptMachine, AttemptState } from '@gateway/domain';
import { Database, isUniqueViolation } from '../database';
import { OutboxRepository } from './outbox.repository';

export interface ClaimInput {
  actionId: string;
  attemptId: string;
  attemptNo: number;
  role: 'primary' | 'hedge' | 'retry' | 'fallback';
  routeId: string;
  routeVersion: number;
  effectiveCandidates: number;
  claimedBy: string;
  now: Date;
}

export type ClaimResult = { ok: true } | { ok: false; reason: 'already_claimed' | 'expired' | 'not_dispatchable' };

export interface AttemptOutcome {
  attemptId: string;
  actionId: string;
  status: Extract<AttemptState, 'succeeded' | 'failed' | 'cancelled' | 'usage_missing'>;
  statusReason: string;
  providerRequestId: string | null;
  httpStatus: number | null;
  returnedCandidates: number | null;
  candidateOutcomes: AttemptCompletedV1['candidates'];
  promptBlockReason: string | null;
  usage: { inputTokens: number; cachedInputTokens: number; outputTokensTotal: number; reasoningTokens: number } | null;
  usageSource: 'provider_response' | 'stream_final_chunk' | null;
  now: Date;
  event: AttemptCompletedV1;
  /** set when this attempt decides the action (answered or failed) */
  finishAction: { status: Extract<ActionState, 'answered' | 'failed' | 'expired'>; reason: string; returnedCandidates: number | null; workloadId: string } | null;
}

/** Dispatch's state: single-use claims, attempt lifecycle, action completion. */
export class DispatchRepository {
  constructor(
    private readonly db: Database,
    private readonly outbox: OutboxRepository,
  ) {}

  /**
   * Takes the single-use right to send this attempt upstream. A redelivered command, a second
   * dispatcher or an expired command gets `ok: false` and sends nothing.
   */
  async claim(input: ClaimInput): Promise<ClaimResult> {
    try {
      return await this.db.transaction(async (tx) => {
        // Row lock: the reconciliation sweeper may be expiring this very action.
        const [action] = await tx.$queryRaw<Array<{ status: string; dispatch_deadline_at: Date }>>`
          SELECT status, dispatch_deadline_at FROM action WHERE id = ${input.actionId} FOR UPDATE`;
        if (!action) return { ok: false, reason: 'not_dispatchable' } as const;
        if (action.dispatch_deadline_at <= input.now) return { ok: false, reason: 'expired' } as const;
        const state = action.status as ActionState;
        if (state !== 'admitted' && state !== 'dispatched') return { ok: false, reason: 'not_dispatchable' } as const;
        await tx.dispatchClaim.create({
          data: { actionId: input.actionId, attemptNo: input.attemptNo, claimedBy: input.claimedBy, claimedAt: input.now },
        });
        await tx.attempt.create({
          data: {
            id: input.attemptId,
            actionId: input.actionId,
            attemptNo: input.attemptNo,
            role: input.role,
            routeId: input.routeId,
            routeVersion: input.routeVersion,
            status: attemptMachine.transition('claimed', 'start'),
            statusReason: 'sent upstream',
            effectiveCandidates: input.effectiveCandidates,
            startedAt: input.now,
            updatedAt: input.now,
          },
        });
        if (state === 'admitted') {
          await tx.action.update({
            where: { id: input.actionId },
            data: { status: actionMachine.transition(state, 'dispatch'), statusReason: 'dispatched', updatedAt: input.now },
          });
        }
        return { ok: true } as const;
      });
    } catch (err) {
      if (isUniqueViolation(err)) return { ok: false, reason: 'already_claimed' };
      throw err;
    }
  }

  /** Records an attempt's end and its sanitised event in one transaction. */
  async complete(o: AttemptOutcome): Promise<void> {
    await this.db.transaction(async (tx) => {
      const attempt = await tx.attempt.findUniqueOrThrow({ where: { id: o.attemptId } });
      const event = o.status === 'succeeded' ? 'succeed' : o.status === 'failed' ? 'fail' : o.status === 'cancelled' ? 'cancel' : 'cut';
      await tx.attempt.update({
        where: { id: o.attemptId },
        data: {
          status: attemptMachine.transition(attempt.status as AttemptState, event),
          statusReason: o.statusReason,
          providerRequestId: o.providerRequestId,
          httpStatus: o.httpStatus,
          returnedCandidates: o.returnedCandidates,
          candidateOutcomes: o.candidateOutcomes,
          promptBlockReason: o.promptBlockReason,
          inputTokens: o.usage?.inputTokens ?? null,
          cachedInputTokens: o.usage?.cachedInputTokens ?? null,
          outputTokensTotal: o.usage?.outputTokensTotal ?? null,
          reasoningTokens: o.usage?.reasoningTokens ?? null,
          usageSource: o.usageSource,
          endedAt: o.now,
          updatedAt: o.now,
        },
      });
      if (o.finishAction) {
        const action = await tx.action.findUniqueOrThrow({ where: { id: o.actionId } });
        const next = actionMachine.transition(
          action.status as ActionState,
          o.finishAction.status === 'answered' ? 'answer' : o.finishAction.status === 'failed' ? 'fail' : 'expire',
        );
        await tx.action.update({
          where: { id: o.actionId },
          data: {
            status: next,
            statusReason: o.finishAction.reason,
            returnedCandidates: o.finishAction.returnedCandidates,
            updatedAt: o.now,
          },
        });
      }
      await this.outbox.append(tx, 'attemptCompleted', o.event.workload_id ?? o.actionId, o.event);
      if (o.finishAction) {
        // The workload's hot counter row last: its lock is held only until the commit.
        await tx.$executeRaw`
          UPDATE quota_counter SET in_flight = GREATEST(in_flight - 1, 0), updated_at = now()
          WHERE scope = 'workload' AND scope_id = ${o.finishAction.workloadId} AND window_start = ${new Date(0)}`;
      }
    });
  }
}
