import { applyDecorators, Inject, Injectable } from '@nestjs/common';
import { ApiHeader, ApiResponse } from '@nestjs/swagger';
import type { Request } from 'express';
import type { Logger } from 'pino';
import { DispatchReplyV1 } from '@gateway/contracts';
import { DenialCode, DomainError } from '@gateway/domain';
import {
  ADMISSION_DECIDE_TIMEOUT_DEFAULT_MS,
  denialBody,
  DenialTarget,
  INPUT_LIMITS,
  InjectConfig,
  InjectLogger,
  ServiceConfig,
  toDomainError,
  writeDenial,
} from '@gateway/service-kit';
import { AdmitRequestCommand } from '../usecases/admit-request/admit-request.command';
import { AdmitRequest, AdmittedAction, IdempotentReplay } from '../usecases/admit-request/admit-request.usecase';
import type { VoidOutcome } from '@gateway/db';
import { AdmissionMetrics } from '../admission.metrics';
import { Reply, ReplyCache } from './reply-cache';
import { BackloggedStream, StreamBacklogs } from './stream-backlogs';
import { LoadShedding } from './load-shedding';

/**
 * What the responder needs of admission: admit the request, then dispatch it and hear the replies,
 * or withdraw it when it will not wait for them.
 */
export type Admission = Pick<AdmitRequest, 'execute' | 'dispatch' | 'withdraw' | 'stopRelay'>;

/** What withdrawing an action found; `unknown`: it failed, or did not answer within the decide limit. */
type Withdrawal = VoidOutcome | 'unknown';

/** What the responder writes to (an Express Response is one). */
export interface HttpAnswer extends DenialTarget {
  readonly headersSent: boolean;
  /** bytes written but not yet taken by the client's connection (Node's userland buffer) */
  readonly writableLength: number;
  /** true once the client's connection is gone (or admission closed it) */
  readonly destroyed: boolean;
  write(chunk: string): boolean;
  end(chunk?: string): unknown;
  flushHeaders(): void;
  destroy(): unknown;
  on(event: 'close', listener: () => void): unknown;
  /** the client's connection (load shedding remembers a connection it refused; absent in tests) */
  readonly socket?: object | null;
}

/**
 * How much of a stream may wait in admission for its client, in bytes: what the connection has
 * not taken yet plus chunks held back for one that has not arrived. Replies cannot be paused
 * (dispatch relays the provider's stream as it comes), so a client that stops reading would
 * otherwise keep the rest of a long answer in admission's heap; past this its connection is
 * closed (dispatch still reads the stream to its end, and the attempt settles as ever).
 */
export const STREAM_CLIENT_BACKLOG_MAX_BYTES = 8 * 1024 * 1024;

/** The optional Idempotency-Key every generation endpoint reads (OpenAPI). */
export const IdempotencyKeyHeader = () =>
  ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description:
      "1–255 printable characters. The same key and body again: the first action's answer (x-gateway-idempotent-replay: true), never a second dispatch; a retry while the first still runs waits for it. A first request that never reached a provider (a 502 saying nothing was sent) released its key: the retry is admitted as a new action.",
  });

/**
 * The answers every generation endpoint can give besides its own (OpenAPI): the gateway's state,
 * not the request, decides these, and they carry the same `error.code` on every dialect.
 */
export const GenerationFailureResponses = () =>
  applyDecorators(
    ApiResponse({ status: 403, description: 'budget_exhausted: the reservation would exceed a budget (x-should-retry: false)' }),
    ApiResponse({
      status: 409,
      description:
        "Idempotency-Key: idempotency_key_reused (another body, or a first result this instance does not hold: expired, given by another instance, or streamed; x-should-retry: false) | idempotency_key_in_progress (the first request still runs where this retry cannot wait for it; Retry-After). A retry while the first runs on the same instance waits for the first's answer; a first request that never reached a provider released its key",
    }),
    ApiResponse({
      status: 429,
      description: 'token_quota_exceeded | concurrency_limit_exceeded | fanout_limit_exceeded | authentication_rate_limited (Retry-After)',
    }),
    ApiResponse({
      status: 502,
      description:
        'upstream_error | upstream_credential_missing; x-should-retry: false when a retry could pay twice: the request may still run (its dispatch command could not be confirmed sent and a dispatcher took it, or the withdrawal could not tell), the answer was larger than the gateway reads (UPSTREAM_ANSWER_MAX_BYTES), the route refused what its contract promised, the gateway already retried, or it is an Idempotency-Key replay of an error answer',
    }),
    ApiResponse({
      status: 503,
      description:
        'service_unavailable (Retry-After): the database cannot take work, admission could not finish within ADMISSION_DECIDE_TIMEOUT_MS, or the gateway is shedding load (its dispatch commands queue longer than ADMISSION_SHED_QUEUE_MS); nothing was dispatched',
    }),
    ApiResponse({
      status: 504,
      description:
        "deadline_exceeded: no acceptable answer before the workload deadline; with an Idempotency-Key that is the key's result, and a retry with it gets the same 504 (x-gateway-idempotent-replay: true, x-should-retry: false)",
    }),
  );

/**
 * Turns an admitted action into the HTTP answer in the caller's dialect: a whole JSON response
 * or an SSE stream, with the x-gateway-* headers. Content passes through memory only.
 */
@Injectable()
export class GenerationResponder {
  constructor(
    @Inject(AdmitRequest) private readonly admit: Admission,
    private readonly cache: ReplyCache,
    private readonly metrics: AdmissionMetrics,
    @InjectLogger() private readonly log: Logger,
    @InjectConfig() private readonly config: Pick<ServiceConfig, 'admissionDecideTimeoutMs'>,
    @Inject(LoadShedding) private readonly shedding: Pick<LoadShedding, 'refusal'>,
    private readonly backlogs: StreamBacklogs = new StreamBacklogs(),
  ) {}

  async serve(build: () => AdmitRequestCommand, req: Pick<Request, 'path'>, res: HttpAnswer): Promise<void> {
    const started = process.hrtime.bigint();
    let outcome = 'error';
    // Every response emits 'close' at its end: the signal means something only while the request
    // is being admitted, and its reason is one shared object (no Error built per request).
    const left = new AbortController();
    let admitted = false;
    res.on('close', () => admitted || left.abort(CLIENT_LEFT));
    try {
      const cmd = build();
      assertModelAcceptable(cmd.modelAlias);
      // A client that left while its request waited (behind a busy event loop) asks for nothing,
      // and one that leaves while its admission waits for its reservation statement is dropped
      // from the queue (`ClientLeft`): nothing is reserved for either.
      if (res.destroyed) return void (outcome = 'client_left');
      // While dispatch commands queue longer than ADMISSION_SHED_QUEUE_MS, a share of requests is
      // refused here, before anything is reserved: a 503 instead of a wait the client may not sit
      // out, and a provider call nobody reads; held a moment first when the same connection was
      // refused within its Retry-After (docs/decisions.md, "Shedding on the dispatch queue").
      const shed = this.shedding.refusal(res.socket ?? null);
      if (shed) {
        if (shed.pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, shed.pauseMs));
        if (!res.destroyed) writeDenial(req, res, shed.error);
        return void (outcome = 'shed');
      }
      const action = await this.decided(this.admit.execute(cmd, { signal: left.signal }));
      admitted = true;
      if (res.destroyed) outcome = await this.abandoned(action);
      else
        outcome = cmd.stream ? await this.stream(action, cmd, req, res) : await this.whole(action, cmd.idempotencyKey !== null, req, res);
    } catch (err) {
      outcome = await this.fail(err, req, res);
    } finally {
      this.metrics.latency.observe({ outcome }, Number(process.hrtime.bigint() - started) / 1e9);
    }
  }

  /**
   * Admission's own work (the key, the contract, the reservation) within ADMISSION_DECIDE_TIMEOUT_MS:
   * a database that stops answering without failing (a hung server or disk, a network that drops
   * packets) must not hold the client, who gets 503 service_unavailable with Retry-After instead.
   * An admission that completes after that is never dispatched (nothing here calls `dispatch` for
   * it) and is withdrawn at once: its slot and hold come back now, not a dispatch deadline later
   * (docs/decisions.md, "A Postgres that stops answering", "Withdrawn at once").
   */
  private decided(admitting: Promise<AdmittedAction>): Promise<AdmittedAction> {
    const limitMs = this.config.admissionDecideTimeoutMs ?? ADMISSION_DECIDE_TIMEOUT_DEFAULT_MS;
    return new Promise((resolve, reject) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        this.metrics.decideTimeouts.inc({ event: 'timed_out' });
        reject(
          new DomainError(
            'service_unavailable',
            `the gateway could not admit the request within ${limitMs} ms (its database is not answering); retry shortly`,
            undefined,
            { 'retry-after': '1' },
          ),
        );
      }, limitMs);
      admitting.then(
        (admitted) => {
          if (!late) {
            clearTimeout(timer);
            return resolve(admitted);
          }
          this.metrics.decideTimeouts.inc({ event: 'admitted_late' });
          void this.withdraw(admitted, 'admitted_late').then((outcome) =>
            this.log.warn(
              { action_id: admitted.actionId, limit_ms: limitMs, withdrawal: outcome },
              outcome === 'voided'
                ? 'admitted after the client was answered 503; not dispatched, withdrawn: its slot and hold are released'
                : 'admitted after the client was answered 503; not dispatched; not withdrawn now: its reservation is released by the dispatch-deadline sweep',
            ),
          );
        },
        (err: unknown) => {
          if (!late) {
            clearTimeout(timer);
            return reject(err);
          }
          this.metrics.decideTimeouts.inc({ event: 'failed_late' });
        },
      );
    });
  }

  /**
   * `replayable`: the request carried an Idempotency-Key, so a retry may ask for this answer again
   * (only such a retry ever reads the cache; sealing every answer cost a JSON pass and an AES
   * pass per request for nothing).
   */
  private whole(admitted: AdmittedAction, replayable: boolean, req: Pick<Request, 'path'>, res: HttpAnswer): Promise<string> {
    const exchange = new Exchange(admitted.actionId, this.log);
    if (replayable) this.cache.expect(admitted.actionId, admitted.headers);
    const answer = (reply: Reply, cause: string) => {
      if (replayable) this.cache.settle(admitted.actionId, reply);
      exchange.end(cause, () => this.writeReply(admitted.actionId, admitted.headers, reply, req, res));
    };
    const dispatching = this.admit.dispatch(
      admitted,
      (r) => {
        if (r.kind === 'response' || r.kind === 'error') answer(r, 'reply');
      },
      () => answer('timeout', 'deadline'),
    );
    // The client left before the answer: nothing more is written. With an Idempotency-Key the
    // answer is still heard, until the deadline, for its retry: a client whose own timeout fired
    // retries with the key and gets what it paid for. Without one, the action is withdrawn unless
    // a dispatcher has taken it (`withdrawQueued`); taken, dispatch and settlement carry on.
    res.on('close', () => {
      if (!exchange.open) return;
      exchange.end('client left', () => 'client_disconnected', { keepListening: replayable });
      if (!replayable) void this.withdrawQueued(admitted, succeeded(dispatching));
    });
    void dispatching.then(
      (stop) => exchange.listening(stop),
      async (err: Error) => {
        const withdrawal = await this.withdrawUnpublished(admitted, err);
        if (replayable) this.cache.settle(admitted.actionId, null);
        exchange.end('publish failed', () => {
          for (const [k, v] of Object.entries(admitted.headers)) res.setHeader(k, v);
          writeDenial(req, res, undispatched(admitted.actionId, withdrawal), noRetryUnless(withdrawal));
          return 'publish_failed';
        });
      },
    );
    return exchange.settled;
  }

  /** `replayed`: an Idempotency-Key retry's copy of the first answer, which a further retry only repeats. */
  private writeReply(
    actionId: string,
    headers: Record<string, string>,
    reply: Reply,
    req: Pick<Request, 'path'>,
    res: HttpAnswer,
    replayed = false,
  ): string {
    for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    if (reply === 'timeout') {
      // Replayed, it is the key's result: the same key can only get it again, never a new dispatch.
      writeDenial(req, res, deadlinePassed(actionId, replayed), replayed ? { 'x-should-retry': 'false' } : {});
      return 'deadline_exceeded';
    }
    if (reply.kind === 'response' || reply.kind === 'error') {
      res.setHeader('x-gateway-returned-candidates', String(reply.returned_candidates ?? 0));
      res.setHeader('x-gateway-attempts', String(reply.attempts_total ?? 1));
      if (reply.winner_role) res.setHeader('x-gateway-winner-role', reply.winner_role);
    }
    if (reply.kind === 'response') {
      res.status(reply.http_status).json(reply.body);
      return 'answered';
    }
    if (reply.kind === 'error') {
      const code = replyErrorCode(reply.code);
      // A route that refuses what its contract promised will refuse again, and after the gateway
      // used its own retry allowance an SDK retry would multiply attempts outside it.
      // An answer larger than the gateway reads would be as large again, and paid for again.
      // A replayed error is the same error again for as long as the key is held: an SDK retry with
      // the same key gets it again, and never a new dispatch.
      const noRetry =
        reply.code === 'upstream_contract_failure' ||
        reply.code === 'upstream_answer_too_large' ||
        reply.gateway_retried === true ||
        replayed;
      writeDenial(req, res, new DomainError(code, reply.message), noRetry ? { 'x-should-retry': 'false' } : {});
      return code;
    }
    writeDenial(req, res, new DomainError('upstream_error', `dispatch sent no answer the gateway can give (action ${actionId})`));
    return 'unexpected_reply';
  }

  /**
   * A retry with an Idempotency-Key the first request used, with the same body: the first answer,
   * from this instance's cache, or, while the first still runs here, when it comes. Otherwise a
   * 409 saying which: still running elsewhere (`idempotency_key_in_progress`, Retry-After, an SDK
   * retries it), or an answer this gateway does not hold (`idempotency_key_reused`: it expired,
   * another instance gave it, or it was a stream). A first request that ended at its deadline is
   * replayed as its 504 (`x-should-retry: false`). A key whose first action never reached a
   * provider was released when it was withdrawn: no replay comes here.
   */
  private async replay(prior: IdempotentReplay, req: Pick<Request, 'path'>, res: HttpAnswer): Promise<string> {
    const actionId = prior.actionId;
    let held = this.cache.get(actionId);
    let result: 'cached' | 'waited' | 'in_progress' | 'not_held' | 'streamed' = held ? 'cached' : prior.streamed ? 'streamed' : 'not_held';
    if (!held && prior.running && !prior.streamed) {
      const waiting = this.cache.wait(actionId);
      if (typeof waiting === 'string') {
        this.metrics.idempotentRetries.inc({ result: 'in_progress' });
        writeDenial(
          req,
          res,
          new DomainError(
            'idempotency_key_in_progress',
            `this Idempotency-Key's first request (action ${actionId}) is still running${waiting === 'busy' ? ' and already has retries waiting for it' : ''}; retry after it ends`,
            undefined,
            { 'retry-after': '1', 'x-gateway-action-id': actionId },
          ),
        );
        return 'idempotency_in_progress';
      }
      let left = false;
      res.on('close', () => (left = true));
      held = await waiting;
      if (held) result = 'waited';
      if (left) {
        this.metrics.idempotentRetries.inc({ result });
        return 'client_disconnected';
      }
    }
    this.metrics.idempotentRetries.inc({ result });
    if (held) {
      res.setHeader('x-gateway-idempotent-replay', 'true');
      return this.writeReply(actionId, { ...held.headers, 'x-gateway-action-id': actionId }, held.reply, req, res, true);
    }
    const why = prior.streamed ? 'it was streamed, and a stream is not replayed' : 'its result is not held here';
    writeDenial(
      req,
      res,
      new DomainError(
        'idempotency_key_reused',
        `this Idempotency-Key already created action ${actionId}; ${why}, see GET /v1/actions/${actionId}`,
        undefined,
        { 'x-gateway-action-id': actionId },
      ),
    );
    return 'idempotency_replay';
  }

  /**
   * The client left while its request was being admitted (its own timeout, most often, when
   * admission is slow under load). Nobody would read the answer, so nothing is dispatched: the
   * action is withdrawn, and its slot, its hold and its Idempotency-Key come back at once. Under
   * overload this is what keeps the gateway from spending the provider's time and the workload's
   * money on answers that have nowhere to go. Once dispatched, an action runs to its end (docs/decisions.md,
   * "A client that left before dispatch").
   */
  private async abandoned(admitted: AdmittedAction): Promise<string> {
    const withdrawal = await this.withdraw(admitted, 'client_left');
    this.log.info(
      { action_id: admitted.actionId, withdrawal },
      withdrawal === 'voided'
        ? 'client left before dispatch; not dispatched, withdrawn: its slot and hold are released'
        : 'client left before dispatch; not dispatched; not withdrawn now: its reservation is released by the dispatch-deadline sweep',
    );
    return 'client_left';
  }

  /**
   * The client left after its command was sent and before any answer came, and nobody can ask for
   * this answer again (no Idempotency-Key; streams are never replayed). A dispatcher may not have
   * taken the command yet (it waits in the topic or behind others under load): then the action is
   * withdrawn as if it had never been sent, and the claim refuses the command when it comes, so
   * the provider is not called for nobody. Once claimed, it runs to its end. Nothing is logged for
   * it (under overload these come by the hundred a second); `gateway_admission_withdrawals_total`
   * counts them. Resolves whether it was withdrawn (false too when the publish failed: that path
   * withdraws it).
   */
  private async withdrawQueued(admitted: AdmittedAction, published: Promise<boolean>): Promise<boolean> {
    if (!(await published)) return false;
    return (await this.withdraw(admitted, 'client_left_queued')) === 'voided';
  }

  /** The publish failed: the action is withdrawn before the client is answered, so the answer can say what happened. */
  private async withdrawUnpublished(admitted: AdmittedAction, err: Error): Promise<Withdrawal> {
    const withdrawal = await this.withdraw(admitted, 'publish_failed');
    this.log.error({ action_id: admitted.actionId, error: err.message, withdrawal }, 'dispatch publish failed');
    return withdrawal;
  }

  /**
   * Withdraws an action admission will not wait for, within ADMISSION_DECIDE_TIMEOUT_MS: past it the
   * caller goes on with `unknown` (the dispatch-deadline sweep then voids it, if nothing claimed it)
   * and the withdrawal's own result is only counted. Never rejects.
   */
  private withdraw(
    admitted: AdmittedAction,
    cause: 'publish_failed' | 'admitted_late' | 'client_left' | 'client_left_queued',
  ): Promise<Withdrawal> {
    const limitMs = this.config.admissionDecideTimeoutMs ?? ADMISSION_DECIDE_TIMEOUT_DEFAULT_MS;
    const done = this.admit.withdraw(admitted).then(
      (outcome) => {
        this.metrics.withdrawals.inc({ cause, outcome });
        return outcome;
      },
      (err: unknown) => {
        this.metrics.withdrawals.inc({ cause, outcome: 'error' });
        this.log.error({ action_id: admitted.actionId, cause, error: (err as Error)?.message }, 'withdrawing an admitted action failed');
        return 'unknown' as const;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<Withdrawal>((resolve) => {
      timer = setTimeout(() => resolve('unknown'), limitMs);
    });
    return Promise.race([done, limit]).finally(() => clearTimeout(timer));
  }

  /**
   * Streams the chunks in seq order as they arrive. The stream ends cleanly only when dispatch
   * says the provider's stream was whole and every chunk reached the client; otherwise (cut
   * upstream, a lost chunk, an error reply, the deadline) the client gets an error event in its
   * dialect and no end marker, so its SDK raises instead of returning a truncated answer.
   */
  private stream(admitted: AdmittedAction, cmd: AdmitRequestCommand, req: Pick<Request, 'path'>, res: HttpAnswer): Promise<string> {
    for (const [k, v] of Object.entries(admitted.headers)) res.setHeader(k, v);
    const exchange = new Exchange(admitted.actionId, this.log);
    const framing = new StreamFraming(cmd);
    const early = new Map<number, string>();
    let earlyChars = 0;
    let next = 0;
    let opened = false;
    const open = () => {
      if (opened) return;
      opened = true;
      res.status(200);
      res.setHeader('content-type', framing.contentType);
      res.setHeader('cache-control', 'no-cache');
      res.flushHeaders();
      res.write(framing.opening);
    };
    const writeInOrder = () => {
      while (early.has(next)) {
        open();
        const data = early.get(next) ?? '';
        res.write(framing.element(data, next === 0));
        earlyChars -= data.length;
        early.delete(next);
        next++;
      }
    };
    /**
     * The client is gone while the stream runs. Once the command is out (if its publish fails,
     * nothing runs and there is nothing to stop): gone before any chunk came, the action is
     * withdrawn unless a dispatcher has taken it (`withdrawQueued`); taken, dispatch is told to
     * stop relaying its chunks (it remembers a stop that arrives before the command it names).
     */
    let published: Promise<boolean> | null = null;
    let gone = false;
    const stopRelay = (reason: 'client_left' | 'client_too_slow') => {
      if (gone || !published) return;
      gone = true;
      const beforeAnyChunk = next === 0 && early.size === 0;
      void published.then(async (ok) => {
        if (!ok || (beforeAnyChunk && (await this.withdrawQueued(admitted, Promise.resolve(true))))) return;
        this.admit.stopRelay(admitted.actionId, reason);
      });
    };
    /** The client does not take the stream as fast as it comes: its connection is closed. */
    const cut = (bound: 'stream' | 'instance', held: number, limit: number) =>
      exchange.end('client too slow', () => {
        stopRelay('client_too_slow');
        this.log.warn(
          { action_id: admitted.actionId, backlog_bytes: res.writableLength + earlyChars, bound, held_bytes: held, limit_bytes: limit },
          'stream client does not read its answer; connection closed (the attempt still settles)',
        );
        res.destroy();
        this.metrics.slowStreamClients.inc({ bound });
        return 'client_too_slow';
      });
    const tracked: BackloggedStream = {
      backlog: () => res.writableLength + earlyChars,
      cut: (total) => cut('instance', total, this.backlogs.maxBytes),
    };
    this.backlogs.open(tracked);
    void exchange.settled.then(() => this.backlogs.close(tracked));
    /** Past its own bound, or the instance's (when it is the largest), the stream is cut. */
    const boundBacklog = () => {
      const backlog = tracked.backlog();
      if (backlog > STREAM_CLIENT_BACKLOG_MAX_BYTES) return cut('stream', backlog, STREAM_CLIENT_BACKLOG_MAX_BYTES);
      this.backlogs.grew(tracked);
    };
    /** Ends the exchange with an error: a denial before the headers, an error event after them. */
    const failWith = (
      err: DomainError,
      outcome: string,
      cause: string,
      reply?: Extract<DispatchReplyV1, { kind: 'error' }>,
      headers: Record<string, string> = {},
    ) =>
      exchange.end(cause, () => {
        if (reply && !opened) return this.writeReply(admitted.actionId, {}, reply, req, res);
        if (!opened) {
          writeDenial(req, res, err, headers);
          return outcome;
        }
        res.write(framing.error(denialBody(req, err), next === 0));
        res.end();
        return outcome;
      });

    res.on('close', () => {
      // The client left; dispatch keeps reading upstream so usage still arrives and settles.
      if (exchange.open)
        exchange.end('client left', () => {
          stopRelay('client_left');
          return 'client_disconnected';
        });
    });
    const dispatching = this.admit.dispatch(
      admitted,
      (r) => {
        if (!exchange.open) return;
        switch (r.kind) {
          case 'stream_chunk':
            if (r.seq < next || early.has(r.seq)) return; // a duplicate delivery: written, or waiting already
            early.set(r.seq, r.data);
            earlyChars += r.data.length;
            writeInOrder();
            boundBacklog();
            return;
          case 'stream_end':
            writeInOrder();
            if (r.complete && next === r.seq) {
              exchange.end('stream end', () => {
                open();
                res.end(framing.closing);
                return 'answered';
              });
            } else {
              const lost = r.seq - next - early.size;
              failWith(
                new DomainError(
                  'upstream_error',
                  lost > 0
                    ? `${lost} part(s) of the stream were lost on the way (action ${admitted.actionId}); the answer is incomplete`
                    : `the provider's stream ended before its end (action ${admitted.actionId}); the answer is incomplete`,
                ),
                'stream_cut',
                'stream cut',
              );
            }
            return;
          case 'error': {
            const code = replyErrorCode(r.code);
            failWith(new DomainError(code, r.message), code, 'error reply', r);
            return;
          }
          case 'response':
            failWith(
              new DomainError('upstream_error', `dispatch answered a stream with a whole response (action ${admitted.actionId})`),
              'unexpected_reply',
              'whole reply',
            );
            return;
        }
      },
      () => failWith(deadlinePassed(admitted.actionId), 'deadline_exceeded', 'deadline'),
    );
    published = succeeded(dispatching);
    void dispatching.then(
      (stop) => exchange.listening(stop),
      async (err: Error) => {
        const withdrawal = await this.withdrawUnpublished(admitted, err);
        failWith(undispatched(admitted.actionId, withdrawal), 'publish_failed', 'publish failed', undefined, noRetryUnless(withdrawal));
      },
    );
    return exchange.settled;
  }

  private async fail(err: unknown, req: Pick<Request, 'path'>, res: HttpAnswer): Promise<string> {
    if (err instanceof IdempotentReplay) return this.replay(err, req, res);
    if (err instanceof ClientLeft) return 'client_left';
    const denial = toDomainError(err);
    if (denial) {
      writeDenial(req, res, denial);
      return denial.code;
    }
    this.log.error({ error: (err as Error)?.name, message: (err as Error)?.message }, 'admission failed');
    if (!res.headersSent)
      res.status(500).json({ error: { message: 'internal error', type: 'api_error', code: 'internal_error', param: null } });
    return 'internal_error';
  }
}

/** The reason a request's admission is aborted: its client left before it was admitted. */
export class ClientLeft extends Error {
  constructor() {
    super('the client left before its request was admitted');
    this.name = 'ClientLeft';
  }
}

/** The one abort reason every request shares. */
const CLIENT_LEFT = new ClientLeft();

/** A pre-authentication cap: an alias longer than any route's is refused before the key is looked up. */
function assertModelAcceptable(model: string): void {
  if (model.length > INPUT_LIMITS.modelMaxChars) {
    throw new DomainError('invalid_request', `model must be at most ${INPUT_LIMITS.modelMaxChars} characters`, 'model');
  }
}

/**
 * The answer to a failed publish, by what withdrawing the action found. Only a withdrawn action
 * is certain to send nothing upstream; otherwise a retry could pay twice, so the SDK is told not to
 * retry on its own (`noRetryUnless`).
 */
function undispatched(actionId: string, withdrawal: Withdrawal): DomainError {
  switch (withdrawal) {
    case 'voided':
      return new DomainError(
        'upstream_error',
        `the request could not be dispatched (action ${actionId}); nothing was sent to the provider and its reservation is released: a retry (with the same Idempotency-Key too) is a new request`,
      );
    case 'claimed':
    case 'not_voidable':
      return new DomainError(
        'upstream_error',
        `the gateway could not confirm it dispatched the request (action ${actionId}), and a dispatcher took it: it may still run and be billed; see GET /v1/actions/${actionId}`,
      );
    case 'unknown':
      return new DomainError(
        'upstream_error',
        `the request could not be confirmed dispatched (action ${actionId}); if no dispatcher takes it, its reservation is released after the dispatch deadline; see GET /v1/actions/${actionId}`,
      );
  }
}

/** Whether the dispatch command's publish was acknowledged (never rejects). */
function succeeded(dispatching: Promise<unknown>): Promise<boolean> {
  return dispatching.then(
    () => true,
    () => false,
  );
}

function noRetryUnless(withdrawal: Withdrawal): Record<string, string> {
  return withdrawal === 'voided' ? {} : { 'x-should-retry': 'false' };
}

function deadlinePassed(actionId: string, replayed = false): DomainError {
  return new DomainError(
    'deadline_exceeded',
    `no acceptable answer before the deadline (action ${actionId})${replayed ? "; this is the Idempotency-Key's result: a new attempt needs a new key" : ''}`,
  );
}

/**
 * The one answer to one request. A reply, the deadline, a failed publish and the client leaving
 * can come in any order; the first that ends the exchange writes the answer, and whatever comes
 * after is logged and dropped, so a response is never written twice.
 */
class Exchange {
  readonly settled: Promise<string>;
  private outcome: string | null = null;
  private keptListening = false;
  private stopListening: (() => void) | null = null;
  private resolve: (outcome: string) => void = () => undefined;

  constructor(
    private readonly actionId: string,
    private readonly log: Logger,
  ) {
    this.settled = new Promise((resolve) => (this.resolve = resolve));
  }

  get open(): boolean {
    return this.outcome === null;
  }

  /**
   * Ends the exchange by running `write` (which returns the outcome), unless it already ended.
   * `keepListening`: replies are still heard after it (a gone client's answer, held for its
   * Idempotency-Key retry); the next `end` then only stops listening.
   */
  end(cause: string, write: () => string, opts: { keepListening?: boolean } = {}): void {
    if (this.outcome !== null) {
      if (this.keptListening) {
        this.keptListening = false;
        this.stopListening?.();
        return;
      }
      this.log.warn({ action_id: this.actionId, cause, answered: this.outcome }, 'request already answered; later event ignored');
      return;
    }
    this.outcome = 'error';
    try {
      this.outcome = write();
    } catch (err) {
      this.log.error({ action_id: this.actionId, cause, error: (err as Error).message }, 'writing the answer failed');
    }
    this.keptListening = opts.keepListening === true;
    if (!this.keptListening) this.stopListening?.();
    this.resolve(this.outcome);
  }

  /** Hands over the way to stop listening for replies; used at once if the exchange already ended (and does not listen on). */
  listening(stop: () => void): void {
    if (this.outcome !== null && !this.keptListening) stop();
    else this.stopListening = stop;
  }
}

/**
 * How a stream is framed in the caller's dialect: OpenAI chat SSE (`[DONE]` at the end), OpenAI
 * Responses SSE (each event named by its payload's `type`, as OpenAI sends them; the stream ends
 * after `response.completed`, with no `[DONE]`), Gemini SSE (CRLF, no end marker), or, for Gemini
 * clients that did not ask for `alt=sse`, one JSON array written element by element. An error
 * closes the stream as an error event the SDKs raise.
 */
class StreamFraming {
  readonly contentType: string;
  readonly opening: string;
  readonly closing: string;
  private readonly jsonArray: boolean;
  private readonly named: boolean;
  private readonly eol: string;

  constructor(cmd: Pick<AdmitRequestCommand, 'apiKind' | 'streamFormat'>) {
    const gemini = cmd.apiKind === 'gemini-generate';
    this.jsonArray = gemini && cmd.streamFormat === 'json-array';
    this.named = cmd.apiKind === 'openai-responses';
    this.eol = gemini ? '\r\n' : '\n';
    this.contentType = this.jsonArray ? 'application/json' : 'text/event-stream';
    this.opening = this.jsonArray ? '[' : '';
    this.closing = this.jsonArray ? ']' : gemini || this.named ? '' : this.event('[DONE]');
  }

  element(data: string, first: boolean): string {
    return this.jsonArray ? `${first ? '' : ',\r\n'}${data}` : this.event(data, this.named ? eventName(data) : null);
  }

  /** The error as the last element (JSON array) or event, without the end marker. */
  error(body: unknown, first: boolean): string {
    const data = JSON.stringify(body);
    return this.jsonArray ? `${this.element(data, first)}]` : this.event(data, this.named ? 'error' : null);
  }

  /** One event; a payload with line breaks takes one `data:` line per line. */
  private event(data: string, name: string | null = null): string {
    return (
      (name ? `event: ${name}${this.eol}` : '') +
      data
        .split('\n')
        .map((line) => `data: ${line}${this.eol}`)
        .join('') +
      this.eol
    );
  }
}

/** The public code for a dispatch error reply: the registry's codes dispatch may send, else upstream_error. */
export function replyErrorCode(code: string): DenialCode {
  switch (code) {
    case 'deadline_exceeded':
    case 'invalid_request':
    case 'upstream_credential_missing':
      return code;
    default:
      return 'upstream_error';
  }
}

/** A Responses stream event's name is its payload's `type` (a plain identifier, or none). */
function eventName(data: string): string | null {
  try {
    const type = (JSON.parse(data) as { type?: unknown } | null)?.type;
    return typeof type === 'string' && /^[\w.-]+$/.test(type) ? type : null;
  } catch {
    return null;
  }
}
