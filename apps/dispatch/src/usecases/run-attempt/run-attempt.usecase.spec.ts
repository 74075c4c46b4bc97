import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { Agent, Dispatcher, MockAgent } from 'undici';
import {
  DispatchCommandV1,
  DispatchReplyV1,
  dispatchReplyV1,
  recipientPartition,
  ReplyAddress,
  TopicKey,
  TopicPayload,
  Topics,
} from '@gateway/contracts';
import type { AttemptOutcome, ClaimInput, ClaimResult, ExtraAttemptInput, ExtraAttemptResult } from '@gateway/db';
import type { LateEvidence } from '@gateway/contracts';
import { ContentCipher, PermanentPublishError } from '@gateway/messaging';
import { HedgePolicyRevision, InvalidTransitionError } from '@gateway/domain';
import { Clock, Metrics, randomIds, ServiceConfig } from '@gateway/service-kit';
import { eventually, hedgeSettings } from '@gateway/testing';
import { UpstreamCredentials } from '@gateway/providers';
import { DispatchMetrics } from '../../dispatch.metrics';
import type { PauseSource } from '../../hedging/hedge-policies';
import type { PauseStore } from '../../hedging/pause-evaluator';
import { dispatchCommand } from './dispatch-command.fixture';
import type { AttemptStore, ReplyPublisher } from './ports';
import { RELAY_STOP_TTL_MS, RelayStops } from './relay-stops';
import { CLIENT_REQUEST_ID_HEADER, REFUSAL_LOG_WINDOW_MS, RunAttempt } from './run-attempt.usecase';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const ADMISSION_1: ReplyAddress = { instanceId: 'admission-1', topic: 'dispatchReplies' };
const ORIGIN = 'http://upstream.example';
const OPENAI_PATH = '/v1/chat/completions';
const GEMINI_STREAM_PATH = '/v1beta/models/model-x:streamGenerateContent?alt=sse';
const RESPONSES_PATH = '/v1/responses';
const TEXT = 'naïve 日本 🚀 café — ∑ ✓';

const CONFIG: ServiceConfig = {
  serviceName: 'dispatch',
  instanceId: 'dispatch-1',
  databaseUrl: 'postgres://unused',
  kafkaBrokers: [],
  logLevel: 'silent',
  host: '127.0.0.1',
};

/** Claims and completions in memory; the claim answer and completion failures are scripted. */
class FakeAttemptStore implements AttemptStore {
  claimAnswer: ClaimResult = { ok: true };
  readonly claims: ClaimInput[] = [];
  /** the serialised admission's answers, in order (then: ok) */
  extraAnswers: ExtraAttemptResult[] = [];
  readonly extra: ExtraAttemptInput[] = [];
  readonly winnerCalls: string[] = [];
  winnerAttemptId: string | null = null;

  /** the next `extraFailures` admissions throw `failWith` */
  extraFailures = 0;

  async admitExtraAttempt(input: ExtraAttemptInput): Promise<ExtraAttemptResult> {
    this.extra.push(input);
    if (this.extraFailures > 0) {
      this.extraFailures -= 1;
      throw this.failWith;
    }
    const answer = this.extraAnswers.shift() ?? { ok: true, attemptsTotal: this.extra.length + 1 };
    if (answer.ok && this.winnerAttemptId !== null) return { ok: false, reason: 'winner_chosen' };
    return answer;
  }

  /** the next `winnerFailures` compare-and-set runs throw `failWith` */
  winnerFailures = 0;

  async chooseWinner(input: { actionId: string; attemptId: string; now: Date }): Promise<{ won: boolean; winnerAttemptId: string | null }> {
    this.winnerCalls.push(input.attemptId);
    if (this.winnerFailures > 0) {
      this.winnerFailures -= 1;
      throw this.failWith;
    }
    if (this.winnerAttemptId === null) this.winnerAttemptId = input.attemptId;
    return { won: this.winnerAttemptId === input.attemptId, winnerAttemptId: this.winnerAttemptId };
  }
  /** late evidence offered, by attempt; `caseForLateEvidence` null: no open case takes it */
  readonly offered = new Map<string, LateEvidence>();
  caseForLateEvidence: string | null = 'case-1';

  /** set: the offer fails with it (the database gone at that moment) */
  offerFailsWith: Error | null = null;

  async offerLateEvidence(attemptId: string, evidence: LateEvidence): Promise<string | null> {
    if (this.offerFailsWith) throw this.offerFailsWith;
    if (this.caseForLateEvidence) this.offered.set(attemptId, evidence);
    return this.caseForLateEvidence;
  }

  readonly completed: AttemptOutcome[] = [];
  /** the next `failures` completion runs throw `failWith` */
  failures = 0;
  failWith: Error = new Error('Connection terminated unexpectedly');
  runs = 0;

  /** runs while the claim is being written (a test moves the clock here) */
  whileClaiming: () => void = () => undefined;

  async claim(input: ClaimInput): Promise<ClaimResult> {
    this.claims.push(input);
    this.whileClaiming();
    return this.claimAnswer;
  }

  async complete(outcome: AttemptOutcome): Promise<'recorded'> {
    this.runs += 1;
    if (this.failures > 0) {
      this.failures -= 1;
      throw this.failWith;
    }
    this.completed.push(outcome);
    return 'recorded';
  }
}

/** Keeps what would go to Kafka, validated against the topic schema as the real bus does. */
class FakeReplyBus implements ReplyPublisher {
  readonly sent: Array<{ topic: TopicKey; key: string; value: unknown; partition?: number; headers?: Record<string, string> }> = [];
  /** messages whose JSON is longer than this are refused as the broker refuses them */
  maxMessageBytes = Infinity;
  /** called after each message is taken (a test reacts to what was sent) */
  afterSend: (sent: number) => void = () => undefined;

  async publish<K extends TopicKey>(
    topic: K,
    messages: Array<{ key: string; value: TopicPayload<K>; partition?: number; headers?: Record<string, string> }>,
  ): Promise<void> {
    if (messages.some((m) => JSON.stringify(m.value).length > this.maxMessageBytes)) {
      throw new PermanentPublishError('MESSAGE_TOO_LARGE', new Error('The request included a message larger than the max message size'));
    }
    for (const m of messages) {
      this.sent.push({ topic, key: m.key, value: Topics[topic].schema.parse(m.value), partition: m.partition, headers: m.headers });
      this.afterSend(this.sent.length);
    }
  }
}

/**
 * Delivers every response body in pieces of at most `size` bytes, one per macrotask, so the reader
 * gets them as separate reads (pieces pushed in one tick would be read together).
 */
const readsOf =
  (size: number): Dispatcher.DispatcherComposeInterceptor =>
  (dispatch) =>
  (opts, handler) => {
    let delivered = Promise.resolve();
    const later = (step: () => void) => {
      delivered = delivered.then(() => new Promise<void>((resolve) => setImmediate(() => resolve(step()))));
    };
    return dispatch(opts, {
      onRequestStart: (c, ctx) => handler.onRequestStart?.(c, ctx),
      onResponseStart: (c, status, headers, message) => handler.onResponseStart?.(c, status, headers, message),
      onResponseData: (c, chunk) => {
        for (let i = 0; i < chunk.length; i += size) {
          const piece = chunk.subarray(i, i + size);
          later(() => handler.onResponseData?.(c, piece));
        }
      },
      onResponseEnd: (c, trailers) => later(() => handler.onResponseEnd?.(c, trailers)),
      onResponseError: (c, err) => later(() => handler.onResponseError?.(c, err)),
    });
  };

/** Delivers the first `bytes` bytes of the body, then fails the connection (a stream cut mid-way). */
const cutAfter =
  (bytes: number): Dispatcher.DispatcherComposeInterceptor =>
  (dispatch) =>
  (opts, handler) =>
    dispatch(opts, {
      onRequestStart: (c, ctx) => handler.onRequestStart?.(c, ctx),
      onResponseStart: (c, status, headers, message) => handler.onResponseStart?.(c, status, headers, message),
      onResponseData: (c, chunk) => {
        handler.onResponseData?.(c, chunk.subarray(0, bytes));
        handler.onResponseError?.(c, Object.assign(new Error('other side closed'), { name: 'SocketError' }));
      },
      onResponseEnd: () => undefined,
      onResponseError: (c, err) => handler.onResponseError?.(c, err),
    });

/** An answer's text, distinctive enough that finding it anywhere in a log line means it leaked. */
const ANSWER_TEXT = 'the-answer-text-7Qz';

/** What an answer without billable detail reports beside its counts. */
const NO_DETAIL = {
  cache_write_input_tokens: 0,
  audio_input_tokens: 0,
  audio_output_tokens: 0,
  image_output_tokens: 0,
  service_tier: 'default',
  feature_calls: {},
};

/** A logger at `level` whose lines land, parsed, in `lines`. */
function capturedLog(level: pino.Level) {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, log: pino({ level }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) }) };
}

/** The completion write finds the attempt already ended: the orphan sweep cut it first. */
function sweptFirst(f: { store: FakeAttemptStore }): void {
  f.store.failures = 1;
  f.store.failWith = new InvalidTransitionError('attempt', 'not in_flight', 'succeed');
}

/** `gateway_dispatch_refused_total` for one reason. */
const refused = async (m: DispatchMetrics, reason: string) => (await m.refused.get()).values.find((v) => v.labels.reason === reason)?.value;

function setup(
  interceptor?: Dispatcher.DispatcherComposeInterceptor,
  env: Record<string, string> = {},
  policy: HedgePolicyRevision | null = null,
  pauses: (PauseSource & PauseStore) | null = null,
  log: pino.Logger = pino({ level: 'silent' }),
  config: ServiceConfig = CONFIG,
  realUpstream?: Dispatcher,
  relayStops = new RelayStops(),
) {
  const agent = new MockAgent();
  agent.disableNetConnect();
  const store = new FakeAttemptStore();
  const bus = new FakeReplyBus();
  const cipher = new ContentCipher(Buffer.alloc(32, 7));
  let nowMs = NOW.getTime();
  const clock: Clock = { now: () => new Date(nowMs) };
  const upstream: Dispatcher = realUpstream ?? (interceptor ? agent.compose(interceptor) : agent);
  const metrics = new DispatchMetrics(new Metrics('test'));
  const run = new RunAttempt(
    store,
    bus,
    cipher,
    metrics,
    upstream,
    config,
    log,
    clock,
    randomIds,
    new UpstreamCredentials(env),
    { hedgePolicyFor: async () => policy },
    pauses,
    relayStops,
  );
  run.evidenceRetry = { baseMs: 1, capMs: 4 };
  const replies = (): DispatchReplyV1[] =>
    bus.sent.map((m) => {
      const envelope = Topics.dispatchReplies.schema.parse(m.value);
      expect(envelope.reply_to).toBe('admission-1');
      return dispatchReplyV1.parse(cipher.decrypt(envelope.body, envelope.action_id));
    });
  const attempt = async (cmd: DispatchCommandV1) => {
    const { done } = await run.execute(cmd, ADMISSION_1);
    await done;
  };
  const advance = (ms: number) => (nowMs += ms);
  return { agent, pool: agent.get(ORIGIN), store, bus, replies, attempt, run, advance, metrics, relayStops, nowMs: () => nowMs };
}

const openAiCommand = (over: Partial<DispatchCommandV1> = {}) =>
  dispatchCommand(
    { requested_candidates: null, effective_candidates: 1, request: { messages: [{ role: 'user', content: 'hi' }] }, ...over },
    'openai-chat',
  );

const USAGE = { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 };

function openAiChunks(text: string, opts: { usage?: boolean; done?: boolean } = {}): string[] {
  const base = { id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'model-x' };
  const pieces = text.split(/(?<= )/);
  const events = [
    { ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }], usage: null },
    ...pieces.map((p) => ({ ...base, choices: [{ index: 0, delta: { content: p }, finish_reason: null }], usage: null })),
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage: null },
    ...(opts.usage === false ? [] : [{ ...base, choices: [], usage: USAGE }]),
  ].map((e) => JSON.stringify(e));
  return opts.done === false ? events : [...events, '[DONE]'];
}

const sse = (payloads: string[], eol = '\n'): string => payloads.map((p) => `data: ${p}${eol}${eol}`).join('');

/** The text a client assembles from the forwarded OpenAI chunks. */
function openAiText(replies: DispatchReplyV1[]): string {
  return replies
    .filter((r): r is Extract<DispatchReplyV1, { kind: 'stream_chunk' }> => r.kind === 'stream_chunk')
    .map((r) => (JSON.parse(r.data) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content ?? '')
    .join('');
}

const last = <T>(xs: T[]): T => xs[xs.length - 1];

/** The provider answers one whole, successful completion. */
const answered = (f: ReturnType<typeof setup>) =>
  f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, {
    id: 'chatcmpl-1',
    choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
    usage: USAGE,
  });

describe('RunAttempt', () => {
  describe('before the upstream call', () => {
    it('refuses an expired command: no claim, no call, no reply', async () => {
      const f = setup();
      await f.attempt(openAiCommand({ dispatch_deadline: NOW.toISOString() }));
      expect(f.store.claims).toHaveLength(0);
      expect(f.bus.sent).toHaveLength(0);
    });

    it('a replay of expired commands: each counted, one warn line for the burst, its size logged at the window end or on shutdown', async () => {
      const { lines, log } = capturedLog('warn');
      const f = setup(undefined, {}, null, null, log);
      const expired = (i: number) => openAiCommand({ action_id: `act-${i}`, dispatch_deadline: NOW.toISOString() });
      for (let i = 0; i < 500; i += 1) await f.attempt(expired(i));
      expect(await refused(f.metrics, 'expired')).toBe(500);
      expect(lines).toEqual([expect.objectContaining({ msg: 'refusing expired dispatch command', action_id: 'act-0' })]);
      f.advance(REFUSAL_LOG_WINDOW_MS); // the next one opens a new window: the burst's size first, then its own line
      await f.attempt(expired(500));
      expect(lines.slice(1)).toEqual([
        expect.objectContaining({ action_id: 'act-499', more: 499, msg: expect.stringContaining('499 more within 10 s') }),
        expect.objectContaining({ action_id: 'act-500', msg: 'refusing expired dispatch command' }),
      ]);
      await f.attempt(expired(501));
      f.run.beforeApplicationShutdown();
      expect(lines.slice(3)).toEqual([expect.objectContaining({ action_id: 'act-501', more: 1 })]);
      expect(lines.every((l) => l.level === 40)).toBe(true);
      expect(f.store.claims).toHaveLength(0);
    });

    it.each([false, true])(
      'a claim that outlasted the deadline (stream %s): nothing sent upstream, the attempt ends without usage, a 504',
      async (stream) => {
        const f = setup(); // no interceptor: a call would be refused by the mock agent and recorded as a connection failure
        const cmd = openAiCommand({ stream });
        f.store.whileClaiming = () => f.advance(new Date(cmd.deadline).getTime() - NOW.getTime()); // a stalled database
        await f.attempt(cmd);
        expect(f.store.claims).toHaveLength(1);
        expect(f.store.completed).toEqual([
          expect.objectContaining({
            status: 'usage_missing',
            statusReason: 'not sent: the deadline passed while the claim was written',
            httpStatus: null,
            usage: null,
          }),
        ]);
        expect(f.replies()).toEqual([expect.objectContaining({ kind: 'error', http_status: 504, code: 'deadline_exceeded' })]);
      },
    );

    it('claims that outlasted their deadlines in a burst: one warn line for the first, then how many more', async () => {
      const { lines, log } = capturedLog('warn');
      const f = setup(undefined, {}, null, null, log);
      f.store.whileClaiming = () => f.advance(1_000);
      for (let i = 0; i < 3; i += 1) {
        const now = f.advance(0);
        const at = (ms: number) => new Date(now + ms).toISOString();
        await f.attempt(openAiCommand({ action_id: `act-${i}`, dispatch_deadline: at(500), deadline: at(1_000) }));
      }
      expect(f.store.completed).toHaveLength(3);
      f.run.beforeApplicationShutdown();
      expect(lines).toEqual([
        expect.objectContaining({ action_id: 'act-0', msg: 'claimed after the deadline; nothing sent upstream' }),
        expect.objectContaining({ action_id: 'act-2', more: 2 }),
      ]);
    });

    it('a claim that returns a moment before the deadline still sends', async () => {
      const f = setup();
      answered(f);
      const cmd = openAiCommand();
      f.store.whileClaiming = () => f.advance(new Date(cmd.deadline).getTime() - NOW.getTime() - 1);
      await f.attempt(cmd);
      expect(f.store.completed).toEqual([expect.objectContaining({ status: 'succeeded' })]);
    });

    it("each reply says how long dispatch held the command (held_ms), so admission can tell its queue from the provider's time", async () => {
      const f: ReturnType<typeof setup> = setup((dispatch) => (opts, handler) => {
        f.advance(250); // the provider takes 250 ms
        return dispatch(opts, handler);
      });
      answered(f);
      f.store.whileClaiming = () => f.advance(40); // the claim takes 40
      await f.attempt(openAiCommand());
      const [sent] = f.bus.sent;
      expect(Topics.dispatchReplies.schema.parse(sent.value).held_ms).toBe(290);
    });

    it('a route naming a credential the gateway cannot resolve: no claim, no call, a 502 upstream_credential_missing', async () => {
      const f = setup(undefined, { GATEWAY_CREDENTIAL_OTHER: 'sk-other' });
      // No interceptor: a call would be refused by the mock agent and recorded as an attempt.
      const cmd = openAiCommand();
      await f.attempt({ ...cmd, route: { ...cmd.route, credential_ref: 'OPENAI' } });
      expect(f.store.claims).toHaveLength(0);
      expect(f.store.completed).toHaveLength(0);
      const [refusal] = f.replies();
      expect(refusal).toMatchObject({ kind: 'error', http_status: 502, code: 'upstream_credential_missing', attempt_id: null });
      expect(refusal.kind === 'error' && refusal.message).toContain('OPENAI');
      expect(refusal.kind === 'error' && refusal.message).not.toContain('sk-other');
    });

    it.each([
      ['openai-chat', OPENAI_PATH, 'authorization', 'Bearer sk-canary-1'],
      ['gemini-generate', '/v1beta/models/model-x:generateContent', 'x-goog-api-key', 'sk-canary-1'],
    ] as const)('%s: sends the named credential in the provider header', async (kind, path, header, value) => {
      const f = setup(undefined, { GATEWAY_CREDENTIAL_UPSTREAM_A: 'sk-canary-1' });
      const cmd = dispatchCommand({ requested_candidates: null, effective_candidates: 1 }, kind);
      f.pool.intercept({ path, method: 'POST', headers: { [header]: value } }).reply(400, { error: { code: 'x', status: 'x' } });
      await f.attempt({ ...cmd, route: { ...cmd.route, credential_ref: 'UPSTREAM_A' } });
      expect(f.store.completed).toHaveLength(1);
      expect(f.replies()[0]).toMatchObject({ kind: 'error', code: 'upstream_error' });
    });

    it.each([
      ['openai-chat', OPENAI_PATH, false],
      ['openai-chat', OPENAI_PATH, true],
      ['gemini-generate', '/v1beta/models/model-x:generateContent', false],
    ] as const)('%s (stream %s): sends the attempt id upstream as x-client-request-id', async (kind, path, stream) => {
      const f = setup();
      const seen: string[] = [];
      const cmd = dispatchCommand({ requested_candidates: null, effective_candidates: 1, stream }, kind);
      f.pool
        .intercept({
          path: (p: string) => p.startsWith(stream ? '/v1/chat/completions' : path),
          method: 'POST',
          headers: (h: Record<string, string>) => {
            seen.push(h[CLIENT_REQUEST_ID_HEADER]);
            return true;
          },
        })
        .reply(400, { error: { code: 'x', status: 'x' } });
      await f.attempt(cmd);
      expect(f.store.claims).toHaveLength(1);
      // (the matcher may run more than once for one request)
      expect([...new Set(seen)]).toEqual([f.store.claims[0].attemptId]);
    });

    it('sends nothing when the single-use claim is refused (a redelivered command)', async () => {
      const f = setup();
      f.store.claimAnswer = { ok: false, reason: 'already_claimed' };
      // No interceptor: a call would fail the test with MockNotMatchedError in the reply.
      await f.attempt(openAiCommand());
      expect(f.store.claims).toEqual([
        expect.objectContaining({ actionId: 'act-1', attemptNo: 1, role: 'primary', claimedBy: 'dispatch-1' }),
      ]);
      expect(f.store.completed).toHaveLength(0);
      expect(f.bus.sent).toHaveLength(0);
    });
  });

  describe('a whole response', () => {
    it('records the usage, then answers with the provider body', async () => {
      const f = setup();
      const body = {
        id: 'chatcmpl-1',
        choices: [{ index: 0, message: { role: 'assistant', content: TEXT }, finish_reason: 'stop' }],
        usage: USAGE,
      };
      f.pool
        .intercept({ path: OPENAI_PATH, method: 'POST' })
        .reply(200, body, { headers: { 'content-type': 'application/json', 'x-request-id': 'req-up-1' } });
      await f.attempt(openAiCommand());

      expect(f.store.completed).toHaveLength(1);
      expect(f.store.completed[0]).toMatchObject({
        status: 'succeeded',
        providerRequestId: 'req-up-1',
        usage: { inputTokens: 9, outputTokensTotal: 7 },
        usageSource: 'provider_response',
      });
      const [reply] = f.replies();
      expect(reply).toMatchObject({ kind: 'response', http_status: 200, body, returned_candidates: 1 });
      expect(f.bus.sent.map((m) => [m.topic, m.key])).toEqual([['dispatchReplies', 'act-1']]);
      // On admission-1's own partition, its id in the header: no other instance reads it.
      expect(f.bus.sent[0]).toMatchObject({ partition: recipientPartition('admission-1', 6), headers: { 'reply-to': 'admission-1' } });
    });

    it("answers on the reply topic the command named (a probe: policy's topic)", async () => {
      const f = setup();
      answered(f);
      const { done } = await f.run.execute(openAiCommand(), { instanceId: 'policy-7', topic: 'probeReplies' });
      await done;
      expect(f.bus.sent.map((m) => [m.topic, m.partition, m.headers])).toEqual([['probeReplies', 0, { 'reply-to': 'policy-7' }]]);
    });

    it('an answer too large for one Kafka message: usage recorded, the client gets a 502 instead of a timeout', async () => {
      const f = setup();
      f.bus.maxMessageBytes = 4000;
      const body = {
        id: 'chatcmpl-big',
        choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(5000) }, finish_reason: 'stop' }],
        usage: USAGE,
      };
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, body, { headers: { 'content-type': 'application/json' } });
      await f.attempt(openAiCommand());

      expect(f.store.completed[0]).toMatchObject({ status: 'succeeded', usage: { inputTokens: 9, outputTokensTotal: 7 } });
      const [reply] = f.replies();
      expect(reply).toMatchObject({ kind: 'error', http_status: 502, code: 'upstream_error', returned_candidates: 1 });
      expect(f.bus.sent).toHaveLength(1);
    });

    it('an answer nested 10,000 deep (it parses, but cannot be serialised again): usage recorded, the client gets a 502, not a timeout', async () => {
      const f = setup();
      const deep = '['.repeat(10_000) + ']'.repeat(10_000);
      const body = `{"id":"chatcmpl-deep","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":${JSON.stringify(USAGE)},"x":${deep}}`;
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, body, { headers: { 'content-type': 'application/json' } });
      await f.attempt(openAiCommand());

      expect(f.store.completed[0]).toMatchObject({ status: 'succeeded', usage: { inputTokens: 9, outputTokensTotal: 7 } });
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'error', http_status: 502, code: 'upstream_error' })]);
    });

    it('turns a provider error into a 502 upstream_error, with the error as zero-usage evidence', async () => {
      const f = setup();
      f.pool
        .intercept({ path: OPENAI_PATH, method: 'POST' })
        .reply(500, { error: { message: 'boom', type: 'server_error', code: 'internal' } });
      await f.attempt(openAiCommand());

      expect(f.store.completed[0]).toMatchObject({ status: 'failed', httpStatus: 500, usage: { inputTokens: 0, outputTokensTotal: 0 } });
      expect(f.replies()).toEqual([
        expect.objectContaining({ kind: 'error', http_status: 502, code: 'upstream_error', message: 'provider error 500 (internal)' }),
      ]);
    });

    it('an answer larger than UPSTREAM_ANSWER_MAX_BYTES: reading stops, usage unknown (never zero), a 502 that says why', async () => {
      const f = setup(undefined, {}, null, null, undefined, { ...CONFIG, upstreamAnswerMaxBytes: 64 * 1024 });
      // what a provider that never stops (or a hostile one) sends: here 200 KB, the usage at its end
      const body = {
        id: 'chatcmpl-huge',
        choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(200_000) }, finish_reason: 'stop' }],
        usage: USAGE,
      };
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, body, { headers: { 'content-type': 'application/json' } });
      await f.attempt(openAiCommand());

      expect(f.store.completed[0]).toMatchObject({
        status: 'usage_missing',
        usage: null,
        statusReason: expect.stringMatching(/larger than UPSTREAM_ANSWER_MAX_BYTES/),
      });
      expect(f.replies()).toEqual([
        expect.objectContaining({
          kind: 'error',
          http_status: 502,
          code: 'upstream_answer_too_large',
          message: "the provider's answer is larger than the gateway reads (65536 bytes)",
        }),
      ]);
    });

    it('an error answer is read for its code only: a huge one is still a provider error, code unknown', async () => {
      const f = setup();
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(500, 'x'.repeat(1024 * 1024));
      await f.attempt(openAiCommand());

      expect(f.store.completed[0]).toMatchObject({ status: 'failed', httpStatus: 500 });
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'error', http_status: 502, message: 'provider error 500' })]);
    });

    it.each([false, true])(
      'an upstream that trickles a byte at a time (stream: %s): the exchange ends UPSTREAM_READ_AFTER_DEADLINE_MS past the deadline, usage unknown',
      async (stream) => {
        // A real server (undici's limits between bytes never fire: a byte every 20 ms, for ever).
        let closed = false;
        const server = http.createServer((_req, res) => {
          res.writeHead(200, { 'content-type': stream ? 'text/event-stream' : 'application/json' });
          const drip = setInterval(() => res.write(stream ? ':\n' : ' '), 20);
          res.on('close', () => {
            clearInterval(drip);
            closed = true;
          });
        });
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        const upstream = new Agent();
        try {
          const f = setup(undefined, {}, null, null, undefined, { ...CONFIG, upstreamReadAfterDeadlineMs: 300 }, upstream);
          const base = openAiCommand({ stream });
          // Without the bound the attempt never ends: the test runs into jest's limit (no timed assertion).
          await f.attempt({
            ...base,
            // 200 ms left of the action (the test's clock stands still), then 300 ms more for the usage
            deadline: new Date(NOW.getTime() + 200).toISOString(),
            route: { ...base.route, base_url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` },
          });
          expect(f.store.completed[0]).toMatchObject({ status: 'usage_missing', usage: null });
          await eventually(async () => (closed ? true : undefined), { what: 'the upstream connection closed' });
        } finally {
          await upstream.close();
          server.closeAllConnections();
          await new Promise((resolve) => server.close(resolve));
        }
      },
    );

    it('leaves usage unknown (never zero) when the provider cannot be reached', async () => {
      const f = setup();
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).replyWithError(new Error('connect ECONNREFUSED 127.0.0.1:1'));
      await f.attempt(openAiCommand());

      expect(f.store.completed[0]).toMatchObject({ status: 'usage_missing', httpStatus: null, usage: null });
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'error', http_status: 502, code: 'upstream_error' })]);
    });
  });

  describe('recording the evidence', () => {
    it.each([
      ['a terminated connection', new Error('Connection terminated unexpectedly')],
      [
        'a pool timeout',
        Object.assign(new Error('Transaction API error: Unable to start a transaction in the given time.'), { code: 'P2028' }),
      ],
      ['a statement timeout', new Error('canceling statement due to statement timeout (57014)')],
      // before these counted as out of service, the usage that had arrived was thrown away
      ['a read-only database', Object.assign(new Error('cannot execute UPDATE in a read-only transaction'), { code: '25006' })],
      ['a full disk', Object.assign(new Error('could not extend file "base/1/2": No space left on device'), { code: '53100' })],
    ])('retries the write after %s until it lands, then answers', async (_what, error) => {
      const f = setup();
      answered(f);
      f.store.failures = 5;
      f.store.failWith = error;
      await f.attempt(openAiCommand());

      expect(f.store.runs).toBe(6);
      // Every run carries the same outcome (same event id), so a run that committed unseen is recognised.
      expect(f.store.completed).toHaveLength(1);
      expect(f.store.completed[0]).toMatchObject({ status: 'succeeded', usage: { inputTokens: 9, outputTokensTotal: 7 } });
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'response', http_status: 200 })]);
    });

    it('does not retry a deterministic failure (the attempt already moved on) and sends no reply', async () => {
      const f = setup();
      answered(f);
      sweptFirst(f);
      await f.attempt(openAiCommand());
      expect(f.store.runs).toBe(1);
      expect(f.bus.sent).toHaveLength(0);
    });

    it('offers the usage in hand to the orphan case when the orphan sweep ended the attempt first', async () => {
      const { lines, log } = capturedLog('info');
      const f = setup(undefined, {}, null, null, log);
      answered(f);
      sweptFirst(f);
      await f.attempt(openAiCommand());
      const attemptId = f.store.claims[0].attemptId;
      expect(f.store.offered.get(attemptId)).toEqual({
        provider_request_id: 'chatcmpl-1',
        usage_source: 'provider_response',
        output_includes_reasoning: true,
        input_tokens: 9,
        cached_input_tokens: 0,
        output_tokens_total: 7,
        reasoning_tokens: 0,
        ...NO_DETAIL,
        offered_at: expect.any(String),
      });
      expect(lines).toContainEqual(
        expect.objectContaining({ level: 40, attempt_id: attemptId, case_id: 'case-1', stream_mode: 'none', attempt_role: 'primary' }),
      );
      expect(lines.filter((l) => Number(l.level) >= 50)).toEqual([]); // handled: no error line
      expect(f.bus.sent).toHaveLength(0);
    });

    it('with no open case to take it, logs the evidence as the body that resolves a case (output with reasoning), never the text', async () => {
      const { lines, log } = capturedLog('info');
      const f = setup(undefined, {}, null, null, log);
      // Gemini counts output without its reasoning (thoughts); the body counts it with
      f.pool.intercept({ path: '/v1beta/models/model-x:generateContent', method: 'POST' }).reply(200, {
        responseId: 'resp-1',
        candidates: [{ index: 0, content: { role: 'model', parts: [{ text: ANSWER_TEXT }] }, finishReason: 'STOP' }],
        usageMetadata: { promptTokenCount: 9, candidatesTokenCount: 7, thoughtsTokenCount: 5, totalTokenCount: 21 },
      });
      f.store.caseForLateEvidence = null;
      sweptFirst(f);
      await f.attempt(dispatchCommand({ requested_candidates: null, effective_candidates: 1 }, 'gemini-generate'));
      const late = lines.filter((l) => String(l.msg).startsWith('ATTEMPT EVIDENCE CAME AFTER THE ATTEMPT ENDED'));
      expect(late).toHaveLength(1);
      expect(late[0]).toMatchObject({ level: 50, status: 'succeeded', attempt_id: f.store.claims[0].attemptId });
      // exactly the fields of reconciliation's `importUsageBody` (strict: no other key)
      expect(late[0].evidence).toEqual({
        provider_request_id: 'resp-1',
        input_tokens: 9,
        cached_input_tokens: 0,
        output_tokens_total: 12,
        reasoning_tokens: 5,
        ...NO_DETAIL,
      });
      expect(JSON.stringify(lines)).not.toContain(ANSWER_TEXT); // the answer's text stays out of the log
    });

    it('the database gone when the evidence is offered: the evidence goes into the error line, not lost', async () => {
      const { lines, log } = capturedLog('info');
      const f = setup(undefined, {}, null, null, log);
      answered(f);
      sweptFirst(f);
      f.store.offerFailsWith = new Error('Connection terminated unexpectedly');
      await f.attempt(openAiCommand());
      expect(lines.filter((l) => Number(l.level) >= 50).map((l) => String(l.msg).slice(0, 40))).toEqual([
        'late attempt evidence could not be offer',
        'ATTEMPT EVIDENCE CAME AFTER THE ATTEMPT ',
      ]);
      expect(lines.find((l) => l.evidence)?.evidence).toMatchObject({
        provider_request_id: 'chatcmpl-1',
        input_tokens: 9,
        output_tokens_total: 7,
      });
      expect(f.bus.sent).toHaveLength(0);
    });

    it('answers at the action deadline while the write still retries, and gives up only on shutdown', async () => {
      const { lines, log } = capturedLog('error');
      const f = setup(undefined, {}, null, null, log);
      answered(f);
      f.store.failures = Number.POSITIVE_INFINITY;
      const { done } = await f.run.execute(openAiCommand({ deadline: new Date(NOW.getTime() + 30).toISOString() }), ADMISSION_1);

      await eventually(() => (f.bus.sent.length === 1 ? true : undefined), { intervalMs: 5 });
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'response', http_status: 200 })]);
      const runsAtReply = f.store.runs;
      await eventually(() => (f.store.runs > runsAtReply ? true : undefined), { intervalMs: 5, what: 'a retry after the reply' });

      f.run.beforeApplicationShutdown();
      await done;
      expect(f.store.completed).toHaveLength(0);
      // the usage that came goes into the line as the body that resolves the orphan case
      expect(lines).toEqual([
        expect.objectContaining({
          msg: expect.stringMatching(/^ATTEMPT EVIDENCE NOT RECORDED/),
          evidence: {
            provider_request_id: 'chatcmpl-1',
            input_tokens: 9,
            cached_input_tokens: 0,
            output_tokens_total: 7,
            reasoning_tokens: 0,
            ...NO_DETAIL,
          },
        }),
      ]);
    });
  });

  describe('a stream', () => {
    const streamed = (over: Partial<DispatchCommandV1> = {}) => openAiCommand({ stream: true, ...over });
    const reply = (f: ReturnType<typeof setup>, body: string) =>
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, body, { headers: { 'content-type': 'text/event-stream' } });

    it('forwards every chunk in order, records the final usage and ends complete', async () => {
      const f = setup();
      reply(f, sse(openAiChunks(TEXT)));
      await f.attempt(streamed());

      const replies = f.replies();
      expect(openAiText(replies)).toBe(TEXT);
      const seqs = replies.flatMap((r) => (r.kind === 'stream_chunk' ? [r.seq] : []));
      expect(seqs).toEqual([...seqs.keys()]);
      // The client did not ask for usage: the usage chunk stays in dispatch.
      expect(replies.some((r) => r.kind === 'stream_chunk' && r.data.includes('prompt_tokens'))).toBe(false);
      expect(last(replies)).toMatchObject({ kind: 'stream_end', seq: seqs.length, complete: true, returned_candidates: 1 });
      expect(f.store.completed[0]).toMatchObject({
        status: 'succeeded',
        usage: { inputTokens: 9, outputTokensTotal: 7 },
        usageSource: 'stream_final_chunk',
      });
    });

    describe("whose client is gone (admission's stop)", () => {
      const withheld = async (f: ReturnType<typeof setup>) => (await f.metrics.chunksWithheld.get()).values[0]?.value ?? 0;
      const stopped = async (f: ReturnType<typeof setup>) => (await f.metrics.relayStops.get()).values[0]?.value ?? 0;

      it('mid-stream: the rest is read for its usage and relayed to nobody, no stream end', async () => {
        const f = setup(readsOf(7));
        const chunks = openAiChunks(TEXT);
        reply(f, sse(chunks));
        f.bus.afterSend = (sent) => sent === 2 && f.relayStops.stop('act-1', f.nowMs());
        await f.attempt(streamed());

        expect(f.replies().map((r) => r.kind)).toEqual(['stream_chunk', 'stream_chunk']);
        expect(f.store.completed[0]).toMatchObject({
          status: 'succeeded',
          usage: { inputTokens: 9, outputTokensTotal: 7 },
          usageSource: 'stream_final_chunk',
        });
        expect(await stopped(f)).toBe(1);
        expect(await withheld(f)).toBeGreaterThan(0);
        expect(f.relayStops.size).toBe(0); // forgotten once the stream ended
      });

      it('a stop that came before the command was claimed here: nothing is relayed, the usage is recorded', async () => {
        const f = setup();
        f.relayStops.stop('act-1', f.nowMs());
        reply(f, sse(openAiChunks(TEXT)));
        await f.attempt(streamed());
        expect(f.replies()).toEqual([]);
        expect(f.store.completed[0]).toMatchObject({ status: 'succeeded', usageSource: 'stream_final_chunk' });
        expect(await stopped(f)).toBe(1);
      });

      it("another action's stop, or an expired one, changes nothing", async () => {
        const f = setup();
        f.relayStops.stop('act-other', f.nowMs());
        f.relayStops.stop('act-1', f.nowMs() - RELAY_STOP_TTL_MS - 1);
        reply(f, sse(openAiChunks(TEXT)));
        await f.attempt(streamed());
        expect(openAiText(f.replies())).toBe(TEXT);
        expect(last(f.replies())).toMatchObject({ kind: 'stream_end', complete: true });
        expect(await stopped(f)).toBe(0);
      });
    });

    it('forwards the usage chunk when the client asked for it', async () => {
      const f = setup();
      reply(f, sse(openAiChunks(TEXT)));
      await f.attempt(streamed({ include_usage_for_client: true }));
      expect(f.replies().some((r) => r.kind === 'stream_chunk' && JSON.parse(r.data).usage?.prompt_tokens === 9)).toBe(true);
    });

    it.each([1, 2, 3, 5, 7])('joins characters and CRLFs split across network reads (reads of %i bytes)', async (size) => {
      const f = setup(readsOf(size));
      reply(f, '\uFEFF' + sse(openAiChunks(TEXT), '\r\n'));
      await f.attempt(streamed());

      const replies = f.replies();
      expect(openAiText(replies)).toBe(TEXT);
      expect(replies.map((r) => (r.kind === 'stream_chunk' ? r.data : '')).join('')).not.toContain('\uFFFD');
      expect(last(replies)).toMatchObject({ kind: 'stream_end', complete: true });
      expect(f.store.completed[0]).toMatchObject({ status: 'succeeded' });
    });

    it('ends incomplete, usage unknown, when the stream stops before its usage chunk and [DONE]', async () => {
      const f = setup();
      reply(f, sse(openAiChunks(TEXT, { usage: false, done: false })));
      await f.attempt(streamed());

      const replies = f.replies();
      expect(openAiText(replies)).toBe(TEXT);
      expect(last(replies)).toMatchObject({ kind: 'stream_end', complete: false });
      expect(f.store.completed[0]).toMatchObject({ status: 'usage_missing', usage: null });
    });

    it('an event that never ends, past UPSTREAM_ANSWER_MAX_BYTES: reading stops, what arrived before is forwarded, usage unknown', async () => {
      const { lines, log } = capturedLog('warn');
      const f = setup(undefined, {}, null, null, log, { ...CONFIG, upstreamAnswerMaxBytes: 64 * 1024 });
      const [first, ...rest] = openAiChunks(TEXT);
      // (the rest would come after it; here the connection ends where the reading stopped)
      void rest;
      reply(f, sse([first]) + `data: {"pad":"${'x'.repeat(200_000)}`);
      await f.attempt(streamed());

      const replies = f.replies();
      expect(replies.filter((r) => r.kind === 'stream_chunk')).toHaveLength(1);
      expect(last(replies)).toMatchObject({ kind: 'stream_end', complete: false });
      expect(f.store.completed[0]).toMatchObject({ status: 'usage_missing', usage: null });
      // the reading stopped at the bound, rather than holding the unfinished event to the end
      expect(lines.filter((l) => l.msg === 'upstream stream event larger than the gateway reads; stopped reading')).toEqual([
        expect.objectContaining({ limit_bytes: 64 * 1024 }),
      ]);
    });

    it('ends incomplete when the connection drops mid-stream, after forwarding what arrived', async () => {
      const body = sse(openAiChunks(TEXT));
      const f = setup(cutAfter(Buffer.byteLength(body.slice(0, body.indexOf('"finish_reason":"stop"')))));
      reply(f, body);
      await f.attempt(streamed());

      const replies = f.replies();
      expect(TEXT.startsWith(openAiText(replies))).toBe(true);
      expect(last(replies)).toMatchObject({ kind: 'stream_end', complete: false });
      expect(f.store.completed[0]).toMatchObject({ status: 'usage_missing', usage: null });
    });

    it('ends incomplete when usage came but [DONE] did not: the client did not get the end', async () => {
      const f = setup();
      reply(f, sse(openAiChunks(TEXT, { done: false })));
      await f.attempt(streamed());
      expect(last(f.replies())).toMatchObject({ kind: 'stream_end', complete: false });
    });

    it('ends complete when [DONE] came without usage: delivery is whole, usage stays unknown', async () => {
      const f = setup();
      reply(f, sse(openAiChunks(TEXT, { usage: false })));
      await f.attempt(streamed());
      expect(last(f.replies())).toMatchObject({ kind: 'stream_end', complete: true });
      expect(f.store.completed[0]).toMatchObject({ status: 'usage_missing', usage: null });
    });

    it('answers a provider error before the stream with a 502 and no stream_end', async () => {
      const f = setup();
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(429, { error: { message: 'slow down', code: 'rate_limit_exceeded' } });
      await f.attempt(streamed());
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'error', http_status: 502, code: 'upstream_error' })]);
      expect(f.store.completed[0]).toMatchObject({ status: 'failed', httpStatus: 429 });
    });

    describe('from Gemini (no end marker: the final chunk carries finishReason and usage)', () => {
      const geminiCommand = () =>
        dispatchCommand({ stream: true, requested_candidates: null, effective_candidates: 1, request: { contents: [] } });
      const chunk = (text: string, final: boolean) =>
        JSON.stringify({
          candidates: [{ index: 0, content: { role: 'model', parts: [{ text }] }, ...(final ? { finishReason: 'STOP' } : {}) }],
          ...(final ? { usageMetadata: { promptTokenCount: 4, candidatesTokenCount: 6, totalTokenCount: 10 } } : {}),
          responseId: 'resp-1',
        });
      const geminiText = (replies: DispatchReplyV1[]) =>
        replies
          .flatMap((r) => (r.kind === 'stream_chunk' ? [JSON.parse(r.data).candidates[0].content.parts[0].text as string] : []))
          .join('');

      it.each([1, 3, 1000])('forwards the chunks and ends complete after the final chunk (reads of %i bytes)', async (size) => {
        const f = setup(readsOf(size));
        f.pool
          .intercept({ path: GEMINI_STREAM_PATH, method: 'POST' })
          .reply(200, sse([chunk('naïve 日本 ', false), chunk('🚀 done', true)], '\r\n'));
        await f.attempt(geminiCommand());

        const replies = f.replies();
        expect(geminiText(replies)).toBe('naïve 日本 🚀 done');
        expect(last(replies)).toMatchObject({ kind: 'stream_end', complete: true });
        expect(f.store.completed[0]).toMatchObject({ status: 'succeeded', usage: { inputTokens: 4, outputTokensTotal: 6 } });
      });

      it('ends incomplete when the stream stops before its final chunk', async () => {
        const f = setup();
        f.pool.intercept({ path: GEMINI_STREAM_PATH, method: 'POST' }).reply(200, sse([chunk('naïve 日本 ', false)], '\r\n'));
        await f.attempt(geminiCommand());
        expect(last(f.replies())).toMatchObject({ kind: 'stream_end', complete: false });
        expect(f.store.completed[0]).toMatchObject({ status: 'usage_missing' });
      });
    });
  });
  describe('the Responses API (api kind openai-responses on an openai-chat route)', () => {
    const responsesCommand = (over: Partial<DispatchCommandV1> = {}) =>
      openAiCommand({ api_kind: 'openai-responses', output_ceiling: 64, request: { input: 'hi' }, ...over });
    const usage = {
      input_tokens: 12,
      input_tokens_details: { cached_tokens: 2 },
      output_tokens: 9,
      output_tokens_details: { reasoning_tokens: 3 },
      total_tokens: 21,
    };
    const events = (terminal: boolean) =>
      [
        { type: 'response.created', sequence_number: 0, response: { id: 'resp_1', status: 'in_progress', output: [], usage: null } },
        {
          type: 'response.output_text.delta',
          sequence_number: 1,
          item_id: 'msg_1',
          output_index: 0,
          content_index: 0,
          delta: 'naïve 日本',
        },
        ...(terminal
          ? [
              {
                type: 'response.completed',
                sequence_number: 2,
                response: {
                  id: 'resp_1',
                  status: 'completed',
                  output: [{ type: 'message', content: [{ type: 'output_text', text: 'naïve 日本' }] }],
                  usage,
                },
              },
            ]
          : []),
      ]
        .map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`)
        .join('');

    it('sends POST /v1/responses with the reserved max_output_tokens and store: false; settles from the response', async () => {
      const f = setup();
      let sent: Record<string, unknown> = {};
      f.pool
        .intercept({ path: RESPONSES_PATH, method: 'POST', body: (b) => ((sent = JSON.parse(b) as Record<string, unknown>), true) })
        .reply(200, {
          id: 'resp_1',
          object: 'response',
          status: 'completed',
          output: [{ type: 'message', content: [{ type: 'output_text', text: 'ok' }] }],
          usage,
        });
      await f.attempt(responsesCommand());
      expect(sent).toEqual({ model: 'model-x', input: 'hi', max_output_tokens: 64, store: false });
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'response', http_status: 200, returned_candidates: 1 })]);
      expect(f.store.completed[0]).toMatchObject({
        status: 'succeeded',
        usageSource: 'provider_response',
        usage: { inputTokens: 12, cachedInputTokens: 2, outputTokensTotal: 9, reasoningTokens: 3 },
      });
    });

    it.each([1, 3, 1000])(
      'relays every event as sent (usage included) and settles from response.completed (reads of %i bytes)',
      async (size) => {
        const f = setup(readsOf(size));
        f.pool
          .intercept({ path: RESPONSES_PATH, method: 'POST' })
          .reply(200, events(true), { headers: { 'content-type': 'text/event-stream' } });
        await f.attempt(responsesCommand({ stream: true }));
        const replies = f.replies();
        const chunks = replies.flatMap((r) => (r.kind === 'stream_chunk' ? [JSON.parse(r.data) as { type: string; delta?: string }] : []));
        expect(chunks.map((c) => c.type)).toEqual(['response.created', 'response.output_text.delta', 'response.completed']);
        expect(chunks[1].delta).toBe('naïve 日本');
        expect(last(replies)).toMatchObject({ kind: 'stream_end', complete: true, returned_candidates: 1 });
        expect(f.store.completed[0]).toMatchObject({
          status: 'succeeded',
          usageSource: 'stream_final_chunk',
          usage: { inputTokens: 12, outputTokensTotal: 9 },
        });
      },
    );

    it('a stream without response.completed ends incomplete with usage unknown', async () => {
      const f = setup();
      f.pool
        .intercept({ path: RESPONSES_PATH, method: 'POST' })
        .reply(200, events(false), { headers: { 'content-type': 'text/event-stream' } });
      await f.attempt(responsesCommand({ stream: true }));
      expect(last(f.replies())).toMatchObject({ kind: 'stream_end', complete: false });
      expect(f.store.completed[0]).toMatchObject({ status: 'usage_missing', usage: null });
    });
  });

  describe('extra attempts of one action (issue 10): hedge, retry, fallback', () => {
    /** the policy the operator API would store: a 20 ms fixed delay, everything else permissive */
    const POLICY: HedgePolicyRevision = {
      ...hedgeSettings({ delay: { kind: 'fixed', ms: 20 }, allowance: { max_attempts: 3, max_extra_spend_microusd: '100000' } }),
      revisionId: 'hp-7',
      workloadId: 'wl-1',
      routeId: null,
      revision: 7,
      createdBy: 'olga',
      createdAt: NOW,
      reason: 'test',
    };
    const NO_HEDGE: HedgePolicyRevision = { ...POLICY, maxHedges: 0 };
    const BACKUP_ORIGIN = 'http://backup.example';
    const cmdWithHold = (over: Partial<DispatchCommandV1> = {}) => openAiCommand({ hold_microusd: '4000', ...over });
    const okBody = (content: string) => ({
      id: `chatcmpl-${content}`,
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
      usage: USAGE,
    });
    const byAttempt = (f: ReturnType<typeof setup>, attemptId: string) => f.store.completed.find((o) => o.attemptId === attemptId);

    it('without a policy: one attempt, its hold on the claim, attempts 1 and the primary as winner role (no compare-and-set: the completion records the winner)', async () => {
      const f = setup();
      answered(f);
      await f.attempt(cmdWithHold());
      expect(f.store.claims[0]).toMatchObject({ attemptNo: 1, role: 'primary', holdMicrousd: 4000n, policyRevisionId: null });
      expect(f.store.extra).toHaveLength(0);
      expect(f.store.winnerCalls).toEqual([]);
      expect(f.replies()).toEqual([
        expect.objectContaining({ kind: 'response', attempts_total: 1, winner_role: 'primary', gateway_retried: false }),
      ]);
      expect(f.store.completed[0].finishAction).not.toBeNull();
      expect(f.store.completed[0].event).toMatchObject({
        winner: true,
        action_final: true,
        attempts_total: 1,
        deadline_outcome: 'on_time',
      });
    });

    it('slow primary: the hedge fires after its delay, wins, is the one reply; the primary is aborted and recorded cancelled', async () => {
      const f = setup(undefined, {}, POLICY);
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('slow')).delay(20_000);
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('fast'));
      await f.attempt(cmdWithHold());

      expect(f.store.claims[0]).toMatchObject({ holdMicrousd: 4000n, policyRevisionId: 'hp-7' });
      expect(f.store.extra).toEqual([
        expect.objectContaining({ role: 'hedge', attemptNo: 2, holdMicrousd: 4000n, policyRevisionId: 'hp-7', routeId: 'route-1' }),
      ]);
      expect(f.store.extra[0].limits).toEqual({
        maxAttempts: 3,
        maxHedges: 1,
        maxRetries: 1,
        maxExtraSpendMicrousd: 100_000n,
        spendFloorMicrousd: 0n,
        minUsefulRemainingMs: 500,
      });
      const hedgeId = f.store.extra[0].attemptId;
      expect(f.store.winnerAttemptId).toBe(hedgeId);
      const replies = f.replies();
      expect(replies).toHaveLength(1);
      expect(replies[0]).toMatchObject({
        kind: 'response',
        attempt_id: hedgeId,
        attempts_total: 2,
        winner_role: 'hedge',
        gateway_retried: false,
      });
      expect(JSON.stringify(replies[0])).toContain('fast');

      const hedge = byAttempt(f, hedgeId);
      const primary = byAttempt(f, f.store.claims[0].attemptId);
      expect(hedge).toMatchObject({ status: 'succeeded', finishAction: { status: 'answered' } });
      expect(hedge?.event).toMatchObject({
        attempt_role: 'hedge',
        attempt_no: 2,
        winner: true,
        action_final: true,
        policy_revision_id: 'hp-7',
      });
      // the loser: no usage reported, so cancelled (settlement holds its exposure), never zero
      expect(primary).toMatchObject({ status: 'cancelled', usage: null, finishAction: null });
      expect(primary?.event).toMatchObject({ attempt_role: 'primary', attempt_no: 1, winner: false, deadline_outcome: 'cancelled' });
    });

    it('experiment paused (issue 11): a hedged action runs primary-only and records the pause; a holdout answer is judged', async () => {
      const evaluated: string[] = [];
      const pauses = (open: string | null): PauseSource & PauseStore => ({
        openPauseId: async () => open,
        evaluate: async (experimentId) => {
          evaluated.push(experimentId);
          return { decision: null, openPauseId: open };
        },
      });
      const experiment = (cohort: 'hedged' | 'holdout') => ({ experiment: { id: 'exp-1', cohort, policy_revision_id: 'hp-7' } });

      // paused: the slow primary is not hedged, the claim names the pause and no policy
      const f = setup(undefined, {}, POLICY, pauses('pause-1'));
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('slow')).delay(200);
      await f.attempt(cmdWithHold(experiment('hedged')));
      expect(f.store.claims[0]).toMatchObject({ experimentPauseId: 'pause-1', policyRevisionId: null });
      expect(f.store.extra).toHaveLength(0);
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'response', attempts_total: 1, winner_role: 'primary' })]);
      expect(evaluated).toEqual([]);

      // not paused: the same action hedges after 20 ms
      const g = setup(undefined, {}, POLICY, pauses(null));
      g.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('slow')).delay(200);
      g.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('fast'));
      await g.attempt(cmdWithHold(experiment('hedged')));
      expect(g.store.claims[0]).toMatchObject({ experimentPauseId: null, policyRevisionId: 'hp-7' });
      expect(g.store.extra.map((e) => e.role)).toEqual(['hedge']);

      // a holdout action records the pause too, and once it is recorded the window is judged
      const h = setup(undefined, {}, POLICY, pauses('pause-1'));
      answered(h);
      await h.attempt(cmdWithHold(experiment('holdout')));
      expect(h.store.claims[0]).toMatchObject({ experimentPauseId: 'pause-1', policyRevisionId: null });
      expect(evaluated).toEqual(['exp-1']);
    });

    it('a hedge the serialised admission denies changes nothing for the primary', async () => {
      const f = setup(undefined, {}, POLICY);
      f.store.extraAnswers = [{ ok: false, reason: 'spend_allowance_spent' }];
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('primary')).delay(200);
      await f.attempt(cmdWithHold());
      expect(f.store.extra.map((e) => e.role)).toEqual(['hedge']);
      expect(f.store.completed).toHaveLength(1);
      expect(f.replies()).toEqual([
        expect.objectContaining({ kind: 'response', attempts_total: 1, winner_role: 'primary', gateway_retried: false }),
      ]);
    });

    it('the admission failing (database down) is a denial: the primary still answers, the failed retry is the answer', async () => {
      const f = setup(undefined, {}, POLICY);
      f.store.extraFailures = 1;
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('primary')).delay(200);
      await f.attempt(cmdWithHold());
      expect(f.store.extra.map((e) => e.role)).toEqual(['hedge']);
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'response', winner_role: 'primary', attempts_total: 1 })]);

      const g = setup(undefined, {}, NO_HEDGE);
      g.store.extraFailures = 1;
      g.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(503, { error: { code: 'overloaded' } });
      await g.attempt(cmdWithHold());
      expect(g.store.extra.map((e) => e.role)).toEqual(['retry']);
      expect(g.store.completed).toEqual([
        expect.objectContaining({ status: 'failed', finishAction: expect.objectContaining({ status: 'failed' }) }),
      ]);
      expect(g.replies()).toEqual([expect.objectContaining({ kind: 'error', attempts_total: 1 })]);
    });

    it('a primary that fails fast is retried, not hedged: its hedge timer ends with it', async () => {
      const f = setup(undefined, {}, { ...POLICY, delay: { kind: 'fixed', ms: 100 } });
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(503, { error: { code: 'overloaded' } });
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('retried')).delay(300);
      await f.attempt(cmdWithHold());
      expect(f.store.extra.map((e) => e.role)).toEqual(['retry']);
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'response', winner_role: 'retry', attempts_total: 2 })]);
    });

    it('no hedge for a request whose tools the workload has not declared read-only, nor without a hold to copy', async () => {
      const tools = { messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'send_email' } }] };
      for (const cmd of [cmdWithHold({ request: tools }), openAiCommand()]) {
        const f = setup(undefined, {}, POLICY);
        f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('primary')).delay(100);
        await f.attempt(cmd);
        expect(f.store.extra).toHaveLength(0);
        expect(f.replies()).toHaveLength(1);
      }
    });

    it.each([
      [2, 3],
      [10, 3],
    ])(
      'the winner compare-and-set failing %i times (transiently) is asked %i times at most; the answer goes out',
      async (failures, calls) => {
        const f = setup(undefined, {}, POLICY);
        f.store.winnerFailures = failures;
        answered(f);
        await f.attempt(cmdWithHold());
        expect(f.store.winnerCalls).toHaveLength(calls);
        expect(f.replies()).toEqual([expect.objectContaining({ kind: 'response', winner_role: 'primary' })]);
        expect(f.store.completed[0].event).toMatchObject({ winner: true, action_final: true });
      },
    );

    it('a transient 503: a retry with its own hold and the same upstream idempotency key answers; two records, one reply', async () => {
      const f = setup(undefined, {}, NO_HEDGE);
      const cmd = cmdWithHold();
      const routed = { ...cmd, route: { ...cmd.route, idempotency_header: 'Idempotency-Key' } };
      const withKey = { path: OPENAI_PATH, method: 'POST', headers: { 'Idempotency-Key': cmd.action_id } };
      f.pool.intercept(withKey).reply(503, { error: { code: 'overloaded' } });
      f.pool.intercept(withKey).reply(200, okBody('retried'));
      await f.attempt(routed);

      expect(f.store.extra).toEqual([expect.objectContaining({ role: 'retry', attemptNo: 2, holdMicrousd: 4000n })]);
      const [first, second] = f.store.completed.sort((a, b) => a.event.attempt_no - b.event.attempt_no);
      expect(first).toMatchObject({ status: 'failed', httpStatus: 503, finishAction: null });
      expect(first.event).toMatchObject({ attempt_role: 'primary', action_final: false, winner: false });
      expect(second).toMatchObject({ status: 'succeeded', finishAction: { status: 'answered' } });
      expect(second.event).toMatchObject({ attempt_role: 'retry', attempt_no: 2, attempts_total: 2, winner: true, action_final: true });
      expect(f.replies()).toEqual([
        expect.objectContaining({ kind: 'response', winner_role: 'retry', attempts_total: 2, gateway_retried: true }),
      ]);
    });

    it('an answer larger than the gateway reads is not retried: it would be as large again, and paid for again', async () => {
      const f = setup(undefined, {}, NO_HEDGE, null, undefined, { ...CONFIG, upstreamAnswerMaxBytes: 64 * 1024 });
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('y'.repeat(100_000)));
      await f.attempt(cmdWithHold());

      expect(f.store.extra).toEqual([]);
      expect(f.store.completed).toHaveLength(1);
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'error', http_status: 502, code: 'upstream_answer_too_large' })]);
    });

    it('no retry left: the next approved fallback route, with its own route and hold, answers', async () => {
      const f = setup(undefined, {}, { ...NO_HEDGE, retry: { ...NO_HEDGE.retry, maxRetries: 0 } });
      const cmd = cmdWithHold();
      const backup = { ...cmd.route, route_id: 'route-backup', route_version: 1, base_url: BACKUP_ORIGIN, model_alias: 'backup' };
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(502, { error: { code: 'bad_gateway' } });
      f.agent.get(BACKUP_ORIGIN).intercept({ path: OPENAI_PATH, method: 'POST' }).reply(200, okBody('fallback'));
      await f.attempt({ ...cmd, fallbacks: [{ route: backup, hold_microusd: '9000' }] });

      expect(f.store.extra).toEqual([
        expect.objectContaining({ role: 'fallback', attemptNo: 2, routeId: 'route-backup', routeVersion: 1, holdMicrousd: 9000n }),
      ]);
      const fallback = f.store.completed.find((o) => o.event.attempt_role === 'fallback');
      expect(fallback?.event).toMatchObject({ route_id: 'route-backup', model_alias: 'backup', winner: true });
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'response', winner_role: 'fallback', gateway_retried: true })]);
    });

    it('the allowance spent: the failure is the answer, marked so the SDK does not retry on top', async () => {
      const f = setup(undefined, {}, NO_HEDGE);
      f.store.extraAnswers = [{ ok: false, reason: 'attempt_allowance_spent' }];
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(503, { error: { code: 'overloaded' } });
      await f.attempt(cmdWithHold());
      expect(f.store.completed).toEqual([
        expect.objectContaining({ status: 'failed', finishAction: expect.objectContaining({ status: 'failed' }) }),
      ]);
      expect(f.replies()).toEqual([
        expect.objectContaining({ kind: 'error', code: 'upstream_error', attempts_total: 1, gateway_retried: true }),
      ]);
    });

    it('a failure that is not transient (400) is neither retried nor sent to a fallback', async () => {
      const f = setup(undefined, {}, NO_HEDGE);
      const cmd = cmdWithHold();
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(400, { error: { code: 'invalid_request_error' } });
      await f.attempt({
        ...cmd,
        fallbacks: [{ route: { ...cmd.route, route_id: 'route-backup', base_url: BACKUP_ORIGIN }, hold_microusd: '9000' }],
      });
      expect(f.store.extra).toHaveLength(0);
      expect(f.replies()).toEqual([expect.objectContaining({ kind: 'error', attempts_total: 1, gateway_retried: false })]);
    });

    it('the retry fails too: every attempt recorded, the last one ends the action, one error reply', async () => {
      const f = setup(undefined, {}, NO_HEDGE);
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(503, { error: { code: 'overloaded' } });
      f.pool.intercept({ path: OPENAI_PATH, method: 'POST' }).reply(500, { error: { code: 'internal' } });
      await f.attempt(cmdWithHold());
      const finishing = f.store.completed.filter((o) => o.finishAction !== null);
      expect(f.store.completed).toHaveLength(2);
      expect(finishing).toEqual([expect.objectContaining({ status: 'failed', httpStatus: 500 })]);
      expect(finishing[0].event).toMatchObject({ attempt_role: 'retry', action_final: true });
      expect(f.replies()).toEqual([
        expect.objectContaining({ kind: 'error', upstream_http_status: 500, attempts_total: 2, gateway_retried: true }),
      ]);
    });
  });
});
