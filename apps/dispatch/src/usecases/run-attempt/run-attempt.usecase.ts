import { BeforeApplicationShutdown, Inject, Injectable, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { Dispatcher, request } from 'undici';
import { addressTo, AttemptCompletedV1, AttemptRole, DispatchCommandV1, DispatchReplyV1, ReplyAddress } from '@gateway/contracts';
import { DispatchRepository, ExperimentPauseRepository, HedgePolicyRepository } from '@gateway/db';
import { accept } from '@gateway/domain';
import { ContentCipher, KafkaBus, PermanentPublishError } from '@gateway/messaging';
import {
  adapterForCommand,
  AnswerTooLarge,
  NO_USAGE_DETAILS,
  ParsedResponse,
  readBounded,
  SseDecoder,
  UpstreamRequest,
} from '@gateway/providers';
import {
  awaitAtMost,
  Clock,
  CLOCK,
  IdGenerator,
  InjectConfig,
  InjectIds,
  InjectLogger,
  LogBurst,
  ServiceConfig,
  UPSTREAM_ANSWER_MAX_BYTES_DEFAULT,
  UPSTREAM_READ_AFTER_DEADLINE_DEFAULT_MS,
} from '@gateway/service-kit';
import { AttemptStatus, buildAttemptEvent, deliveryOf, shortfallOf } from './attempt-report';
import type { AttemptStore, CredentialSource, ReplyPublisher, ReplySealer } from './ports';
import { RelayStops } from './relay-stops';
import { AttemptEndedFirst, EVIDENCE_RETRY, recordEvidence } from './record-evidence';
import { DispatchMetrics } from '../../dispatch.metrics';
import { HedgePolicies, HedgePolicySource, PauseSource, RunsUnder } from '../../hedging/hedge-policies';
import { PauseEvaluator, PauseStore } from '../../hedging/pause-evaluator';
import { RouteHealth } from '../../hedging/route-health';
import { UPSTREAM, UPSTREAM_CREDENTIALS } from '../../tokens';
import { ActionRunner, AttemptReport, Ctx, SINGLE_ATTEMPT, WholeResult } from './action-runner';

/** How long one log line stands for the late commands refused after it (LogBurst). */
export const REFUSAL_LOG_WINDOW_MS = 10_000;

/** A provider's error answer is its own evidence that nothing was generated or billed. */
const PROVIDER_ERROR_EVIDENCE: ParsedResponse = {
  providerRequestId: null,
  candidates: [],
  promptBlockReason: null,
  usage: { ...NO_USAGE_DETAILS, inputTokens: 0, outputTokensTotal: 0, unknownFields: [] },
  serviceTier: null,
  featureCalls: {},
};

/**
 * Runs the primary attempt of one admitted action: single-use claim, upstream call with the
 * contract's candidate and cap fields, acceptance, the sanitised attempt event (outbox), then the
 * encrypted reply. Usage evidence is recorded before the application is answered, unless the
 * write is still being retried when the action's deadline comes: then the reply goes out and the
 * write goes on (docs/decisions.md, "Attempt evidence is retried until it lands").
 */
@Injectable()
export class RunAttempt implements BeforeApplicationShutdown {
  private readonly stopping = new AbortController();
  /** backoff of the evidence write; tests shorten it */
  evidenceRetry = EVIDENCE_RETRY;
  private readonly policies: HedgePolicies;
  /** the experiment pause rule, applied after each holdout primary (null: no pause store) */
  private readonly pauseEvaluator: PauseEvaluator | null;
  /** per-route facts of this instance's own traffic (hedge delay quantile, error rate, in-flight, bucket) */
  readonly health = new RouteHealth();
  /**
   * Commands refused for lateness come by the thousand after an outage (a replay): one line per
   * window for each kind, every one counted in `gateway_dispatch_refused_total`.
   */
  private readonly refusalLogs: { expired: LogBurst; lateClaim: LogBurst };
  /** how much of one provider answer is read (a whole body, or one stream event) */
  private readonly answerMaxBytes: number;
  /** how long past the action's deadline an answer is still read for its usage */
  private readonly readAfterDeadlineMs: number;

  constructor(
    @Inject(DispatchRepository) private readonly repo: AttemptStore,
    @Inject(KafkaBus) private readonly bus: ReplyPublisher,
    @Inject(ContentCipher) private readonly cipher: ReplySealer,
    private readonly metrics: DispatchMetrics,
    @Inject(UPSTREAM) private readonly upstream: Dispatcher,
    @InjectConfig() private readonly config: ServiceConfig,
    @InjectLogger() private readonly log: Logger,
    @Inject(CLOCK) private readonly clock: Clock,
    @InjectIds() private readonly ids: IdGenerator,
    @Inject(UPSTREAM_CREDENTIALS) private readonly credentials: CredentialSource,
    @Inject(HedgePolicyRepository) hedgePolicies: HedgePolicySource,
    @Optional() @Inject(ExperimentPauseRepository) pauses: (PauseSource & PauseStore) | null = null,
    @Optional() @Inject(RelayStops) private readonly relayStops: RelayStops = new RelayStops(),
  ) {
    this.policies = new HedgePolicies(hedgePolicies, undefined, pauses);
    this.answerMaxBytes = config.upstreamAnswerMaxBytes ?? UPSTREAM_ANSWER_MAX_BYTES_DEFAULT;
    this.readAfterDeadlineMs = config.upstreamReadAfterDeadlineMs ?? UPSTREAM_READ_AFTER_DEADLINE_DEFAULT_MS;
    const burst = (msg: string) =>
      new LogBurst(
        (fields, m) => this.log.warn(fields, m),
        msg,
        REFUSAL_LOG_WINDOW_MS,
        () => this.clock.now().getTime(),
      );
    this.refusalLogs = {
      expired: burst('refusing expired dispatch command'),
      lateClaim: burst('claimed after the deadline; nothing sent upstream'),
    };
    this.pauseEvaluator = pauses
      ? new PauseEvaluator(pauses, {
          now: () => this.clock.now(),
          newId: () => this.ids.next(),
          log: this.log,
          onState: (experimentId, pauseId, nowMs) => this.policies.notePause(experimentId, pauseId, nowMs),
        })
      : null;
  }

  /**
   * Resolves once the claim is durable (so the command's offset may be committed); `done`
   * settles when the attempt has been recorded and answered.
   */
  async execute(cmd: DispatchCommandV1, address: ReplyAddress): Promise<{ done: Promise<void> }> {
    const now = this.clock.now();
    const replyTo: ReplyAddress = { ...address, receivedAtMs: now.getTime() };
    if (new Date(cmd.dispatch_deadline) <= now) {
      this.metrics.refused.inc({ reason: 'expired' });
      this.refusalLogs.expired.note({ action_id: cmd.action_id });
      return { done: Promise.resolve() };
    }
    const credential = this.credentialFor(cmd);
    if (!credential.ok) {
      // Nothing is claimed and nothing is sent: like an expired command, the reservation is
      // provably undispatched and is voided after its dispatch deadline. The client hears why now.
      this.metrics.refused.inc({ reason: 'credential_missing' });
      this.log.error(
        { action_id: cmd.action_id, route_id: cmd.route.route_id, credential_ref: cmd.route.credential_ref, problem: credential.reason },
        'upstream credential cannot be resolved; nothing sent',
      );
      const done = this.publishReply(cmd, replyTo, {
        kind: 'error',
        http_status: 502,
        code: 'upstream_credential_missing',
        message: `route ${cmd.route.model_alias} names upstream credential ${cmd.route.credential_ref}, which the gateway has no usable value for; nothing was sent to the provider and nothing is billed; an operator must configure the credential`,
        attempt_id: null,
        provider_request_id: null,
        requested_candidates: cmd.requested_candidates,
        effective_candidates: cmd.effective_candidates,
        returned_candidates: null,
        candidates: [],
      }).catch((err: Error) => this.log.error({ action_id: cmd.action_id, error: err.message }, 'refusal reply not published'));
      return { done };
    }
    // Probes and streams run one attempt (streams are never hedged; a retry after a stream's first
    // chunk would pay twice); everything else runs under the hedge policy in force, if any, unless
    // its experiment is paused (issue 11).
    const { policy, pauseId }: RunsUnder =
      cmd.stream || cmd.attempt_role === 'probe' ? { policy: null, pauseId: null } : await this.policies.runsUnder(cmd, now.getTime());
    const attemptId = this.ids.next();
    const holdMicrousd = cmd.hold_microusd === undefined ? null : BigInt(cmd.hold_microusd);
    const claim = await this.repo.claim({
      actionId: cmd.action_id,
      attemptId,
      attemptNo: 1,
      role: cmd.attempt_role ?? 'primary',
      routeId: cmd.route.route_id,
      routeVersion: cmd.route.route_version,
      effectiveCandidates: cmd.effective_candidates,
      holdMicrousd,
      policyRevisionId: policy?.revisionId ?? null,
      experimentPauseId: pauseId,
      claimedBy: this.config.instanceId,
      now,
    });
    if (!claim.ok) {
      this.metrics.refused.inc({ reason: claim.reason });
      this.log.info({ action_id: cmd.action_id, reason: claim.reason }, 'dispatch claim refused');
      return { done: Promise.resolve() };
    }
    const ctx: Ctx = {
      cmd,
      attemptId,
      attemptNo: 1,
      role: cmd.attempt_role ?? 'primary',
      holdMicrousd,
      replyTo,
      credential: credential.value,
      evidence: null,
      abort: new AbortController(),
      startedAtMs: now.getTime(),
    };
    const run = async () => {
      if (this.clock.now().getTime() >= new Date(cmd.deadline).getTime()) return this.deadlinePassedAtClaim(ctx);
      try {
        if (cmd.stream) await this.runStream(ctx);
        else await new ActionRunner(this, ctx, policy).run();
      } finally {
        // A write still retrying after the reply: the process waits for it on shutdown.
        await ctx.evidence;
      }
      // the holdout's primary is recorded: the experiment's pause window has a new action
      if (cmd.experiment?.cohort === 'holdout' && this.pauseEvaluator) await this.pauseEvaluator.afterHoldout(cmd.experiment.id);
    };
    const done = run().catch((err) => {
      // the orphan sweep ended it first, and its evidence went to the orphan case (recordEvidence)
      if (err instanceof AttemptEndedFirst) return;
      // The attempt stays in flight without evidence; reconciliation picks it up after its deadline.
      this.log.error(
        { action_id: cmd.action_id, attempt_id: attemptId, error: (err as Error).message },
        'attempt failed before it was recorded',
      );
    });
    return { done };
  }

  /**
   * One whole (non-stream) upstream call of one attempt, bounded by what is left of the action's
   * deadline and by `ctx.abort` (a loser is aborted when another attempt wins). Records nothing:
   * the action runner decides what this answer means for the action, then `recordWhole` and
   * `replyWhole` write it.
   */
  async callWhole(ctx: Ctx): Promise<WholeResult> {
    const { cmd } = ctx;
    const adapter = adapterForCommand(cmd);
    const req = withIdempotency(adapter.buildRequest(cmd, ctx.credential), ctx);
    const timeoutMs = Math.max(1, new Date(cmd.deadline).getTime() - this.clock.now().getTime());
    let statusCode: number;
    let headers: Record<string, string | string[] | undefined>;
    let body: unknown;
    let firstByte = false;
    const exchange = this.exchangeBound(ctx, timeoutMs);
    try {
      const res = await this.send(req, ctx, exchange.signal, timeoutMs);
      firstByte = true;
      statusCode = res.statusCode;
      headers = res.headers;
      if (res.statusCode >= 400) {
        body = safeParse(await readErrorBody(res.body));
      } else {
        body = safeParse(await readBounded(res.body, this.answerMaxBytes));
      }
    } catch (err) {
      const receivedAt = this.clock.now();
      if (ctx.abort.signal.aborted) return { kind: 'no_answer', cause: 'cancelled', firstByte, receivedAt };
      if (err instanceof AnswerTooLarge) {
        this.log.warn(
          { action_id: cmd.action_id, attempt_id: ctx.attemptId, route_id: cmd.route.route_id, limit_bytes: err.limitBytes },
          'upstream answer larger than the gateway reads; stopped reading, usage unread',
        );
        return { kind: 'no_answer', cause: 'too_large', firstByte, receivedAt };
      }
      // No response: the provider may still have billed it. Usage is unknown, never zero.
      const timedOut = /timeout/i.test(String((err as Error).message ?? err));
      return { kind: 'no_answer', cause: timedOut ? 'timeout' : 'connection_error', firstByte, receivedAt };
    } finally {
      exchange.end();
    }
    const receivedAt = this.clock.now();
    this.metrics.upstream.inc({ route: cmd.route.route_id, status: String(statusCode) });
    if (statusCode >= 400) {
      const code = adapter.errorCode(body);
      const contractFailure = statusCode === 400 && cmd.effective_candidates > 1 && /INVALID_ARGUMENT|invalid_value/i.test(code ?? '');
      if (contractFailure) this.metrics.contractFailures.inc({ route: cmd.route.route_id, kind: 'multi_candidate_refused' });
      return { kind: 'error_answer', statusCode, code, contractFailure, receivedAt };
    }
    const parsed = adapter.parseResponse(body, headers);
    const verdict = accept(
      { providerKind: cmd.route.provider_kind, candidates: parsed.candidates, promptBlockReason: parsed.promptBlockReason },
      {
        allowLength: cmd.acceptance.allow_length,
        allowContentFilter: cmd.acceptance.allow_content_filter,
        receivedAt,
        deadline: new Date(cmd.deadline),
      },
    );
    this.metrics.acceptance.inc({ reason: verdict.reason });
    return { kind: 'answer', statusCode, body, parsed, valid: verdict.valid, verdictReason: verdict.reason, receivedAt };
  }

  /** Records one whole attempt's outcome (see `finish`). */
  recordWhole(ctx: Ctx, r: WholeResult, report: AttemptReport): Promise<void> {
    const { cmd } = ctx;
    switch (r.kind) {
      case 'no_answer':
        if (r.cause === 'cancelled') {
          // Aborted by the gateway (another attempt won): what it cost is unknown, never zero;
          // settlement keeps its hold as exposure until evidence resolves it.
          return this.finish(ctx, 'cancelled', 'cancelled: another attempt answered first', null, null, null, report);
        }
        return this.finish(
          ctx,
          'usage_missing',
          r.cause === 'timeout'
            ? 'upstream timed out before answering'
            : r.cause === 'too_large'
              ? 'upstream answer larger than UPSTREAM_ANSWER_MAX_BYTES: not read, usage unknown'
              : 'upstream connection failed',
          null,
          null,
          null,
          report,
        );
      case 'error_answer':
        // An error answer is the provider's own evidence that nothing was generated.
        return this.finish(
          ctx,
          'failed',
          r.contractFailure
            ? `contract failure: provider refused ${cmd.effective_candidates} candidates (${r.code})`
            : `provider answered ${r.statusCode}${r.code ? ` ${r.code}` : ''}`,
          r.statusCode,
          PROVIDER_ERROR_EVIDENCE,
          'provider_response',
          report,
        );
      case 'answer':
        return this.finish(
          ctx,
          r.parsed.usage ? 'succeeded' : 'usage_missing',
          r.parsed.usage ? `answered (${r.verdictReason})` : 'response carried no aggregate usage',
          r.statusCode,
          r.parsed,
          'provider_response',
          report,
        );
    }
  }

  /** The client's one answer for the action, from the attempt whose result it is. */
  replyWhole(ctx: Ctx, r: WholeResult, action: ReplyExtras): Promise<void> {
    switch (r.kind) {
      case 'no_answer': {
        const timedOut = r.cause === 'timeout';
        return this.reply(ctx, {
          kind: 'error',
          http_status: timedOut ? 504 : 502,
          // (admission tells the SDK not to retry an answer too large: it would be as large, and paid, again)
          code: timedOut ? 'deadline_exceeded' : r.cause === 'too_large' ? 'upstream_answer_too_large' : 'upstream_error',
          message: timedOut
            ? 'no answer before the deadline'
            : r.cause === 'too_large'
              ? `the provider's answer is larger than the gateway reads (${this.answerMaxBytes} bytes)`
              : 'the provider could not be reached',
          ...this.counts(ctx, null),
          ...action,
        });
      }
      case 'error_answer':
        return this.reply(ctx, {
          kind: 'error',
          http_status: 502,
          code: r.contractFailure ? 'upstream_contract_failure' : 'upstream_error',
          message: r.contractFailure
            ? `the route refused ${ctx.cmd.effective_candidates} candidates (${r.code}); not retried`
            : `provider error ${r.statusCode}${r.code ? ` (${r.code})` : ''}`,
          upstream_http_status: r.statusCode,
          ...this.counts(ctx, null),
          ...action,
        });
      case 'answer':
        return this.reply(ctx, { kind: 'response', http_status: r.statusCode, body: r.body, ...this.counts(ctx, r.parsed), ...action });
    }
  }

  /** The runner's view of this use case's collaborators (one instance per process). */
  get deps() {
    return {
      repo: this.repo,
      metrics: this.metrics,
      config: this.config,
      log: this.log,
      clock: this.clock,
      ids: this.ids,
      health: this.health,
      credentialFor: (cmd: DispatchCommandV1) => this.credentialFor(cmd),
    };
  }

  private async runStream(ctx: Ctx): Promise<void> {
    const { cmd } = ctx;
    const adapter = adapterForCommand(cmd);
    const req = adapter.buildRequest(cmd, ctx.credential);
    const timeoutMs = Math.max(1, new Date(cmd.deadline).getTime() - this.clock.now().getTime());
    let seq = 0;
    let statusCode = 0;
    let acc: ReturnType<typeof adapter.streamAccumulator> | null = null;
    const exchange = this.exchangeBound(ctx, timeoutMs);
    try {
      const res = await this.send(req, ctx, exchange.signal, timeoutMs);
      statusCode = res.statusCode;
      this.metrics.upstream.inc({ route: cmd.route.route_id, status: String(statusCode) });
      if (statusCode >= 400) {
        const body = safeParse(await readErrorBody(res.body));
        const code = adapter.errorCode(body);
        const parsed = PROVIDER_ERROR_EVIDENCE;
        await this.finish(
          ctx,
          'failed',
          `provider answered ${statusCode}${code ? ` ${code}` : ''}`,
          statusCode,
          parsed,
          'stream_final_chunk',
          SINGLE_ATTEMPT,
        );
        await this.reply(ctx, {
          kind: 'error',
          http_status: 502,
          code: 'upstream_error',
          message: `provider error ${statusCode}${code ? ` (${code})` : ''}`,
          upstream_http_status: statusCode,
          ...this.counts(ctx, null),
        });
        return;
      }
      const events = adapter.streamAccumulator(res.headers);
      acc = events;
      // One decoder for the whole body: a character or a line ending split across two network
      // reads is joined, never decoded piece by piece.
      const sse = new SseDecoder(this.answerMaxBytes);
      const relay = async (payloads: string[]) => {
        for (const data of payloads) {
          if (!events.push(data)) continue;
          if (this.clientGone(ctx)) {
            this.metrics.chunksWithheld.inc(); // read for its usage, relayed to nobody
            continue;
          }
          const forwarded = this.forClient(cmd, data);
          if (forwarded !== null) await this.reply(ctx, { kind: 'stream_chunk', seq: seq++, data: forwarded });
        }
      };
      for await (const piece of res.body) await relay(sse.push(piece));
      await relay(sse.end());
    } catch (err) {
      this.log.warn(
        { action_id: cmd.action_id, error: (err as Error).name, ...(err instanceof AnswerTooLarge ? { limit_bytes: err.limitBytes } : {}) },
        err instanceof AnswerTooLarge
          ? 'upstream stream event larger than the gateway reads; stopped reading'
          : 'upstream stream ended abnormally',
      );
    } finally {
      exchange.end();
    }
    const gone = this.clientGone(ctx);
    this.relayStops.forget(cmd.action_id);
    const parsed = acc?.result() ?? null;
    const complete = parsed?.usage != null;
    ctx.streamFinished = acc?.finished ?? false;
    await this.finish(
      ctx,
      complete ? 'succeeded' : 'usage_missing',
      complete ? 'stream finished with usage' : 'stream ended before its usage chunk',
      statusCode || null,
      parsed,
      'stream_final_chunk',
      SINGLE_ATTEMPT,
    );
    if (gone) return;
    await this.reply(ctx, {
      kind: 'stream_end',
      seq,
      // Whether the client got the provider's whole stream (its end marker or final chunk); the
      // usage chunk is a billing matter and is judged above, not here.
      complete: ctx.streamFinished,
      ...this.counts(ctx, parsed),
    });
  }

  /**
   * Whether admission said the stream's client is gone (`RelayStops`): nobody would read what is
   * relayed after that. Counted once per stream, the first time it is seen.
   */
  private clientGone(ctx: Ctx): boolean {
    if (ctx.relayStopped) return true;
    if (!this.relayStops.stopped(ctx.cmd.action_id, this.clock.now().getTime())) return false;
    ctx.relayStopped = true;
    this.metrics.relayStops.inc();
    return true;
  }

  /**
   * The claim outlasted the action's deadline (a database that stalled, a long lock wait): the
   * claim checks the dispatch deadline against the time the command was taken, and admission has
   * answered the client 504 by now. A call made now would be paid for with nobody to answer, so
   * nothing is sent. The attempt ends without usage, as one that timed out: its hold stays exposure
   * (a reconciliation case) until the provider's usage export shows nothing was billed.
   */
  private async deadlinePassedAtClaim(ctx: Ctx): Promise<void> {
    this.metrics.refused.inc({ reason: 'deadline_passed_at_claim' });
    this.refusalLogs.lateClaim.note({ action_id: ctx.cmd.action_id, attempt_id: ctx.attemptId });
    try {
      await this.finish(
        ctx,
        'usage_missing',
        'not sent: the deadline passed while the claim was written',
        null,
        null,
        null,
        SINGLE_ATTEMPT,
      );
      await this.reply(ctx, {
        kind: 'error',
        http_status: 504,
        code: 'deadline_exceeded',
        message: 'no answer before the deadline',
        ...this.counts(ctx, null),
      });
    } finally {
      await ctx.evidence;
    }
  }

  /** The key the route's contract names (none when it names none), from `UpstreamCredentials`. */
  credentialFor(cmd: DispatchCommandV1): { ok: true; value: string | null } | { ok: false; reason: string } {
    const ref = cmd.route.credential_ref;
    if (ref === undefined || ref === null) return { ok: true, value: null };
    return this.credentials.lookup(ref);
  }

  /** One upstream call, bounded by what is left of the action's deadline. */
  /**
   * Every upstream request carries its attempt id as `x-client-request-id` (OpenAI documents the
   * header and echoes it; Gemini ignores it). A provider's usage export can then name an attempt
   * that never got a response (an aborted hedge loser, a cut connection), which has no provider
   * request id the gateway could know; the usage-export import matches those lines by it.
   */
  private send(req: UpstreamRequest, ctx: Ctx, signal: AbortSignal, timeoutMs: number) {
    return request(req.url, {
      method: 'POST',
      headers: { ...req.headers, [CLIENT_REQUEST_ID_HEADER]: ctx.attemptId },
      body: JSON.stringify(req.body),
      dispatcher: this.upstream,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal,
    });
  }

  /**
   * The signal one upstream exchange runs under, to `end()` once it is read. undici's limits run
   * between bytes, so an upstream that trickles a byte at a time would keep the exchange open for
   * ever: the whole of it is aborted `readAfterDeadlineMs` past the action's deadline (a timeout:
   * usage unknown, its exposure held), the answer read till then for its usage although its
   * client has had the deadline's 504. The attempt's own abort (another attempt won) passes
   * through. One timer, cleared at the end (`AbortSignal.timeout` would keep ~350 bytes per call
   * alive until it fires).
   */
  private exchangeBound(ctx: Ctx, timeoutMs: number): { signal: AbortSignal; end: () => void } {
    const totalMs = timeoutMs + this.readAfterDeadlineMs;
    const bound = new AbortController();
    const attempt = ctx.abort.signal;
    const onAbort = () => bound.abort(attempt.reason);
    if (attempt.aborted) onAbort();
    else attempt.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => bound.abort(new UpstreamExchangeTimeout(totalMs)), totalMs);
    return {
      signal: bound.signal,
      end: () => {
        clearTimeout(timer);
        attempt.removeEventListener('abort', onAbort);
      },
    };
  }

  /** The usage chunk is forwarded only when the client asked for it (we always ask upstream). */
  private forClient(cmd: DispatchCommandV1, data: string): string | null {
    if (cmd.api_kind !== 'openai-chat' || cmd.include_usage_for_client) return data;
    const chunk = safeParse(data) as Record<string, unknown> | null;
    if (!chunk || typeof chunk !== 'object') return data;
    if (Array.isArray(chunk.choices) && chunk.choices.length === 0 && chunk.usage) return null;
    if ('usage' in chunk) {
      const { usage: _usage, ...rest } = chunk;
      return JSON.stringify(rest);
    }
    return data;
  }

  /** Writes still being retried get one last try, then give up with an error log. */
  beforeApplicationShutdown(): void {
    this.stopping.abort();
    this.refusalLogs.expired.flush();
    this.refusalLogs.lateClaim.flush();
  }

  /**
   * Records the attempt's outcome, retrying until it lands (`recordEvidence`). Waits for it at
   * most until the action's deadline, after which admission has answered the client anyway; the
   * write goes on in `ctx.evidence` and `done` waits for it.
   */
  async finish(
    ctx: Ctx,
    status: AttemptStatus,
    reason: string,
    httpStatus: number | null,
    parsed: ParsedResponse | null,
    source: 'provider_response' | 'stream_final_chunk' | null,
    report: AttemptReport,
  ): Promise<void> {
    const { cmd, attemptId } = ctx;
    const now = this.clock.now();
    const event: AttemptCompletedV1 = {
      ...buildAttemptEvent({
        eventId: this.ids.next(),
        cmd,
        attemptId,
        attemptNo: ctx.attemptNo,
        role: ctx.role,
        status,
        httpStatus,
        parsed,
        usageSource: source,
        now,
        attemptsTotal: report.attemptsTotal,
        actionFinal: report.actionFinal,
      }),
      winner: report.winner,
      deadline_outcome:
        status === 'cancelled'
          ? 'cancelled'
          : httpStatus === null
            ? null
            : now.getTime() < new Date(cmd.deadline).getTime()
              ? 'on_time'
              : 'late',
      policy_revision_id: report.policyRevisionId,
      ...(cmd.experiment ? { cohort: cmd.experiment.cohort } : {}),
    };
    if (parsed && cmd.effective_candidates > 0) {
      const s = shortfallOf(cmd, parsed);
      if (s.unexplainedShortfall) this.metrics.contractFailures.inc({ route: cmd.route.route_id, kind: 'silent_shortfall' });
      if (s.excess) this.metrics.contractFailures.inc({ route: cmd.route.route_id, kind: 'excess_candidates' });
    }
    const delivery = deliveryOf({ cmd, httpStatus, parsed, receivedAt: now, streamFinished: ctx.streamFinished ?? null });
    const evidence = recordEvidence(
      this.repo,
      {
        attemptId,
        actionId: cmd.action_id,
        status,
        statusReason: reason,
        providerRequestId: parsed?.providerRequestId ?? null,
        httpStatus,
        returnedCandidates: event.returned_candidate_count,
        candidateOutcomes: event.candidates,
        promptBlockReason: parsed?.promptBlockReason ?? null,
        usage: parsed?.usage ?? null,
        usageSource: parsed?.usage ? source : null,
        now,
        event,
        delivery,
        // Only the attempt that decides the action ends it (the winner, or the last failure).
        finishAction: report.finishesAction
          ? {
              // Delivery and money are separate: the action is answered when the user got an answer,
              // with or without usage (missing usage is settlement's case, not a failed delivery).
              status: delivery.outcome === 'answered' || delivery.outcome === 'refused' ? 'answered' : 'failed',
              reason,
              returnedCandidates: event.returned_candidate_count,
              workloadId: cmd.workload_id,
            }
          : null,
      },
      { ...this.evidenceRetry, stopping: this.stopping.signal },
      this.log,
    );
    ctx.evidence = evidence;
    await awaitAtMost(evidence, new Date(cmd.deadline).getTime() - this.clock.now().getTime());
  }

  private counts(ctx: Ctx, parsed: ParsedResponse | null) {
    const s = parsed ? shortfallOf(ctx.cmd, parsed) : null;
    return {
      attempt_id: ctx.attemptId,
      provider_request_id: parsed?.providerRequestId ?? null,
      requested_candidates: ctx.cmd.requested_candidates,
      effective_candidates: ctx.cmd.effective_candidates,
      returned_candidates: s ? s.returnedWithContent : null,
      candidates: s?.perCandidate ?? [],
    };
  }

  /** To the sender's own partition of the reply topic it named, so no other instance reads it. */
  private publishReply(cmd: DispatchCommandV1, replyTo: ReplyAddress, reply: DispatchReplyV1): Promise<void> {
    return this.bus.publish(replyTo.topic, [
      {
        key: cmd.action_id,
        value: {
          event_id: this.ids.next(),
          action_id: cmd.action_id,
          reply_to: replyTo.instanceId,
          ...(replyTo.receivedAtMs === undefined ? {} : { held_ms: Math.max(0, this.clock.now().getTime() - replyTo.receivedAtMs) }),
          body: this.cipher.encrypt(reply, cmd.action_id),
        },
        ...addressTo(replyTo.topic, replyTo.instanceId),
      },
    ]);
  }

  async reply(ctx: Ctx, reply: DispatchReplyV1): Promise<void> {
    try {
      await this.publishReply(ctx.cmd, ctx.replyTo, reply);
    } catch (err) {
      // An answer larger than one Kafka message (many candidates × a high cap), or nested too deep
      // to be serialised again (JSON.parse takes depths JSON.stringify refuses), cannot travel back.
      // Its usage is already recorded and billed; the client gets a clear 502 instead of a timeout.
      const why = err instanceof PermanentPublishError ? err.refusal : err instanceof RangeError ? 'nested too deep to serialise' : null;
      if (why === null || reply.kind !== 'response') throw err;
      this.log.error(
        { action_id: ctx.cmd.action_id, attempt_id: ctx.attemptId, refusal: why },
        'answer cannot travel on the reply topic; answering 502',
      );
      const { kind: _kind, http_status: _status, body: _body, ...counts } = reply;
      await this.reply(ctx, {
        ...counts,
        kind: 'error',
        http_status: 502,
        code: 'upstream_error',
        message: `the provider's answer cannot be carried back (${why}); it was recorded and billed`,
      });
    }
  }
}

/** The whole exchange with the upstream outlasted the action's deadline + UPSTREAM_READ_AFTER_DEADLINE_MS. */
class UpstreamExchangeTimeout extends Error {
  constructor(ms: number) {
    super(`upstream exchange timeout: not over ${ms} ms after it began`);
    this.name = 'UpstreamExchangeTimeout';
  }
}

/** An error answer is read for its code only: its first 64 KiB (more reads as no code). */
const ERROR_BODY_MAX_BYTES = 64 * 1024;

function readErrorBody(body: AsyncIterable<Uint8Array>): Promise<string> {
  return readBounded(body, ERROR_BODY_MAX_BYTES).catch((err: unknown) => {
    if (err instanceof AnswerTooLarge) return '';
    throw err;
  });
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** The action-level fields of the client's reply (`DispatchReplyV1`). */
export type ReplyExtras = { attempts_total: number; winner_role: AttemptRole | null; gateway_retried: boolean };

/**
 * The route contract's upstream idempotency header, when it names one: the primary and its retries
 * send the action id in it, so a provider that saw the first try answers the retry from it. A hedge
 * never carries it (a duplicate the provider deduplicated would not be a hedge).
 */
/** The header that carries the attempt id upstream (see `send`). */
export const CLIENT_REQUEST_ID_HEADER = 'x-client-request-id';

function withIdempotency(req: UpstreamRequest, ctx: Ctx): UpstreamRequest {
  const header = ctx.cmd.route.idempotency_header;
  if (!header || ctx.role === 'hedge' || ctx.role === 'probe') return req;
  return { ...req, headers: { ...req.headers, [header]: ctx.cmd.action_id } };
}
