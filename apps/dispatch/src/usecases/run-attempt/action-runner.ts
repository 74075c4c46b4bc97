import type { AttemptRole, DispatchCommandV1, ReplyAddress } from '@gateway/contracts';
import {
  allowanceFundingOf,
  AttemptExposure,
  AttemptFailure,
  decideHedge,
  hedgeDelayMs,
  hedgeIneligibility,
  HedgePolicyRevision,
  isProviderFailureStatus,
  MAX_BUDGET_MICROUSD,
  requestToolNames,
  retryDecision,
  transientFailureOf,
  bucketAllowsExtraAttempts,
} from '@gateway/domain';
import type { ParsedResponse } from '@gateway/providers';
import type { EvidenceResult } from './record-evidence';
import { isTransientDatabaseError } from '@gateway/db';
import type { ExtraAttemptDenial, ExtraAttemptRole } from '@gateway/db';
import type { ReplyExtras, RunAttempt } from './run-attempt.usecase';

/** One attempt of an action as dispatch runs it; the prompt lives only in `cmd`, in memory. */
export interface Ctx {
  /** the action's command as this attempt sends it (a fallback's carries the fallback route) */
  cmd: DispatchCommandV1;
  attemptId: string;
  attemptNo: number;
  role: AttemptRole;
  /** this attempt's own hold (null: the primary of a command without one; nothing extra is funded then) */
  holdMicrousd: bigint | null;
  replyTo: ReplyAddress;
  /** the resolved upstream key (null: the route names none); lives only in memory */
  credential: string | null;
  /** streams: whether the provider's whole stream arrived (end marker or final chunk) */
  streamFinished?: boolean;
  /** streams: admission said the client is gone; chunks are read for their usage and not relayed */
  relayStopped?: boolean;
  /** the outcome's write, once started; may outlive the reply */
  evidence: Promise<EvidenceResult> | null;
  /** aborts the upstream request (a loser, once another attempt has won) */
  abort: AbortController;
  startedAtMs: number;
}

/** What one whole (non-stream) upstream call came to. */
export type WholeResult =
  | { kind: 'answer'; statusCode: number; body: unknown; parsed: ParsedResponse; valid: boolean; verdictReason: string; receivedAt: Date }
  | { kind: 'error_answer'; statusCode: number; code: string | null; contractFailure: boolean; receivedAt: Date }
  | { kind: 'no_answer'; cause: 'timeout' | 'connection_error' | 'cancelled' | 'too_large'; firstByte: boolean; receivedAt: Date };

/** The action-level facts an attempt's event carries (interface-10). */
export interface AttemptReport {
  /** attempts of the action started so far, this one included */
  attemptsTotal: number;
  /** no further attempt of this action will start after this one */
  actionFinal: boolean;
  winner: boolean;
  policyRevisionId: string | null;
  /** this attempt decides the action (the winner, or the last failure): it moves the action's state */
  finishesAction: boolean;
}

/** A probe, a stream, or an action without a hedge policy: one attempt that decides the action. */
export const SINGLE_ATTEMPT: AttemptReport = {
  attemptsTotal: 1,
  actionFinal: true,
  winner: false,
  policyRevisionId: null,
  finishesAction: true,
};

type Running = { ctx: Ctx; result: Promise<WholeResult> };

/** Runs of the winner compare-and-set before this runner decides alone. */
const WINNER_TRIES = 3;

/** Denials that mean the gateway's own allowance is used up: an SDK must not add attempts on top. */
const ALLOWANCE_SPENT: ReadonlySet<string> = new Set([
  'retry_limit',
  'attempt_allowance_spent',
  'spend_allowance_spent',
  'hedge_limit',
  'budget_exhausted',
  'spend_floor',
]);

/** Denials after which no other fallback route is tried (a route-specific one, e.g. its hold or credential, moves on). */
const STOPS_FALLBACKS: ReadonlySet<string> = new Set([
  'winner_chosen',
  'action_terminal',
  'deadline_too_short',
  'attempt_allowance_spent',
  'already_claimed',
]);

/**
 * Runs one non-stream action: the primary; a hedge when the timer fires and both `decideHedge`
 * (this instance's route facts) and the serialised admission (`admitExtraAttempt`) allow it; a
 * retry after a transient failure (`retryDecision`), else the next approved fallback route. The
 * first answer that passes acceptance and wins the compare-and-set (`chooseWinner`) is the one
 * reply; every other attempt is aborted and still recorded (its usage if the provider reported it,
 * else `cancelled`, which settlement holds as exposure). Without a policy it is the single attempt
 * dispatch always ran.
 */
export class ActionRunner {
  private readonly attempts: Ctx[] = [];
  private readonly running = new Map<string, Running>();
  private readonly records: Promise<void>[] = [];
  private winner: Ctx | null = null;
  private replied = false;
  private gatewayRetried = false;
  private nextFallback = 0;
  private hedgeTimer: NodeJS.Timeout | null = null;
  private hedgeDue: Promise<'hedge'> | null = null;
  /** an answer that failed acceptance, given to the client only if nothing better comes */
  private held: { ctx: Ctx; result: WholeResult } | null = null;
  private lastDenial: string | null = null;

  constructor(
    private readonly host: RunAttempt,
    primary: Ctx,
    private readonly policy: HedgePolicyRevision | null,
  ) {
    this.attempts.push(primary);
  }

  private get deps() {
    return this.host.deps;
  }

  private get cmd(): DispatchCommandV1 {
    return this.attempts[0].cmd;
  }

  async run(): Promise<void> {
    const primary = this.attempts[0];
    this.start(primary);
    this.armHedge(primary);
    try {
      while (this.running.size > 0) {
        const next = await Promise.race([
          ...[...this.running.values()].map((r) => r.result.then((result) => ({ ctx: r.ctx, result }))),
          ...(this.hedgeDue ? [this.hedgeDue] : []),
        ]);
        if (next === 'hedge') {
          this.hedgeDue = null;
          await this.tryHedge();
          continue;
        }
        this.running.delete(next.ctx.attemptId);
        await this.ended(next.ctx, next.result);
      }
    } finally {
      this.clearHedge();
      for (const r of this.running.values()) r.ctx.abort.abort();
      await Promise.allSettled(this.records);
      // evidence writes still retrying after their deadline wait (the primary's is awaited by RunAttempt)
      await Promise.allSettled(this.attempts.slice(1).map((a) => a.evidence));
    }
  }

  /** One attempt came back: a winner, a loser, or a failure that may lead to the next attempt. */
  private async ended(ctx: Ctx, result: WholeResult): Promise<void> {
    this.observe(ctx, result);
    // the timer hedges a slow primary: once the primary has ended, a retry or fallback follows instead
    if (ctx === this.attempts[0]) this.clearHedge();
    if (this.winner !== null || this.replied) {
      this.background(ctx, result, false, false);
      return;
    }
    if (result.kind === 'answer' && result.valid) {
      const won = await this.chooseWinner(ctx);
      if (!won) {
        // Another dispatcher's attempt of this action won (a redelivered command): nothing to reply.
        this.deps.log.warn({ action_id: ctx.cmd.action_id, attempt_id: ctx.attemptId }, 'answer lost the winner compare-and-set');
        this.replied = true;
        this.background(ctx, result, false, false);
        return;
      }
      this.winner = ctx;
      this.deps.metrics.winners.inc({ role: ctx.role });
      this.clearHedge();
      for (const r of this.running.values()) r.ctx.abort.abort();
      if (this.held) this.background(this.held.ctx, this.held.result, false, false);
      this.held = null;
      await this.host.recordWhole(ctx, result, this.report(ctx, { winner: true, final: true, finishes: true }));
      await this.answer(ctx, result);
      return;
    }
    if (this.running.size > 0) {
      // Another attempt is still running and may answer: this one is recorded now, or held when it
      // is an answer the client would get if nothing better comes.
      if (result.kind === 'answer') this.holdAnswer(ctx, result);
      else this.background(ctx, result, false, false);
      return;
    }
    const next = result.kind === 'answer' ? null : await this.nextAttempt(ctx, result);
    if (next) {
      this.background(ctx, result, false, false);
      this.start(next);
      return;
    }
    // The action ends here, without a valid answer: the best answer we have, else this failure.
    this.clearHedge();
    if (result.kind !== 'answer' && this.held) {
      this.background(ctx, result, false, false);
      const held = this.held;
      this.held = null;
      await this.host.recordWhole(held.ctx, held.result, this.report(held.ctx, { winner: false, final: true, finishes: true }));
      await this.answer(held.ctx, held.result);
      return;
    }
    if (result.kind === 'answer' && this.held) {
      this.background(this.held.ctx, this.held.result, false, false);
      this.held = null;
    }
    await this.host.recordWhole(ctx, result, this.report(ctx, { winner: false, final: true, finishes: true }));
    await this.answer(ctx, result);
  }

  /**
   * The compare-and-set on the action (`chooseWinner`; asking again as the winner answers won, so
   * a transient database error is retried). Every attempt of an action is started by this runner,
   * one step at a time, so when the database stays unreachable this runner's decision is the
   * winner: the answer goes out and the attempt's evidence write keeps retrying on its own.
   */
  private async chooseWinner(ctx: Ctx): Promise<boolean> {
    // Without a policy no extra attempt can be admitted and the primary's claim is unique, so this
    // answer is the only one: the completion statement records it as the winner (one statement
    // and one WAL sync fewer per action).
    if (this.policy === null) return true;
    for (let run = 1; ; run++) {
      try {
        const { won } = await this.deps.repo.chooseWinner({
          actionId: ctx.cmd.action_id,
          attemptId: ctx.attemptId,
          now: this.deps.clock.now(),
        });
        return won;
      } catch (err) {
        if (!isTransientDatabaseError(err) || run >= WINNER_TRIES) {
          this.deps.log.warn(
            { action_id: ctx.cmd.action_id, attempt_id: ctx.attemptId, error: (err as Error).message },
            'winner compare-and-set not recorded; this runner decides',
          );
          return true;
        }
        await new Promise((resolve) => setTimeout(resolve, 50 * run));
      }
    }
  }

  private holdAnswer(ctx: Ctx, result: WholeResult): void {
    if (this.held) this.background(this.held.ctx, this.held.result, false, false);
    this.held = { ctx, result };
  }

  private async answer(ctx: Ctx, result: WholeResult): Promise<void> {
    this.replied = true;
    const extras: ReplyExtras = {
      attempts_total: this.attempts.length,
      winner_role: this.winner ? this.winner.role : result.kind === 'answer' ? ctx.role : null,
      gateway_retried: this.gatewayRetried,
    };
    await this.host.replyWhole(ctx, result, extras);
  }

  /** Records an attempt that does not decide the action, without holding up the others. */
  private background(ctx: Ctx, result: WholeResult, winner: boolean, final: boolean): void {
    const write = this.host.recordWhole(ctx, result, this.report(ctx, { winner, final, finishes: false })).catch((err: Error) => {
      this.deps.log.error({ action_id: ctx.cmd.action_id, attempt_id: ctx.attemptId, error: err.message }, 'attempt not recorded');
    });
    this.records.push(write);
  }

  private report(ctx: Ctx, r: { winner: boolean; final: boolean; finishes: boolean }): AttemptReport {
    return {
      attemptsTotal: this.attempts.length,
      // a winner exists, or nothing else will start (the action is ending, or this attempt lost)
      actionFinal: r.final || this.winner !== null || this.replied,
      winner: r.winner,
      policyRevisionId: this.policy?.revisionId ?? null,
      finishesAction: r.finishes,
    };
  }

  private start(ctx: Ctx): void {
    ctx.startedAtMs = this.deps.clock.now().getTime();
    this.deps.health.started(ctx.cmd.route.route_id);
    this.running.set(ctx.attemptId, { ctx, result: this.host.callWhole(ctx) });
  }

  /** Feeds the route's facts: latency of answered primaries, failures, the overload bucket. */
  private observe(ctx: Ctx, result: WholeResult): void {
    const failed =
      result.kind === 'no_answer'
        ? result.cause !== 'cancelled'
        : result.kind === 'error_answer' && isProviderFailureStatus(result.statusCode);
    const outcome = result.kind === 'no_answer' && result.cause === 'cancelled' ? 'cancelled' : failed ? 'failure' : 'success';
    const latency = ctx.role === 'primary' && result.kind === 'answer' ? result.receivedAt.getTime() - ctx.startedAtMs : null;
    this.deps.health.ended(ctx.cmd.route.route_id, outcome, this.policy?.bucket ?? null, latency);
  }

  // ---- hedges ----

  private armHedge(primary: Ctx): void {
    const p = this.policy;
    if (!p || primary.holdMicrousd === null || primary.role !== 'primary') return;
    const cmd = primary.cmd;
    const why = hedgeIneligibility(p, {
      stream: cmd.stream,
      effectiveCandidates: cmd.effective_candidates,
      toolNames: requestToolNames(cmd.request, cmd.api_kind),
      readOnlyTools: p.readOnlyTools,
    });
    if (why !== null) {
      if (why !== 'hedging_disabled') this.deps.metrics.extraDenied.inc({ role: 'hedge', reason: why });
      return;
    }
    const delay = hedgeDelayMs(p.delay, this.deps.health.latencies(cmd.route.route_id));
    const leftMs = new Date(cmd.deadline).getTime() - this.deps.clock.now().getTime();
    // A timer that would fire with less than the useful remainder left never fires.
    if (delay > leftMs - p.stop.minUsefulRemainingMs) {
      this.deps.metrics.extraDenied.inc({ role: 'hedge', reason: 'deadline_too_short' });
      return;
    }
    this.hedgeDue = new Promise((resolve) => {
      this.hedgeTimer = setTimeout(() => resolve('hedge'), delay);
    });
  }

  private clearHedge(): void {
    if (this.hedgeTimer) clearTimeout(this.hedgeTimer);
    this.hedgeTimer = null;
    this.hedgeDue = null;
  }

  /** The timer fired: decide in memory first, then ask the serialised admission. */
  private async tryHedge(): Promise<void> {
    const p = this.policy;
    const primary = this.attempts[0];
    if (!p || primary.holdMicrousd === null) return;
    const now = this.deps.clock.now();
    const decision = decideHedge(p, {
      now,
      deadline: new Date(this.cmd.deadline),
      winnerChosen: this.winner !== null,
      actionTerminal: this.replied,
      route: this.deps.health.facts(primary.cmd.route.route_id, p.bucket),
      // the budget's headroom is known only under the action's lock: the admission checks the floor
      fundingHeadroomMicrousd: MAX_BUDGET_MICROUSD,
      attempts: this.exposures(),
      hedgeHoldMicrousd: primary.holdMicrousd,
    });
    if (!decision.fire) {
      this.denied('hedge', decision.reason);
      return;
    }
    const hedge = await this.admit('hedge', primary.cmd, primary.holdMicrousd);
    if (hedge) this.start(hedge);
  }

  // ---- retries and fallbacks ----

  /** After the last running attempt failed: a retry on its route, else the next fallback route. */
  private async nextAttempt(failed: Ctx, result: Exclude<WholeResult, { kind: 'answer' }>): Promise<Ctx | null> {
    const p = this.policy;
    if (!p || failed.holdMicrousd === null) return null;
    if (result.kind === 'error_answer' && result.contractFailure) return null;
    const failure: AttemptFailure =
      result.kind === 'error_answer'
        ? { kind: 'http', status: result.statusCode }
        : result.cause === 'timeout'
          ? { kind: 'timeout', firstByteReceived: result.firstByte }
          : result.cause === 'too_large'
            ? { kind: 'answer_too_large' }
            : { kind: 'connection_error' };
    const now = this.deps.clock.now();
    const remainingMs = new Date(this.cmd.deadline).getTime() - now.getTime();
    const transient = transientFailureOf(failure);
    if (transient === null || !p.retry.transient.includes(transient)) return null;
    const decision = retryDecision(p, failure, {
      attempts: this.exposures(),
      retryHoldMicrousd: failed.holdMicrousd,
      remainingMs,
      minUsefulRemainingMs: p.stop.minUsefulRemainingMs,
    });
    if (decision.retry) {
      // gRPC A6: a route whose bucket is at or below half gets no extra attempts, retries included
      if (!bucketAllowsExtraAttempts(this.deps.health.facts(failed.cmd.route.route_id, p.bucket).bucket, p.bucket)) {
        this.denied('retry', 'overload');
      } else {
        const retry = await this.admit('retry', failed.cmd, failed.holdMicrousd);
        if (retry) return retry;
      }
    } else {
      this.denied('retry', decision.reason);
      if (decision.reason === 'deadline_too_short' || decision.reason === 'attempt_allowance_spent') return null;
    }
    // A transient failure with no retry left or allowed: the next approved route, if any.
    const fallbacks = this.cmd.fallbacks ?? [];
    while (this.nextFallback < fallbacks.length) {
      const f = fallbacks[this.nextFallback++];
      const fcmd: DispatchCommandV1 = { ...this.cmd, route: f.route };
      const attempt = await this.admit('fallback', fcmd, BigInt(f.hold_microusd));
      if (attempt) return attempt;
      // the action's allowance is spent or it has ended: no further route can be funded either
      if (this.lastDenial !== null && STOPS_FALLBACKS.has(this.lastDenial)) return null;
    }
    return null;
  }

  /** `admitExtraAttempt`: the serialised check and the hold; null (recorded) when denied. */
  private async admit(role: ExtraAttemptRole, cmd: DispatchCommandV1, holdMicrousd: bigint): Promise<Ctx | null> {
    const p = this.policy as HedgePolicyRevision;
    const credential = this.deps.credentialFor(cmd);
    if (!credential.ok) {
      this.denied(role, 'credential_missing');
      return null;
    }
    const attemptId = this.deps.ids.next();
    const attemptNo = this.attempts.length + 1;
    const now = this.deps.clock.now();
    const res = await this.tryAdmit({
      actionId: cmd.action_id,
      attemptId,
      attemptNo,
      role,
      routeId: cmd.route.route_id,
      routeVersion: cmd.route.route_version,
      effectiveCandidates: cmd.effective_candidates,
      holdMicrousd,
      policyRevisionId: p.revisionId,
      // the route this attempt runs on prices it (a fallback's own route, not the primary's)
      priceRevisionId: cmd.route.price_revision_id,
      limits: {
        maxAttempts: p.allowance.maxAttempts,
        maxHedges: p.maxHedges,
        maxRetries: p.retry.maxRetries,
        maxExtraSpendMicrousd: p.allowance.maxExtraSpendMicrousd,
        spendFloorMicrousd: p.stop.spendFloorMicrousd,
        minUsefulRemainingMs: p.stop.minUsefulRemainingMs,
      },
      claimedBy: this.deps.config.instanceId,
      now,
      // an experiment allowance funds the extra attempt instead of the workload's budget (issue 10)
      allowance: allowanceFundingOf(p, now),
    });
    if (!res.ok) {
      this.denied(role, res.reason);
      return null;
    }
    if (role !== 'hedge') this.gatewayRetried = true;
    this.deps.metrics.extraAttempts.inc({ role });
    this.deps.metrics.extraHold.inc({ workload: cmd.workload_id, role }, Number(holdMicrousd));
    const ctx: Ctx = {
      cmd,
      attemptId,
      attemptNo,
      role,
      holdMicrousd,
      replyTo: this.attempts[0].replyTo,
      credential: credential.value,
      evidence: null,
      abort: new AbortController(),
      startedAtMs: now.getTime(),
    };
    this.attempts.push(ctx);
    return ctx;
  }

  /**
   * The serialised admission; a database error is a denial like any other (logged), so the attempts
   * already running, and the answer the client waits for, go on without the extra one.
   */
  private async tryAdmit(input: Parameters<RunAttempt['deps']['repo']['admitExtraAttempt']>[0]) {
    try {
      return await this.deps.repo.admitExtraAttempt(input);
    } catch (err) {
      this.deps.log.warn({ action_id: input.actionId, role: input.role, error: (err as Error).message }, 'extra attempt admission failed');
      return { ok: false as const, reason: 'admission_error' };
    }
  }

  private denied(role: ExtraAttemptRole, reason: ExtraAttemptDenial | string): void {
    this.lastDenial = reason;
    if (role !== 'hedge' && ALLOWANCE_SPENT.has(reason)) this.gatewayRetried = true;
    this.deps.metrics.extraDenied.inc({ role, reason });
    this.deps.log.info({ action_id: this.cmd.action_id, role, reason }, 'extra attempt not started');
  }

  private exposures(): AttemptExposure[] {
    return this.attempts.map((a) => ({
      role: a.role === 'probe' ? 'primary' : a.role,
      exposureMicrousd: a.holdMicrousd ?? 0n,
    }));
  }
}
