import pino from 'pino';
import type { DispatchCommandV1, DispatchReplyV1 } from '@gateway/contracts';
import type { VoidOutcome } from '@gateway/db';
import { DomainError } from '@gateway/domain';
import { ContentCipher, ReplyRouter } from '@gateway/messaging';
import { Metrics } from '@gateway/service-kit';
import { AdmissionMetrics } from '../admission.metrics';
import {
  AdmitRequestCommand,
  fromGeminiGenerate,
  fromOpenAiChat,
  fromOpenAiResponses,
} from '../usecases/admit-request/admit-request.command';
import { AdmittedAction, IdempotentReplay } from '../usecases/admit-request/admit-request.usecase';
import { Admission, GenerationResponder, HttpAnswer, STREAM_CLIENT_BACKLOG_MAX_BYTES } from './generation.responder';
import { MAX_WAITING_RETRIES, ReplyCache } from './reply-cache';
import { StreamBacklogs } from './stream-backlogs';
import { LoadShedding } from './load-shedding';
import { ONE_CANDIDATE_COUNTS } from './reply.fixture';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const DEADLINE_MS = 5_000;
const ACTION = 'act-1';

const COMMAND: DispatchCommandV1 = {
  action_id: ACTION,
  request_id: 'req-1',
  workload_id: 'wl-1',
  environment: 'prod',
  api_kind: 'openai-chat',
  stream: true,
  route: {
    route_id: 'route-1',
    route_version: 1,
    model_alias: 'approved-standard',
    provider_kind: 'openai-chat',
    base_url: 'http://upstream.example',
    upstream_model: 'model-x',
    candidate_param: 'n',
    output_cap_param: 'max_tokens',
    output_cap_semantics: 'per_candidate',
    price_revision_id: 'price-1',
  },
  requested_candidates: null,
  effective_candidates: 1,
  output_ceiling: 100,
  include_usage_for_client: false,
  deadline: new Date(NOW.getTime() + DEADLINE_MS).toISOString(),
  dispatch_deadline: new Date(NOW.getTime() + DEADLINE_MS + 2_000).toISOString(),
  acceptance: { allow_length: false, allow_content_filter: false },
  request: {},
};

/**
 * Admission after the reservation: replies come through a real ReplyRouter (whose timer is the
 * deadline) and the publish of the dispatch command is held open until the test settles it, as
 * a broker that is down holds kafkajs' retries.
 */
class FakeAdmission implements Admission {
  readonly router = new ReplyRouter();
  private settlePublish: (err?: Error) => void = () => undefined;
  private readonly published = new Promise<void>((resolve, reject) => {
    this.settlePublish = (err) => (err ? reject(err) : resolve());
  });

  /** how many times `execute` admitted a request (a reservation committed) */
  admitted = 0;
  /** how many times `dispatch` was called (a command published) */
  dispatched = 0;
  /** the actions `withdraw` was called for */
  readonly withdrawn: string[] = [];
  /** what `withdraw` answers (a promise the test holds: a database that does not answer) */
  withdrawal: () => Promise<VoidOutcome> = async () => 'voided';

  /** what the next `execute` finds instead of admitting: a retry of an earlier Idempotency-Key */
  replayNext: IdempotentReplay | null = null;

  /**
   * `admitting`: when admission's own work ends (at once unless given; a hung database never).
   * `queued`: meanwhile the admission waits for its reservation statement, so its client's signal
   * drops it (as `StatementGroups` does); otherwise the statement is running and completes.
   */
  constructor(
    private readonly admitting?: Promise<void>,
    private readonly queued = false,
  ) {}

  async execute(_cmd: AdmitRequestCommand, opts: { signal?: AbortSignal } = {}): Promise<AdmittedAction> {
    const replay = this.replayNext;
    this.replayNext = null;
    if (replay) throw replay;
    const signal = opts.signal;
    if (this.admitting && this.queued && signal) {
      await Promise.race([
        this.admitting,
        new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
      ]);
    } else if (this.admitting) await this.admitting;
    this.admitted += 1;
    return {
      actionId: ACTION,
      command: COMMAND,
      deadline: new Date(NOW.getTime() + DEADLINE_MS),
      headers: { 'x-gateway-action-id': ACTION, 'x-gateway-effective-candidates': '1' },
    };
  }

  async dispatch(admitted: AdmittedAction, onReply: (r: DispatchReplyV1) => void, onTimeout: () => void): Promise<() => void> {
    this.dispatched += 1;
    const stop = this.router.listen(admitted.actionId, admitted.deadline, NOW, onReply, onTimeout);
    try {
      await this.published;
    } catch (err) {
      stop();
      throw err;
    }
    return stop;
  }

  withdraw(admitted: Pick<AdmittedAction, 'actionId'>): Promise<VoidOutcome> {
    this.withdrawn.push(admitted.actionId);
    return this.withdrawal();
  }

  /** the stops `stopRelay` was asked to send, as `action/reason` */
  readonly relayStops: string[] = [];

  stopRelay(actionId: string, reason: string): void {
    this.relayStops.push(`${actionId}/${reason}`);
  }

  publishSucceeds(): void {
    this.settlePublish();
  }

  publishFails(): void {
    this.settlePublish(new Error('KafkaJSNumberOfRetriesExceeded'));
  }

  reply(r: DispatchReplyV1): boolean {
    return this.router.deliver(ACTION, r);
  }
}

/**
 * The slice of an Express response the responder writes. Like Node, it refuses a header or a
 * status after the headers went out and a write after the end (ERR_HTTP_HEADERS_SENT,
 * ERR_STREAM_WRITE_AFTER_END), and keeps a list of such attempts.
 */
class FakeResponse implements HttpAnswer {
  statusCode = 200;
  headersSent = false;
  writableEnded = false;
  body = '';
  /** false: the client stopped reading, and what is written waits in `writableLength` */
  reading = true;
  writableLength = 0;
  destroyed = false;
  readonly headers = new Map<string, string>();
  readonly violations: string[] = [];
  private readonly closeListeners: Array<() => void> = [];

  setHeader(name: string, value: string): this {
    this.refuseAfterHeaders(`setHeader(${name})`);
    this.headers.set(name.toLowerCase(), String(value));
    return this;
  }

  status(code: number): this {
    this.refuseAfterHeaders(`status(${code})`);
    this.statusCode = code;
    return this;
  }

  json(body: unknown): this {
    this.refuseAfterHeaders('json()');
    this.headersSent = true;
    this.body = JSON.stringify(body);
    this.writableEnded = true;
    return this;
  }

  flushHeaders(): void {
    this.headersSent = true;
  }

  write(chunk: string): boolean {
    this.refuseAfterEnd('write()');
    if (this.destroyed) this.violations.push('write() after destroy()');
    this.headersSent = true;
    this.body += String(chunk);
    if (!this.reading) this.writableLength += Buffer.byteLength(String(chunk));
    return this.reading;
  }

  destroy(): this {
    this.destroyed = true;
    return this;
  }

  end(chunk?: string): this {
    this.refuseAfterEnd('end()');
    if (chunk !== undefined) this.body += chunk;
    this.headersSent = true;
    this.writableEnded = true;
    return this;
  }

  on(event: 'close', listener: () => void): this {
    this.closeListeners.push(listener);
    return this;
  }

  /** The client goes away (Node marks the response destroyed, then emits 'close'). */
  disconnect(): void {
    this.destroyed = true;
    for (const l of this.closeListeners) l();
  }

  /** The SSE events' data, in order. */
  events(): string[] {
    return this.body
      .split(/\r?\n\r?\n/)
      .filter((e) => e.length > 0)
      .map((e) =>
        e
          .split(/\r?\n/)
          .map((l) => l.replace(/^data: /, ''))
          .join('\n'),
      );
  }

  private refuseAfterHeaders(what: string): void {
    if (!this.headersSent) return;
    this.violations.push(`${what} after the headers were sent`);
    throw Object.assign(new Error('Cannot set headers after they are sent to the client'), { code: 'ERR_HTTP_HEADERS_SENT' });
  }

  private refuseAfterEnd(what: string): void {
    if (!this.writableEnded) return;
    this.violations.push(`${what} after the end`);
    throw Object.assign(new Error('write after end'), { code: 'ERR_STREAM_WRITE_AFTER_END' });
  }
}

const OPENAI_PATH = { path: '/v1/chat/completions' };
const GEMINI_PATH = { path: '/v1beta/models/approved-gemini:streamGenerateContent' };

const chunk = (seq: number, data: string): DispatchReplyV1 => ({ kind: 'stream_chunk', seq, data });
const counts = ONE_CANDIDATE_COUNTS;
const end = (seq: number, complete: boolean): DispatchReplyV1 => ({ kind: 'stream_end', seq, complete, ...counts });
const providerError: DispatchReplyV1 = {
  kind: 'error',
  http_status: 502,
  code: 'upstream_error',
  message: 'provider error 500',
  ...counts,
};

const openAiStream = (): AdmitRequestCommand =>
  fromOpenAiChat({ model: 'approved-standard', messages: [{ role: 'user', content: 'hi' }], stream: true }, 'key', null);
const openAiWhole = (): AdmitRequestCommand =>
  fromOpenAiChat({ model: 'approved-standard', messages: [{ role: 'user', content: 'hi' }] }, 'key', null);
const responsesStream = (): AdmitRequestCommand =>
  fromOpenAiResponses({ model: 'approved-standard', input: 'hi', stream: true }, 'key', null);
const geminiStream = (format: 'sse' | 'json-array'): AdmitRequestCommand =>
  fromGeminiGenerate({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }, 'approved-gemini', true, 'key', null, format);

/** `gateway_admission_withdrawals_total` as `cause/outcome` → count. */
const withdrawals = async (f: { metrics: AdmissionMetrics }) =>
  Object.fromEntries((await f.metrics.withdrawals.get()).values.map((v) => [`${v.labels.cause}/${v.labels.outcome}`, v.value]));

/** `gateway_admission_idempotent_retries_total` as result → count. */
const idempotentRetries = async (f: { metrics: AdmissionMetrics }) =>
  Object.fromEntries((await f.metrics.idempotentRetries.get()).values.map((v) => [v.labels.result, v.value]));

/** Lets pending promise callbacks (publish outcome, the withdrawal after a failed publish, dispatch hand-over) run. */
const settle = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

function setup(
  build: () => AdmitRequestCommand,
  req: { path: string } = OPENAI_PATH,
  opts: {
    admitting?: Promise<void>;
    queued?: boolean;
    decideTimeoutMs?: number;
    clientGone?: boolean;
    backlogs?: StreamBacklogs;
    shedding?: Pick<LoadShedding, 'refusal'>;
  } = {},
) {
  jest.useFakeTimers({ now: NOW });
  const admission = new FakeAdmission(opts.admitting, opts.queued);
  const logs: Array<{ level: number; msg: string; cause?: string; answered?: string }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) });
  const cache = new ReplyCache(new ContentCipher(Buffer.alloc(32, 3)), { now: () => new Date() });
  const metrics = new AdmissionMetrics(new Metrics('test'));
  const responder = new GenerationResponder(
    admission,
    cache,
    metrics,
    log,
    { admissionDecideTimeoutMs: opts.decideTimeoutMs },
    opts.shedding ?? { refusal: () => null },
    opts.backlogs,
  );
  const res = new FakeResponse();
  if (opts.clientGone) res.disconnect(); // it left while its request waited for the event loop
  const served = responder.serve(build, req, res);
  let outcome: 'pending' | 'served' = 'pending';
  void served.then(() => (outcome = 'served'));
  return {
    admission,
    cache,
    res,
    logs,
    metrics,
    served: async () => {
      await settle();
      return outcome;
    },
    /** Another request on the same responder, whose admission finds `prior` (an Idempotency-Key retry). */
    retry: (prior: IdempotentReplay) => {
      admission.replayNext = prior;
      const again = new FakeResponse();
      let done: 'pending' | 'served' = 'pending';
      void responder.serve(build, req, again).then(() => (done = 'served'));
      return {
        res: again,
        served: async () => {
          await settle();
          return done;
        },
      };
    },
    lateEvents: () => logs.filter((l) => l.msg === 'request already answered; later event ignored'),
  };
}

afterEach(() => {
  jest.useRealTimers();
});

describe('GenerationResponder', () => {
  describe('SSE framing', () => {
    it('OpenAI: one data event per chunk, then [DONE]', async () => {
      const f = setup(openAiStream);
      await settle();
      f.admission.publishSucceeds();
      f.admission.reply(chunk(0, '{"a":1}'));
      f.admission.reply(chunk(1, '{"b":2}'));
      f.admission.reply(end(2, true));
      expect(await f.served()).toBe('served');
      expect(f.res.statusCode).toBe(200);
      expect(f.res.headers.get('content-type')).toBe('text/event-stream');
      expect(f.res.headers.get('x-gateway-action-id')).toBe(ACTION);
      expect(f.res.body).toBe('data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n');
      expect(f.admission.router.pending).toBe(0);
      expect(f.res.violations).toEqual([]);
    });

    it('OpenAI Responses: each event named by its type, no [DONE] after response.completed', async () => {
      const f = setup(responsesStream, { path: '/v1/responses' });
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '{"type":"response.created","sequence_number":0}'));
      f.admission.reply(chunk(1, '{"type":"response.completed","sequence_number":1}'));
      f.admission.reply(end(2, true));
      expect(await f.served()).toBe('served');
      expect(f.res.headers.get('content-type')).toBe('text/event-stream');
      expect(f.res.body).toBe(
        'event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n' +
          'event: response.completed\ndata: {"type":"response.completed","sequence_number":1}\n\n',
      );
      expect(f.res.writableEnded).toBe(true);
    });

    it('OpenAI Responses: a stream cut before response.completed ends with a named error event the SDK raises', async () => {
      const f = setup(responsesStream, { path: '/v1/responses' });
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '{"type":"response.created","sequence_number":0}'));
      f.admission.reply(end(1, false));
      await f.served();
      const [, last] = f.res.body.split('\n\n');
      expect(last.startsWith('event: error\ndata: ')).toBe(true);
      expect(JSON.parse(last.replace('event: error\ndata: ', ''))).toMatchObject({ error: { code: 'upstream_error' } });
    });

    it('Gemini alt=sse: CRLF events and no end marker', async () => {
      const f = setup(() => geminiStream('sse'), GEMINI_PATH);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '{"a":1}'));
      f.admission.reply(end(1, true));
      await f.served();
      expect(f.res.body).toBe('data: {"a":1}\r\n\r\n');
      expect(f.res.writableEnded).toBe(true);
    });

    it('Gemini without alt=sse: one JSON array written element by element', async () => {
      const f = setup(() => geminiStream('json-array'), GEMINI_PATH);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '{"a":1}'));
      f.admission.reply(chunk(1, '{"b":2}'));
      f.admission.reply(end(2, true));
      await f.served();
      expect(f.res.headers.get('content-type')).toBe('application/json');
      expect(JSON.parse(f.res.body)).toEqual([{ a: 1 }, { b: 2 }]);
    });

    it('writes a payload with line breaks as one event of several data lines', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '{"a":\n1}'));
      f.admission.reply(end(1, true));
      await f.served();
      expect(f.res.body).toBe('data: {"a":\ndata: 1}\n\ndata: [DONE]\n\n');
    });

    it('puts chunks that arrive out of order back in seq order', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(2, '"c"'));
      f.admission.reply(chunk(0, '"a"'));
      expect(f.res.events()).toEqual(['"a"']);
      f.admission.reply(chunk(1, '"b"'));
      f.admission.reply(end(3, true));
      await f.served();
      expect(f.res.events()).toEqual(['"a"', '"b"', '"c"', '[DONE]']);
    });
  });

  describe('a stream the client does not get whole ends with an error event, never a clean end', () => {
    it('OpenAI: dispatch says the provider stream was cut', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '"a"'));
      f.admission.reply(end(1, false));
      await f.served();
      const events = f.res.events();
      expect(events[0]).toBe('"a"');
      expect(JSON.parse(events[1])).toEqual({
        error: { message: expect.stringContaining('incomplete'), type: 'api_error', code: 'upstream_error', param: null },
      });
      expect(events).not.toContain('[DONE]');
      expect(f.res.writableEnded).toBe(true);
    });

    it('OpenAI: a chunk was lost between dispatch and admission', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '"a"'));
      f.admission.reply(chunk(2, '"c"'));
      f.admission.reply(end(3, true));
      await f.served();
      const events = f.res.events();
      expect(events).toHaveLength(2);
      expect(JSON.parse(events[1]).error.message).toMatch(/1 part\(s\) of the stream were lost/);
    });

    it('Gemini: the error in the Gemini shape, with a numeric HTTP code the SDK raises on', async () => {
      const f = setup(() => geminiStream('sse'), GEMINI_PATH);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '{"a":1}'));
      f.admission.reply(end(1, false));
      await f.served();
      expect(f.res.body.startsWith('data: {"a":1}\r\n\r\ndata: {"error":')).toBe(true);
      expect(JSON.parse(f.res.events()[1]).error).toMatchObject({ code: 502, status: 'upstream_error' });
    });

    it('Gemini JSON array: the error is the last element and the array is closed', async () => {
      const f = setup(() => geminiStream('json-array'), GEMINI_PATH);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '{"a":1}'));
      f.admission.reply(end(1, false));
      await f.served();
      expect(JSON.parse(f.res.body)).toEqual([{ a: 1 }, { error: expect.objectContaining({ code: 502, status: 'upstream_error' }) }]);
    });

    it('the deadline passes mid-stream: a deadline_exceeded event, and what comes later is dropped', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '"a"'));
      jest.advanceTimersByTime(DEADLINE_MS);
      expect(await f.served()).toBe('served');
      expect(f.admission.reply(chunk(1, '"b"'))).toBe(false);
      const events = f.res.events();
      expect(events).toHaveLength(2);
      expect(JSON.parse(events[1]).error).toMatchObject({ code: 'deadline_exceeded' });
      expect(f.res.violations).toEqual([]);
    });

    it('an error reply after the headers: an error event', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '"a"'));
      f.admission.reply(providerError);
      await f.served();
      expect(f.res.statusCode).toBe(200);
      expect(JSON.parse(f.res.events()[1]).error).toMatchObject({ code: 'upstream_error', message: 'provider error 500' });
    });
  });

  describe('before the headers an error is an ordinary HTTP error', () => {
    it('an error reply: 502 with the error body, no event stream', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(providerError);
      await f.served();
      expect(f.res.statusCode).toBe(502);
      expect(f.res.headers.get('content-type')).toBeUndefined();
      expect(JSON.parse(f.res.body).error).toMatchObject({ code: 'upstream_error' });
      expect(f.res.headers.get('x-gateway-returned-candidates')).toBe('1');
    });

    it('a stream cut before its first chunk: 502', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(end(0, false));
      await f.served();
      expect(f.res.statusCode).toBe(502);
      expect(JSON.parse(f.res.body).error.code).toBe('upstream_error');
    });

    it('the deadline: 504', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      jest.advanceTimersByTime(DEADLINE_MS);
      await f.served();
      expect(f.res.statusCode).toBe(504);
      expect(JSON.parse(f.res.body).error.code).toBe('deadline_exceeded');
    });
  });

  describe("extra attempts (issue 10): attempts, winner role, and no SDK retry on top of the gateway's", () => {
    it('an answer after a hedge: x-gateway-attempts and x-gateway-winner-role', async () => {
      const f = setup(openAiWhole);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply({
        kind: 'response',
        http_status: 200,
        body: { id: 'x' },
        ...counts,
        attempts_total: 2,
        winner_role: 'hedge',
        gateway_retried: false,
      });
      await f.served();
      expect(f.res.statusCode).toBe(200);
      expect(f.res.headers.get('x-gateway-attempts')).toBe('2');
      expect(f.res.headers.get('x-gateway-winner-role')).toBe('hedge');
      expect(f.res.headers.get('x-should-retry')).toBeUndefined();
    });

    it.each([
      ['the gateway retried', { attempts_total: 2, winner_role: null, gateway_retried: true }, 'false'],
      ['the gateway did not retry', { attempts_total: 1, winner_role: null, gateway_retried: false }, undefined],
      ['an older dispatch (no fields)', {}, undefined],
      ['an answer too large to read (it would be as large, and paid, again)', { code: 'upstream_answer_too_large' }, 'false'],
    ])('an error after %s: x-should-retry %s', async (_what, extra, header) => {
      const f = setup(openAiWhole);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply({ ...providerError, ...extra });
      await f.served();
      expect(f.res.statusCode).toBe(502);
      expect(f.res.headers.get('x-should-retry')).toBe(header);
      expect(f.res.headers.get('x-gateway-attempts')).toBe(String((extra as { attempts_total?: number }).attempts_total ?? 1));
      expect(f.res.headers.get('x-gateway-winner-role')).toBeUndefined();
    });
  });

  describe('the reply cache', () => {
    const answer: DispatchReplyV1 = { kind: 'response', http_status: 200, body: { choices: [] }, ...ONE_CANDIDATE_COUNTS };

    it.each([
      ['with', 'idem-1', answer],
      ['without', null, null],
    ])('%s an Idempotency-Key: the whole answer is kept for a replay (or not kept at all)', async (_, key, kept) => {
      const f = setup(() => fromOpenAiChat({ model: 'approved-standard', messages: [{ role: 'user', content: 'hi' }] }, 'key', key));
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(answer);
      await f.served();
      expect(f.res.statusCode).toBe(200);
      expect(JSON.parse(f.res.body)).toEqual(answer.body);
      expect(f.cache.get(ACTION)?.reply ?? null).toEqual(kept);
    });
  });

  describe('an Idempotency-Key retry gets what the first request earned', () => {
    const answer: DispatchReplyV1 = { kind: 'response', http_status: 200, body: { choices: [{ index: 0 }] }, ...ONE_CANDIDATE_COUNTS };
    const keyed = () => fromOpenAiChat({ model: 'approved-standard', messages: [{ role: 'user', content: 'hi' }] }, 'key', 'idem-1');
    const running = new IdempotentReplay(ACTION, true, false);
    const error = (res: FakeResponse) => JSON.parse(res.body).error as { code: string; message: string };

    it('a retry while the first runs here waits for its answer: one dispatch, both clients answered', async () => {
      const f = setup(keyed);
      f.admission.publishSucceeds();
      await settle();
      const retry = f.retry(running);
      expect(await retry.served()).toBe('pending');
      f.admission.reply(answer);
      expect(await retry.served()).toBe('served');
      expect(await f.served()).toBe('served');
      expect(JSON.parse(retry.res.body)).toEqual(answer.body);
      expect(retry.res.headers.get('x-gateway-idempotent-replay')).toBe('true');
      expect(retry.res.headers.get('x-gateway-action-id')).toBe(ACTION);
      // the first request's x-gateway-* headers too (its counts, never content)
      expect(retry.res.headers.get('x-gateway-effective-candidates')).toBe('1');
      expect(JSON.parse(f.res.body)).toEqual(answer.body);
      expect(f.admission.dispatched).toBe(1);
      expect(f.res.violations.concat(retry.res.violations)).toEqual([]);
      expect(await idempotentRetries(f)).toEqual({ waited: 1 });
    });

    it('the first client left (its own timeout): the answer is still heard and held for its retry', async () => {
      const f = setup(keyed);
      f.admission.publishSucceeds();
      await settle();
      f.res.disconnect();
      expect(await f.served()).toBe('served');
      expect(f.admission.router.pending).toBe(1);
      f.admission.reply(answer);
      await settle();
      expect(f.admission.router.pending).toBe(0);
      expect(f.res.body).toBe('');
      expect(f.lateEvents()).toEqual([]);
      const retry = f.retry(new IdempotentReplay(ACTION, false, false));
      expect(await retry.served()).toBe('served');
      expect(retry.res.statusCode).toBe(200);
      expect(JSON.parse(retry.res.body)).toEqual(answer.body);
      expect(retry.res.headers.get('x-gateway-effective-candidates')).toBe('1');
      expect(f.res.violations.concat(retry.res.violations)).toEqual([]);
      expect(await idempotentRetries(f)).toEqual({ cached: 1 });
    });

    it('without a key, a client that left stops the listening at once, and its action is withdrawn unless a dispatcher took it', async () => {
      const f = setup(openAiWhole);
      f.admission.publishSucceeds();
      await settle();
      f.res.disconnect();
      await f.served();
      await settle();
      expect(f.admission.router.pending).toBe(0);
      expect(f.admission.withdrawn).toEqual([ACTION]);
      expect(await withdrawals(f)).toEqual({ 'client_left_queued/voided': 1 });
    });

    it('with a key, a client that left is not withdrawn: its retry may ask for the answer', async () => {
      const f = setup(keyed);
      f.admission.publishSucceeds();
      await settle();
      f.res.disconnect();
      await f.served();
      await settle();
      expect(f.admission.withdrawn).toEqual([]);
    });

    it('without a key, a client that left after its answer: nothing to withdraw', async () => {
      const f = setup(openAiWhole);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(answer);
      await f.served();
      f.res.disconnect();
      await settle();
      expect(f.admission.withdrawn).toEqual([]);
    });

    it("the first ends at its deadline without an answer: that 504 is the key's result, replayed to the waiting retry and to later ones", async () => {
      const f = setup(keyed);
      f.admission.publishSucceeds();
      await settle();
      const retry = f.retry(running);
      await settle();
      jest.advanceTimersByTime(DEADLINE_MS);
      expect(await retry.served()).toBe('served');
      expect(f.res.statusCode).toBe(504);
      expect(f.res.headers.get('x-should-retry')).toBeUndefined(); // the first 504 may be retried (with a new key)
      const later = f.retry(running);
      expect(await later.served()).toBe('served');
      for (const again of [retry, later]) {
        expect(again.res.statusCode).toBe(504);
        expect(error(again.res)).toMatchObject({
          code: 'deadline_exceeded',
          message: expect.stringContaining('a new attempt needs a new key'),
        });
        expect(again.res.headers.get('x-should-retry')).toBe('false');
        expect(again.res.headers.get('x-gateway-idempotent-replay')).toBe('true');
        expect(again.res.headers.get('x-gateway-action-id')).toBe(ACTION);
      }
      expect(await idempotentRetries(f)).toEqual({ waited: 1, cached: 1 });
    });

    it('the first publish fails: the waiting retry is answered, not left waiting', async () => {
      const f = setup(keyed);
      await settle();
      const retry = f.retry(running);
      await settle();
      f.admission.publishFails();
      expect(await retry.served()).toBe('served');
      expect(retry.res.statusCode).toBe(409);
      expect(f.res.statusCode).toBe(502);
    });

    it('a replayed error says x-should-retry: false (a retry with the key gets the same error again); the first answer did not', async () => {
      const f = setup(keyed);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(providerError);
      await f.served();
      expect(f.res.statusCode).toBe(502);
      expect(f.res.headers.get('x-should-retry')).toBeUndefined();
      const retry = f.retry(new IdempotentReplay(ACTION, false, false));
      expect(await retry.served()).toBe('served');
      expect(retry.res.statusCode).toBe(502);
      expect(error(retry.res).message).toContain('provider error 500');
      expect(retry.res.headers.get('x-gateway-idempotent-replay')).toBe('true');
      expect(retry.res.headers.get('x-should-retry')).toBe('false');
    });

    it('running, but not on this instance: 409 idempotency_key_in_progress with Retry-After, which an SDK retries', async () => {
      const f = setup(openAiWhole); // the first request here had no key: nothing expected here
      f.admission.publishSucceeds();
      await settle();
      const retry = f.retry(new IdempotentReplay('act-elsewhere', true, false));
      expect(await retry.served()).toBe('served');
      expect(retry.res.statusCode).toBe(409);
      expect(error(retry.res).code).toBe('idempotency_key_in_progress');
      expect(retry.res.headers.get('retry-after')).toBe('1');
      expect(retry.res.headers.get('x-should-retry')).toBe('true');
      expect(retry.res.headers.get('x-gateway-action-id')).toBe('act-elsewhere');
      expect(await idempotentRetries(f)).toEqual({ in_progress: 1 });
    });

    it(`at most ${MAX_WAITING_RETRIES} retries wait for one action; the next is told to come back`, async () => {
      const f = setup(keyed);
      f.admission.publishSucceeds();
      await settle();
      const waiting = Array.from({ length: MAX_WAITING_RETRIES }, () => f.retry(running));
      const extra = f.retry(running);
      expect(await extra.served()).toBe('served');
      expect(error(extra.res).code).toBe('idempotency_key_in_progress');
      expect(extra.res.headers.get('x-gateway-action-id')).toBe(ACTION);
      f.admission.reply(answer);
      for (const w of waiting) {
        expect(await w.served()).toBe('served');
        expect(JSON.parse(w.res.body)).toEqual(answer.body);
      }
    });

    it('a streamed first request is never replayed: 409 at once, no waiting', async () => {
      const f = setup(keyed);
      f.admission.publishSucceeds();
      await settle();
      const retry = f.retry(new IdempotentReplay(ACTION, true, true));
      expect(await retry.served()).toBe('served');
      expect(error(retry.res)).toMatchObject({
        code: 'idempotency_key_reused',
        message: expect.stringContaining('stream is not replayed'),
      });
      expect(await idempotentRetries(f)).toEqual({ streamed: 1 });
    });

    it('a waiting retry whose own client leaves is not written to when the answer comes', async () => {
      const f = setup(keyed);
      f.admission.publishSucceeds();
      await settle();
      const retry = f.retry(running);
      await settle();
      retry.res.disconnect();
      f.admission.reply(answer);
      expect(await retry.served()).toBe('served');
      expect(retry.res.body).toBe('');
      expect(retry.res.violations).toEqual([]);
      expect(JSON.parse(f.res.body)).toEqual(answer.body);
    });
  });

  describe('load shedding', () => {
    /** A LoadShedding fed, through a real ReplyRouter, `windows` windows in a row of replies that each queued `waitMs`. */
    const shedding = (metrics: AdmissionMetrics, waitMs: number, windows: number) => {
      const router = new ReplyRouter();
      const s = new LoadShedding(router, metrics, { admissionShed: { targetMs: 100, windowMs: 250 } });
      s.draw = () => 0; // any share above 0 refuses
      s.refusal(null); // opens the first window
      const later = new Date(NOW.getTime() + 60_000);
      // every batch sent now, each answered in a window of its own, one after the other
      const batches = Array.from({ length: windows }, (_, w) => Array.from({ length: 10 }, (__, i) => `w${w}-${i}`));
      const reply = {
        ...ONE_CANDIDATE_COUNTS,
        kind: 'error' as const,
        http_status: 502,
        code: 'upstream_error',
        message: 'x',
        attempt_id: null,
      };
      for (const id of batches.flat())
        router.listen(
          id,
          later,
          NOW,
          () => undefined,
          () => undefined,
        );
      jest.advanceTimersByTime(waitMs);
      for (const [w, ids] of batches.entries()) {
        for (const id of ids) {
          router.deliver(id, reply, 250 * w); // what dispatch held it: the rest of its wait is waitMs
          router.cancel(id);
        }
        jest.advanceTimersByTime(250);
      }
      return s;
    };

    it.each([openAiWhole, openAiStream])(
      'while commands queue past the target, a request is refused 503 service_unavailable before anything is reserved (%p)',
      async (build) => {
        jest.useFakeTimers({ now: NOW });
        const metrics = new AdmissionMetrics(new Metrics('test'));
        const f = setup(build, OPENAI_PATH, { shedding: shedding(metrics, 400, 3) });
        expect(await f.served()).toBe('served');
        expect(f.res.statusCode).toBe(503);
        expect(f.res.headers.get('retry-after')).toBe('1');
        expect(f.res.headers.get('x-should-retry')).toBe('true');
        expect(JSON.parse(f.res.body).error).toMatchObject({
          code: 'service_unavailable',
          message: expect.stringContaining('shedding load'),
        });
        expect(f.admission.admitted).toBe(0);
        expect(f.admission.dispatched).toBe(0);
        expect((await metrics.shed.get()).values[0].value).toBe(1);
        expect((await metrics.dispatchQueue.get()).values.find((v) => v.labels.le === 0.25)?.value).toBe(0);
        expect((await metrics.shedShare.get()).values[0].value).toBeGreaterThan(0);
        const latency = (await f.metrics.latency.get()).values as Array<{ labels: Record<string, string | number>; value: number }>;
        expect(latency.find((v) => v.labels.outcome === 'shed' && v.labels.le === '+Inf')?.value).toBe(1);
      },
    );

    it('quick replies refuse nothing, and the share falls back to 0 once the replies stop', async () => {
      jest.useFakeTimers({ now: NOW });
      const metrics = new AdmissionMetrics(new Metrics('test'));
      const quick = shedding(metrics, 20, 3);
      expect(quick.refusal(null)).toBeNull();
      const slow = shedding(metrics, 400, 3);
      expect(slow.refusal(null)).not.toBeNull();
      jest.advanceTimersByTime(20 * 250);
      expect(slow.refusal(null)).toBeNull();
    });

    it('a connection that asks again within its Retry-After has its next refusal held 250 ms; others, and later, at once', async () => {
      jest.useFakeTimers({ now: NOW });
      const metrics = new AdmissionMetrics(new Metrics('test'));
      const s = shedding(metrics, 400, 6); // the share at its 0.9, so it still refuses 2 s later
      const [a, b] = [{}, {}];
      expect(s.refusal(a)?.pauseMs).toBe(0);
      expect(s.refusal(b)?.pauseMs).toBe(0);
      expect(s.refusal(null)?.pauseMs).toBe(0);
      jest.advanceTimersByTime(999);
      expect(s.refusal(a)?.pauseMs).toBe(250);
      jest.advanceTimersByTime(1_000);
      expect(s.refusal(a)?.pauseMs).toBe(0);
    });

    it('the held refusal is written after its pause, and not at all to a client that left meanwhile', async () => {
      const refusal = { error: new DomainError('service_unavailable', 'shedding load', undefined, { 'retry-after': '1' }), pauseMs: 250 };
      const f = setup(openAiWhole, OPENAI_PATH, { shedding: { refusal: () => refusal } });
      expect(await f.served()).toBe('pending');
      jest.advanceTimersByTime(250);
      expect(await f.served()).toBe('served');
      expect(f.res.statusCode).toBe(503);
      const gone = setup(openAiWhole, OPENAI_PATH, { shedding: { refusal: () => refusal } });
      gone.res.disconnect();
      jest.advanceTimersByTime(250);
      expect(await gone.served()).toBe('served');
      expect(gone.res.body).toBe('');
      expect(f.admission.admitted + gone.admission.admitted).toBe(0);
    });
  });

  describe('a database that stops answering', () => {
    /** A promise the test ends; until then admission's work hangs, as on a stalled server. */
    const hung = () => {
      let end: (err?: Error) => void = () => undefined;
      const p = new Promise<void>((resolve, reject) => (end = (err) => (err ? reject(err) : resolve())));
      return { p, end };
    };
    const timeouts = async (f: ReturnType<typeof setup>) =>
      Object.fromEntries((await f.metrics.decideTimeouts.get()).values.map((v) => [String(v.labels.event), v.value]));

    it.each([openAiStream, openAiWhole])(
      'answers 503 service_unavailable with Retry-After once admission outlasts its limit; a late admission is never dispatched (%p)',
      async (build) => {
        const db = hung();
        const f = setup(build, OPENAI_PATH, { admitting: db.p, decideTimeoutMs: 2_000 });
        jest.advanceTimersByTime(1_999);
        expect(await f.served()).toBe('pending');
        jest.advanceTimersByTime(1);
        expect(await f.served()).toBe('served');
        expect(f.res.statusCode).toBe(503);
        expect(f.res.headers.get('retry-after')).toBe('1');
        expect(JSON.parse(f.res.body).error.code).toBe('service_unavailable');
        db.end(); // the server answers again and the reservation commits
        await settle();
        expect(f.admission.dispatched).toBe(0);
        expect(f.admission.router.pending).toBe(0);
        expect(f.res.violations).toEqual([]);
        expect(await timeouts(f)).toEqual({ timed_out: 1, admitted_late: 1 });
        // withdrawn at once: its slot and hold come back now, not a dispatch deadline later
        expect(f.admission.withdrawn).toEqual([ACTION]);
        expect(await withdrawals(f)).toEqual({ 'admitted_late/voided': 1 });
        expect(f.logs.filter((l) => l.msg.startsWith('admitted after the client was answered 503'))).toEqual([
          expect.objectContaining({ withdrawal: 'voided', msg: expect.stringContaining('withdrawn: its slot and hold are released') }),
        ]);
      },
    );

    it('a late admission the database cannot withdraw either is left to the sweep, and says so', async () => {
      const db = hung();
      const f = setup(openAiWhole, OPENAI_PATH, { admitting: db.p, decideTimeoutMs: 500 });
      f.admission.withdrawal = () => Promise.reject(new Error('Connection terminated unexpectedly'));
      jest.advanceTimersByTime(500);
      expect(await f.served()).toBe('served');
      db.end();
      await settle();
      expect(f.admission.withdrawn).toEqual([ACTION]);
      expect(await withdrawals(f)).toEqual({ 'admitted_late/error': 1 });
      expect(f.logs.filter((l) => l.msg.startsWith('admitted after the client was answered 503'))).toEqual([
        expect.objectContaining({ withdrawal: 'unknown', msg: expect.stringContaining('released by the dispatch-deadline sweep') }),
      ]);
    });

    it('a late failure is counted and answers nothing more', async () => {
      const db = hung();
      const f = setup(openAiWhole, OPENAI_PATH, { admitting: db.p, decideTimeoutMs: 500 });
      jest.advanceTimersByTime(500);
      expect(await f.served()).toBe('served');
      db.end(new Error('Connection terminated unexpectedly'));
      await settle();
      expect(f.res.statusCode).toBe(503);
      expect(f.res.violations).toEqual([]);
      expect(await timeouts(f)).toEqual({ timed_out: 1, failed_late: 1 });
    });

    it('an admission inside the limit is dispatched as ever, and its timer leaves no trace', async () => {
      const db = hung();
      const f = setup(openAiWhole, OPENAI_PATH, { admitting: db.p });
      jest.advanceTimersByTime(2_900); // the default limit is 3 s
      db.end();
      await settle();
      expect(f.admission.dispatched).toBe(1);
      jest.advanceTimersByTime(200);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply({ kind: 'response', http_status: 200, body: { choices: [] }, ...ONE_CANDIDATE_COUNTS });
      expect(await f.served()).toBe('served');
      expect(f.res.statusCode).toBe(200);
      expect(await timeouts(f)).toEqual({});
    });
  });

  describe('a failed publish: the action is withdrawn before the client is answered', () => {
    it.each([openAiStream, openAiWhole])('withdrawn: 502, nothing was sent, and an SDK may retry (%p)', async (build) => {
      const f = setup(build);
      await settle();
      f.admission.publishFails();
      expect(await f.served()).toBe('served');
      expect(f.admission.withdrawn).toEqual([ACTION]);
      expect(f.res.statusCode).toBe(502);
      expect(JSON.parse(f.res.body).error.message).toMatch(/nothing was sent to the provider and its reservation is released/);
      expect(f.res.headers.has('x-should-retry')).toBe(false);
      expect(await withdrawals(f)).toEqual({ 'publish_failed/voided': 1 });
      expect(f.logs.filter((l) => l.msg === 'dispatch publish failed')).toEqual([expect.objectContaining({ withdrawal: 'voided' })]);
    });

    // The publish only seemed to fail: the command reached the topic and a dispatcher took it.
    // An SDK retry would be a second paid call, so the answer says so and forbids it.
    it.each(['claimed', 'not_voidable'] as const)('a dispatcher took it first (%s): 502 with x-should-retry: false', async (outcome) => {
      const f = setup(openAiWhole);
      f.admission.withdrawal = async () => outcome;
      await settle();
      f.admission.publishFails();
      expect(await f.served()).toBe('served');
      expect(f.res.statusCode).toBe(502);
      expect(JSON.parse(f.res.body).error.message).toMatch(/it may still run and be billed; see GET \/v1\/actions\/act-1/);
      expect(f.res.headers.get('x-should-retry')).toBe('false');
    });

    it('the withdrawal does not answer within the decide limit: the client is answered anyway, not to retry', async () => {
      const f = setup(openAiStream, OPENAI_PATH, { decideTimeoutMs: 1_000 });
      let finish: (o: VoidOutcome) => void = () => undefined;
      f.admission.withdrawal = () => new Promise((resolve) => (finish = resolve));
      await settle();
      f.admission.publishFails();
      expect(await f.served()).toBe('pending');
      jest.advanceTimersByTime(1_000);
      expect(await f.served()).toBe('served');
      expect(f.res.statusCode).toBe(502);
      expect(JSON.parse(f.res.body).error.message).toMatch(/released after the dispatch deadline/);
      expect(f.res.headers.get('x-should-retry')).toBe('false');
      finish('voided'); // the database answers later: counted, nothing more written
      await settle();
      expect(await withdrawals(f)).toEqual({ 'publish_failed/voided': 1 });
      expect(f.res.violations).toEqual([]);
    });

    it('the withdrawal fails: the same answer, and the error is logged', async () => {
      const f = setup(openAiWhole);
      f.admission.withdrawal = () => Promise.reject(new Error('Connection terminated unexpectedly'));
      await settle();
      f.admission.publishFails();
      expect(await f.served()).toBe('served');
      expect(f.res.headers.get('x-should-retry')).toBe('false');
      expect(await withdrawals(f)).toEqual({ 'publish_failed/error': 1 });
      expect(f.logs.filter((l) => l.msg === 'withdrawing an admitted action failed')).toHaveLength(1);
    });
  });

  describe('a stream whose client is gone: dispatch is told to stop relaying it', () => {
    it('the client leaves mid-stream: one stop, after the command is out; nothing to withdraw (a chunk came: it runs)', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '{"a":1}'));
      f.res.disconnect();
      f.res.disconnect(); // a second close changes nothing
      expect(await f.served()).toBe('served');
      await settle();
      expect(f.admission.relayStops).toEqual([`${ACTION}/client_left`]);
      expect(f.admission.withdrawn).toEqual([]);
      expect(f.admission.router.pending).toBe(0);
    });

    it('gone before any chunk, while the command is being published: once it is out, withdrawn if no dispatcher took it, no stop', async () => {
      const f = setup(openAiStream);
      await settle();
      f.res.disconnect();
      await settle();
      expect(f.admission.withdrawn).toEqual([]);
      f.admission.publishSucceeds();
      await settle();
      expect(f.admission.withdrawn).toEqual([ACTION]);
      expect(await withdrawals(f)).toEqual({ 'client_left_queued/voided': 1 });
      expect(f.admission.relayStops).toEqual([]); // nothing will run
    });

    it('gone before any chunk, but a dispatcher took it already: the stop goes out instead', async () => {
      const f = setup(openAiStream);
      f.admission.withdrawal = async () => 'claimed';
      f.admission.publishSucceeds();
      await settle();
      f.res.disconnect();
      await settle();
      expect(await withdrawals(f)).toEqual({ 'client_left_queued/claimed': 1 });
      expect(f.admission.relayStops).toEqual([`${ACTION}/client_left`]);
    });

    it('the publish fails: nothing runs, no stop', async () => {
      const f = setup(openAiStream);
      await settle();
      f.res.disconnect();
      f.admission.publishFails();
      await settle();
      expect(f.admission.relayStops).toEqual([]);
    });

    it('a stream that ended, and a whole answer whose client left, send none', async () => {
      const ended = setup(openAiStream);
      ended.admission.publishSucceeds();
      await settle();
      ended.admission.reply(chunk(0, '{"a":1}'));
      ended.admission.reply(end(1, true));
      expect(await ended.served()).toBe('served');
      ended.res.disconnect();
      const whole = setup(openAiWhole);
      whole.admission.publishSucceeds();
      await settle();
      whole.res.disconnect();
      await whole.served();
      expect(ended.admission.relayStops.concat(whole.admission.relayStops)).toEqual([]);
    });
  });

  describe('a stream client that stops reading', () => {
    const piece = JSON.stringify('x'.repeat(64 * 1024));

    it(`is cut once more than ${STREAM_CLIENT_BACKLOG_MAX_BYTES} bytes wait for it; nothing more is written, the listening stops`, async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, piece));
      f.res.reading = false;
      let seq = 1;
      while (!f.res.destroyed && seq < 1000) f.admission.reply(chunk(seq++, piece));
      expect(f.res.destroyed).toBe(true);
      expect(f.res.writableLength).toBeGreaterThan(STREAM_CLIENT_BACKLOG_MAX_BYTES);
      expect(seq).toBeLessThan(200); // ~8 MiB of 64 KiB pieces, not the whole stream
      expect(await f.served()).toBe('served');
      expect(f.admission.router.pending).toBe(0);
      expect(f.admission.reply(chunk(seq, piece))).toBe(false);
      expect(f.res.violations).toEqual([]);
      expect(f.logs.filter((l) => l.msg.startsWith('stream client does not read its answer'))).toHaveLength(1);
      expect((await f.metrics.slowStreamClients.get()).values).toEqual([
        expect.objectContaining({ labels: { bound: 'stream' }, value: 1 }),
      ]);
      expect(f.admission.relayStops).toEqual([`${ACTION}/client_too_slow`]);
    });

    it("the instance's bound on all streams cuts one below its own bound (the largest; the arithmetic: stream-backlogs.spec)", async () => {
      const backlogs = new StreamBacklogs(2 * 1024 * 1024);
      const f = setup(openAiStream, OPENAI_PATH, { backlogs });
      f.admission.publishSucceeds();
      await settle();
      f.res.reading = false;
      let seq = 0;
      while (!f.res.destroyed && seq < 1000) f.admission.reply(chunk(seq++, piece));
      expect(f.res.destroyed).toBe(true);
      expect(f.res.writableLength).toBeGreaterThan(2 * 1024 * 1024);
      expect(f.res.writableLength).toBeLessThan(STREAM_CLIENT_BACKLOG_MAX_BYTES);
      expect(await f.served()).toBe('served');
      expect(f.admission.router.pending).toBe(0);
      expect(backlogs.total).toBe(0); // the cut stream is forgotten
      expect(f.logs.filter((l) => l.msg.startsWith('stream client does not read its answer'))).toEqual([
        expect.objectContaining({ bound: 'instance', limit_bytes: 2 * 1024 * 1024 }),
      ]);
      expect((await f.metrics.slowStreamClients.get()).values).toEqual([
        expect.objectContaining({ labels: { bound: 'instance' }, value: 1 }),
      ]);
    });

    it('a stream that ends, however it ends, leaves the instance-wide count', async () => {
      const backlogs = new StreamBacklogs(64 * 1024 * 1024);
      const f = setup(openAiStream, OPENAI_PATH, { backlogs });
      f.admission.publishSucceeds();
      await settle();
      f.res.reading = false;
      for (let seq = 0; seq < 10; seq++) f.admission.reply(chunk(seq, piece));
      expect(backlogs.total).toBeGreaterThan(0);
      f.res.disconnect();
      expect(await f.served()).toBe('served');
      expect(backlogs.total).toBe(0);
    });

    it('chunks held back for a lost one count too: the stream is cut, not kept whole in memory', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      let seq = 1; // seq 0 never comes
      while (!f.res.destroyed && seq < 1000) f.admission.reply(chunk(seq++, piece));
      expect(f.res.destroyed).toBe(true);
      expect(seq).toBeLessThan(200);
    });

    it('a client that reads is never cut, however long the stream; a duplicate chunk is written once', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      for (let seq = 0; seq < 300; seq++) f.admission.reply(chunk(seq, piece));
      f.admission.reply(chunk(5, '"again"'));
      f.admission.reply(end(300, true));
      expect(await f.served()).toBe('served');
      expect(f.res.destroyed).toBe(false);
      expect(f.res.events()).toHaveLength(301); // 300 chunks and [DONE]
    });
  });

  describe('client disconnect', () => {
    /** `gateway_admission_request_duration_seconds` samples by outcome. */
    const outcomes = async (f: { metrics: AdmissionMetrics }) =>
      Object.fromEntries(
        (await f.metrics.latency.get()).values
          .filter((v) => v.metricName?.endsWith('_count'))
          .map((v) => [String(v.labels.outcome), v.value]),
      );
    const hung = () => {
      let end: () => void = () => undefined;
      return { p: new Promise<void>((resolve) => (end = resolve)), end: () => end() };
    };

    it.each([
      ['a whole request', openAiWhole],
      ['a stream', openAiStream],
      ['a keyed request', () => ({ ...openAiWhole(), idempotencyKey: 'retry-me' })],
    ])('%s whose client left while it was admitted is never dispatched: withdrawn at once, nothing written', async (_, build) => {
      const db = hung();
      const f = setup(build, OPENAI_PATH, { admitting: db.p });
      f.res.disconnect(); // its own timeout fired while admission waited for the budget row
      db.end(); // the reservation commits
      expect(await f.served()).toBe('served');
      expect(f.admission.admitted).toBe(1);
      expect(f.admission.dispatched).toBe(0);
      expect(f.admission.router.pending).toBe(0);
      // its slot, its hold and its Idempotency-Key come back now, not a dispatch deadline later
      expect(f.admission.withdrawn).toEqual([ACTION]);
      expect(await withdrawals(f)).toEqual({ 'client_left/voided': 1 });
      expect(await outcomes(f)).toEqual({ client_left: 1 });
      expect(f.cache.get(ACTION)).toBeNull();
      expect(f.res.body).toBe('');
      expect(f.res.headersSent).toBe(false);
      expect(f.res.violations).toEqual([]);
      expect(f.logs.filter((l) => l.msg.startsWith('client left before dispatch'))).toEqual([
        expect.objectContaining({ action_id: ACTION, withdrawal: 'voided', msg: expect.stringContaining('withdrawn') }),
      ]);
    });

    it('a withdrawal that fails leaves the action to the sweep, still undispatched, and says so', async () => {
      const db = hung();
      const f = setup(openAiWhole, OPENAI_PATH, { admitting: db.p });
      f.admission.withdrawal = () => Promise.reject(new Error('Connection terminated unexpectedly'));
      f.res.disconnect();
      db.end();
      expect(await f.served()).toBe('served');
      expect(f.admission.dispatched).toBe(0);
      expect(await withdrawals(f)).toEqual({ 'client_left/error': 1 });
      expect(f.logs.filter((l) => l.msg.startsWith('client left before dispatch'))).toEqual([
        expect.objectContaining({ withdrawal: 'unknown', msg: expect.stringContaining('released by the dispatch-deadline sweep') }),
      ]);
    });

    it.each([openAiWhole, openAiStream])(
      'a client that leaves while its admission waits for its statement: dropped, nothing reserved, nothing to withdraw (%p)',
      async (build) => {
        const db = hung();
        const f = setup(build, OPENAI_PATH, { admitting: db.p, queued: true });
        f.res.disconnect();
        expect(await f.served()).toBe('served');
        db.end();
        await settle();
        expect(f.admission.admitted).toBe(0);
        expect(f.admission.dispatched).toBe(0);
        expect(f.admission.withdrawn).toEqual([]);
        expect(await outcomes(f)).toEqual({ client_left: 1 });
        expect(f.res.body).toBe('');
        expect(f.res.violations).toEqual([]);
        expect(f.logs.filter((l) => l.level >= 50)).toEqual([]); // not an error
      },
    );

    it('a client already gone when its request is served is not even admitted: no reservation, no withdrawal', async () => {
      const f = setup(openAiWhole, OPENAI_PATH, { clientGone: true });
      expect(await f.served()).toBe('served');
      expect(f.admission.admitted).toBe(0);
      expect(f.admission.dispatched).toBe(0);
      expect(f.admission.withdrawn).toEqual([]);
      expect(await outcomes(f)).toEqual({ client_left: 1 });
      expect(f.res.violations).toEqual([]);
    });

    it('stops listening and writes nothing more', async () => {
      const f = setup(openAiStream);
      f.admission.publishSucceeds();
      await settle();
      f.admission.reply(chunk(0, '"a"'));
      f.res.disconnect();
      expect(await f.served()).toBe('served');
      expect(f.admission.router.pending).toBe(0);
      expect(f.admission.reply(chunk(1, '"b"'))).toBe(false);
      expect(f.res.events()).toEqual(['"a"']);
      expect(f.res.violations).toEqual([]);
    });
  });

  describe('exactly one answer, whatever order the deadline, a failed publish, a reply and a disconnect come in', () => {
    // Regression (issue 7, item 1): with the broker down, the deadline answered 504 and then the
    // failed publish wrote a second denial: ERR_HTTP_HEADERS_SENT, and the process exited.
    it.each([openAiStream, openAiWhole])('the deadline, then the publish fails (%p)', async (build) => {
      const f = setup(build);
      await settle();
      jest.advanceTimersByTime(DEADLINE_MS);
      await settle();
      f.admission.publishFails();
      expect(await f.served()).toBe('served');
      expect(f.res.violations).toEqual([]);
      expect(f.res.statusCode).toBe(504);
      expect(JSON.parse(f.res.body).error.code).toBe('deadline_exceeded');
      expect(f.lateEvents()).toEqual([expect.objectContaining({ cause: 'publish failed', answered: 'deadline_exceeded' })]);
    });

    type Event = 'deadline' | 'publish fails' | 'reply' | 'disconnect';
    const fire: Record<Event, (f: ReturnType<typeof setup>) => void> = {
      deadline: () => jest.advanceTimersByTime(DEADLINE_MS),
      'publish fails': (f) => f.admission.publishFails(),
      reply: (f) => f.admission.reply(providerError),
      disconnect: (f) => f.res.disconnect(),
    };
    const expected: Record<Event, { status: number; body: string | null }> = {
      deadline: { status: 504, body: 'before the deadline' },
      'publish fails': { status: 502, body: 'could not be dispatched' },
      reply: { status: 502, body: 'provider error 500' },
      disconnect: { status: 200, body: null },
    };
    const orders = (events: Event[]): Event[][] =>
      events.length <= 1
        ? [events]
        : events.flatMap((e, i) => orders([...events.slice(0, i), ...events.slice(i + 1)]).map((rest) => [e, ...rest]));

    const openAiKeyed = () =>
      fromOpenAiChat({ model: 'approved-standard', messages: [{ role: 'user', content: 'hi' }] }, 'key', 'idem-order');
    it.each(
      orders(['deadline', 'publish fails', 'reply', 'disconnect']).flatMap((o) => [
        { order: o, stream: true, key: false },
        { order: o, stream: false, key: false },
        { order: o, stream: false, key: true },
      ]),
    )('$order (stream: $stream, Idempotency-Key: $key)', async ({ order, stream, key }) => {
      const f = setup(stream ? openAiStream : key ? openAiKeyed : openAiWhole);
      await settle();
      for (const e of order) {
        fire[e](f);
        await settle();
      }
      expect(await f.served()).toBe('served');
      expect(f.res.violations).toEqual([]);
      const first = expected[order[0]];
      expect(f.res.statusCode).toBe(first.status);
      if (first.body === null) expect(f.res.body).toBe('');
      else expect(JSON.parse(f.res.body).error.message).toContain(first.body);
      expect(f.admission.router.pending).toBe(0);
      expect(f.cache.wait(ACTION)).toBe('not_here');
      expect(f.admission.relayStops).toEqual([]); // the command never went out: nothing runs to stop
      expect(Object.keys(await withdrawals(f))).toEqual(['publish_failed/voided']); // once, for the failed publish
    });
  });
});
