import type { Logger } from 'pino';
import {
  AdmissionDecisionV1,
  DispatchCommandV1,
  DispatchReplyV1,
  TopicKey,
  Topics,
  admissionDecisionV1,
  dispatchCommandV1,
} from '@gateway/contracts';
import type {
  ActionWithdrawal,
  ActiveException,
  AdmissionRepository,
  AdmitInput,
  AdmitResult,
  CatalogRepository,
  PriceRevision,
  RouteContract,
  RunningExperiment,
  ScopeLimits,
  WorkloadPolicy,
} from '@gateway/db';
import { assignCohort, DEFAULT_MEDIA_INPUT_TOKENS, DenialCode, DomainError } from '@gateway/domain';
import { ContentCipher, EncryptedBody, KafkaBus, ReplyRouter } from '@gateway/messaging';
import { Metrics, ServiceConfig } from '@gateway/service-kit';
import { AdmissionMetrics } from '../../admission.metrics';
import { CatalogCache } from '../../catalog-cache';
import { Clock } from '@gateway/service-kit';
import { AdmitRequestCommand, fromGeminiGenerate, fromOpenAiChat, fromOpenAiResponses } from './admit-request.command';
import { AdmitRequest, AdmittedAction, IdempotentReplay } from './admit-request.usecase';
import { hashCredential as hashKey } from '@gateway/domain';

const T0 = new Date('2026-03-17T10:20:30.000Z');
const MONTH_START = new Date('2026-03-01T00:00:00.000Z');
const HOUR_MS = 60 * 60 * 1000;

const KEY = 'gw-key-wl-1';
/** 23 UTF-8 bytes: ceil(23/3) + 4 per message + 3 = 15 input tokens for one message. */
const PROMPT = 'the plum tree is secret';
/**
 * The estimate counts the whole serialised body (without the candidate and cap fields, which the
 * adapter writes): the chat body without its `model` alias is 66 bytes → ceil(66 / 3) + 4 per message + 3 = 29; the Gemini
 * body (with its emptied generationConfig) 97 bytes → 33 + 4 + 3 = 40.
 */
const INPUT_TOKENS = 29;
const GEMINI_INPUT_TOKENS = 40;

/** $2 in, $8 out per MTok: 2 and 8 micro-USD per token. */
const PRICE: PriceRevision = {
  id: 'price-1',
  inputPerMTokMicrousd: 2_000_000n,
  cachedInputPerMTokMicrousd: 1_000_000n,
  outputPerMTokMicrousd: 8_000_000n,
  reasoningPerMTokMicrousd: 8_000_000n,
};

/** Above 200 input tokens every token costs double (whole request). */
const LONG_CONTEXT_ABOVE = 200;
const LONG_CONTEXT: PriceRevision = {
  ...PRICE,
  id: 'price-long',
  contextTiers: [
    {
      aboveInputTokens: LONG_CONTEXT_ABOVE,
      rates: {
        inputPerMTokMicrousd: 4_000_000n,
        cachedInputPerMTokMicrousd: 2_000_000n,
        outputPerMTokMicrousd: 16_000_000n,
        reasoningPerMTokMicrousd: 16_000_000n,
      },
    },
  ],
};

/** PRICE plus a priority tier at double, audio in and out, and a fee for each per-call feature the specs use. */
const PRICED_EVERYTHING: PriceRevision = {
  ...PRICE,
  id: 'price-structured',
  audioInputPerMTokMicrousd: 32_000_000n,
  audioOutputPerMTokMicrousd: 64_000_000n,
  serviceTiers: {
    priority: {
      rates: {
        inputPerMTokMicrousd: 4_000_000n,
        cachedInputPerMTokMicrousd: 2_000_000n,
        outputPerMTokMicrousd: 16_000_000n,
        reasoningPerMTokMicrousd: 16_000_000n,
        audioInputPerMTokMicrousd: 64_000_000n,
        audioOutputPerMTokMicrousd: 128_000_000n,
      },
    },
  },
  perCallFees: [
    { feature: 'web_search', feeMicrousd: 30_000n, reservedCallsPerRequest: 3 },
    { feature: 'predicted_output', feeMicrousd: 1_000n, reservedCallsPerRequest: 1 },
  ],
};

const WORKLOAD: WorkloadPolicy = {
  id: 'wl-1',
  team: 'search',
  environment: 'prod',
  defaultMaxCandidates: 1,
  perCandidateOutputCeiling: 500,
  budgetMicrousd: 10_000_000n,
  budgetPeriod: 'month',
  allowedAliases: ['approved-standard', 'gemini-standard', 'unverified-standard', 'unpriced-standard', 'ghost-alias'],
  fallbackChain: [],
  allowLength: false,
  allowContentFilter: true,
  deadlineMs: 30_000,
  maxInFlight: 8,
  tokensPerMinute: null,
  allowProviderStorage: false,
  maxCallsPerWorkflow: null,
  workflowWindowSeconds: 60,
  workflowIdField: null,
};

function route(alias: string, routeId: string, change: Partial<RouteContract> = {}): RouteContract {
  return {
    routeId,
    alias,
    routeCreatedAt: new Date('2026-01-01T00:00:00Z'),
    version: 3,
    providerKind: 'openai-chat',
    upstreamBaseUrl: 'https://upstream.example/v1',
    upstreamModel: 'model-x',
    credentialRef: null,
    upstreamIdempotencyHeader: null,
    candidateParam: 'n',
    maxCandidates: 4,
    outputCapParam: 'max_completion_tokens',
    outputCapSemantics: 'per_candidate',
    usageShape: 'openai',
    streamingUsage: 'final_chunk',
    gatewayVersion: '1.0.0',
    clientLibraryVersion: '4.0.0',
    verifiedAt: new Date(T0.getTime() - HOUR_MS),
    verifiedBy: 'olga',
    verificationTtlSeconds: 24 * 3600,
    pricedFeatures: [],
    mediaInputTokens: DEFAULT_MEDIA_INPUT_TOKENS,
    ...change,
  };
}

const ROUTES: RouteContract[] = [
  route('approved-standard', 'rt-openai'),
  route('gemini-standard', 'rt-gemini', {
    providerKind: 'gemini-generate',
    candidateParam: 'candidateCount',
    outputCapParam: 'maxOutputTokens',
  }),
  route('unverified-standard', 'rt-unverified', { verifiedAt: null, verifiedBy: null }),
  route('unpriced-standard', 'rt-unpriced'),
  // exists in the catalog, but wl-1 may not use it
  route('other-team-route', 'rt-other'),
];

/** Workload-wide, up to 3 candidates of at most 200 output tokens each. */
const EXCEPTION: ActiveException = {
  id: 'ex-wide',
  workloadId: 'wl-1',
  routeId: null,
  maxCandidates: 3,
  perCandidateOutputCeiling: 200,
  budgetMicrousd: 1_000_000n,
  expiresAt: new Date(T0.getTime() + 24 * HOUR_MS),
  status: 'active',
  allowsStreaming: false,
  allowsDeterministicSampling: false,
};

/** The three catalog reads admission makes per request, from fixed in-memory tables. */
class FakeCatalog {
  readonly workloads = new Map<string, WorkloadPolicy>([[hashKey(KEY), WORKLOAD]]);
  readonly routes = new Map<string, RouteContract>(ROUTES.map((r) => [r.alias, r]));
  readonly prices = new Map<string, PriceRevision>([
    ['rt-openai', PRICE],
    ['rt-gemini', PRICE],
    ['rt-unverified', PRICE],
    ['rt-other', PRICE],
  ]);
  readonly keyLookups: string[] = [];
  scopeLimits: ScopeLimits = { team: null, environment: null };
  experiment: RunningExperiment | null = null;

  async runningExperiment(): Promise<RunningExperiment | null> {
    return this.experiment;
  }

  async scopeLimitsFor(): Promise<ScopeLimits> {
    return this.scopeLimits;
  }

  async workloadByKeyHash(keyHash: string): Promise<WorkloadPolicy | null> {
    this.keyLookups.push(keyHash);
    return this.workloads.get(keyHash) ?? null;
  }

  async routeByAlias(alias: string): Promise<RouteContract | null> {
    return this.routes.get(alias) ?? null;
  }

  async priceAt(routeId: string, _at: Date): Promise<PriceRevision | null> {
    return this.prices.get(routeId) ?? null;
  }
}

class FakeExceptions {
  exceptions: ActiveException[] = [];
  readonly queries: Array<{ workloadId: string; now: Date }> = [];

  async activeExceptions(workloadId: string, now: Date): Promise<ActiveException[]> {
    this.queries.push({ workloadId, now });
    return this.exceptions.filter((e) => e.workloadId === workloadId);
  }
}

type Prior = { id: string; requestFingerprint: string; status: string; streamMode: string };

/** Records every admit/recordDenial; an allowed admit stores the action under its Idempotency-Key. */
class FakeAdmissions {
  nextResult: AdmitResult = { ok: true };
  /** runs inside admit(), before the result is returned (e.g. a concurrent twin committing first) */
  duringAdmit: (input: AdmitInput) => void = () => undefined;
  readonly admitted: AdmitInput[] = [];
  readonly denials: Array<{ key: string; event: AdmissionDecisionV1 }> = [];
  readonly priors = new Map<string, Prior>();

  async admit(input: AdmitInput): Promise<AdmitResult> {
    this.admitted.push(input);
    this.duringAdmit(input);
    const result = this.nextResult;
    if (result.ok && input.action.idempotencyKey) {
      this.priors.set(`${input.action.workloadId}/${input.action.idempotencyKey}`, {
        id: input.action.id,
        requestFingerprint: input.action.requestFingerprint,
        status: 'admitted',
        streamMode: input.action.streamMode,
      });
    }
    return result;
  }

  async recordDenial(key: string, event: AdmissionDecisionV1): Promise<void> {
    this.denials.push({ key, event });
  }

  async findByIdempotencyKey(workloadId: string, key: string): Promise<Prior | null> {
    return this.priors.get(`${workloadId}/${key}`) ?? null;
  }
}

class FakeBus {
  readonly published: Array<{ topicKey: TopicKey; messages: Array<{ key: string; value: unknown }> }> = [];
  /** what the reply router held at the moment of publishing */
  readonly waitersAtPublish: number[] = [];
  fail: Error | null = null;

  constructor(private readonly replies: ReplyRouter) {}

  async publish(topicKey: TopicKey, messages: Array<{ key: string; value: unknown }>): Promise<void> {
    this.waitersAtPublish.push(this.replies.pending);
    if (this.fail) throw this.fail;
    // the real bus validates against the topic schema before sending
    for (const m of messages) Topics[topicKey].schema.parse(m.value);
    this.published.push({ topicKey, messages });
  }
}

const CONFIG: ServiceConfig = {
  serviceName: 'admission',
  instanceId: 'adm-1',
  databaseUrl: 'postgres://unused',
  kafkaBrokers: [],
  logLevel: 'silent',
  host: '127.0.0.1',
};

const silentLogger = { info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;

function setup() {
  const catalog = new FakeCatalog();
  const exceptions = new FakeExceptions();
  const admissions = new FakeAdmissions();
  const replies = new ReplyRouter();
  const bus = new FakeBus(replies);
  const cipher = new ContentCipher(Buffer.alloc(32, 1));
  const metrics = new AdmissionMetrics(new Metrics('test'));
  const clock: Clock = { now: () => new Date(T0) };
  let ids = 0;
  const admit = new AdmitRequest(
    catalog as unknown as CatalogCache,
    exceptions as unknown as CatalogRepository,
    admissions as unknown as AdmissionRepository,
    // withdraw() is covered on Postgres (apps/admission/test/withdraw.int-spec.ts)
    {} as ActionWithdrawal,
    bus as unknown as KafkaBus,
    replies,
    cipher,
    metrics,
    CONFIG,
    silentLogger,
    clock,
    { next: () => `00000000-0000-4000-8000-${String(++ids).padStart(12, '0')}` },
  );
  return { admit, catalog, exceptions, admissions, bus, replies, cipher, metrics };
}

function chat(change: Record<string, unknown> = {}, key: string | null = KEY, idem: string | null = null): AdmitRequestCommand {
  return fromOpenAiChat({ model: 'approved-standard', messages: [{ role: 'user', content: PROMPT }], ...change }, key, idem);
}

function gemini(alias: string, generationConfig: Record<string, unknown> = {}, key: string | null = KEY): AdmitRequestCommand {
  return fromGeminiGenerate({ contents: [{ role: 'user', parts: [{ text: PROMPT }] }], generationConfig }, alias, false, key, null);
}

function responses(change: Record<string, unknown> = {}, key: string | null = KEY): AdmitRequestCommand {
  return fromOpenAiResponses({ model: 'approved-standard', input: PROMPT, ...change }, key, null);
}

async function rejectionOf(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the promise to reject');
}

describe('AdmitRequest', () => {
  describe('denials: a typed error, one sanitised deny event, no reservation', () => {
    it.each<[string, DenialCode, (f: ReturnType<typeof setup>) => AdmitRequestCommand, Partial<AdmissionDecisionV1>]>([
      [
        'an alias the workload may not use',
        'unknown_route',
        () => chat({ model: 'other-team-route' }),
        { workload_id: 'wl-1', route_id: null },
      ],
      ['an alias the catalog does not know', 'unknown_route', () => chat({ model: 'nope' }), { workload_id: 'wl-1', environment: 'prod' }],
      [
        'an allowed alias with no route behind it',
        'unknown_route',
        () => chat({ model: 'ghost-alias' }),
        { workload_id: 'wl-1', route_id: null },
      ],
      ['a Gemini request to an OpenAI route', 'unknown_route', () => gemini('approved-standard'), { route_id: null }],
      ['an OpenAI request to a Gemini route', 'unknown_route', () => chat({ model: 'gemini-standard' }), { route_id: null }],
      [
        'n above the default maximum (no exception)',
        'candidate_count_exceeds_policy',
        () => chat({ n: 5 }),
        { requested_candidate_count: 5, route_id: 'rt-openai', approved_max_candidates: 1 },
      ],
      [
        'candidateCount above the default maximum',
        'candidate_count_exceeds_policy',
        () => gemini('gemini-standard', { candidateCount: 2 }),
        { requested_candidate_count: 2 },
      ],
      [
        'n above the exception maximum',
        'candidate_count_exceeds_policy',
        (f) => ((f.exceptions.exceptions = [EXCEPTION]), chat({ n: 4 })),
        { requested_candidate_count: 4, approved_max_candidates: 3 },
      ],
      ['n = 0', 'invalid_request', () => chat({ n: 0 }), { requested_candidate_count: 0 }],
      ['n = 1.5', 'invalid_request', () => chat({ n: 1.5 }), { requested_candidate_count: null }],
      ['n = "2"', 'invalid_request', () => chat({ n: '2' }), { requested_candidate_count: null }],
      ['n = true', 'invalid_request', () => chat({ n: true }), { requested_candidate_count: null }],
      [
        'multi-candidate on an unverified contract, even with an exception',
        'route_contract_unverified',
        (f) => ((f.exceptions.exceptions = [EXCEPTION]), chat({ model: 'unverified-standard', n: 2 })),
        { route_id: 'rt-unverified' },
      ],
      [
        'multi-candidate on a stale contract',
        'route_contract_unverified',
        (f) => {
          f.exceptions.exceptions = [EXCEPTION];
          f.catalog.routes.set(
            'approved-standard',
            route('approved-standard', 'rt-openai', { verifiedAt: new Date(T0.getTime() - 25 * HOUR_MS) }),
          );
          return chat({ n: 2 });
        },
        { route_id: 'rt-openai' },
      ],
      [
        'a route with no price in force',
        'route_contract_unverified',
        () => chat({ model: 'unpriced-standard' }),
        { route_id: 'rt-unpriced' },
      ],
      [
        'streaming with two candidates under an exception that does not allow streams',
        'candidate_count_exceeds_policy',
        (f) => ((f.exceptions.exceptions = [EXCEPTION]), chat({ n: 2, stream: true })),
        { stream_mode: 'sse' },
      ],
      [
        'two candidates at temperature 0 under an exception without allows_deterministic_sampling',
        'candidate_count_without_sampling',
        (f) => ((f.exceptions.exceptions = [EXCEPTION]), chat({ n: 2, temperature: 0 })),
        { requested_candidate_count: 2, approved_max_candidates: 3 },
      ],
      [
        'two Gemini candidates at top_k 1 (snake_case) under an exception without the flag',
        'candidate_count_without_sampling',
        (f) => ((f.exceptions.exceptions = [EXCEPTION]), gemini('gemini-standard', { candidateCount: 2, top_k: 1 })),
        { requested_candidate_count: 2 },
      ],
    ])('%s → %s', async (_what, code, build, eventFields) => {
      const f = setup();
      const err = await rejectionOf(f.admit.execute(build(f)));

      expect(err).toBeInstanceOf(DomainError);
      expect(err).toMatchObject({ code });
      expect(f.admissions.admitted).toHaveLength(0);
      expect(f.bus.published).toHaveLength(0);
      expect(f.admissions.denials).toHaveLength(1);
      const { key, event } = f.admissions.denials[0];
      expect(key).toBe(event.workload_id ?? 'unauthenticated');
      expect(event).toMatchObject({
        policy_result: 'deny',
        policy_reason: code,
        timestamp: T0.toISOString(),
        reserved_microusd: null,
        ...eventFields,
      });
      // the event fits the public topic's schema, carries the action id the client sees, and no content
      expect(() => admissionDecisionV1.parse(event)).not.toThrow();
      expect((err as DomainError).headers['x-gateway-action-id']).toBe(event.action_id);
      expect(JSON.stringify(event)).not.toContain(PROMPT);
      expect(JSON.stringify(event)).not.toContain(KEY);
    });

    // Regression test for a fixed bug: admit-request.usecase.ts line 87 fills requested_candidate_count only once the count
    // is decided; denials before that (unauthorized, unknown_route, no price) record null, which
    // DESIGN §8 reserves for an omitted field, so finance reads "omitted" for n=3.
    it('an early denial still records the candidate count as sent', async () => {
      const f = setup();
      await rejectionOf(f.admit.execute(chat({ model: 'nope', n: 3 })));
      expect(f.admissions.denials[0].event).toMatchObject({ policy_reason: 'unknown_route', requested_candidate_count: 3 });
      // the maximum is not known before the route is: null, never a guess
      expect(f.admissions.denials[0].event.approved_max_candidates).toBeNull();
    });

    it('hashes the key before looking it up, and never looks up a missing one', async () => {
      const f = setup();
      await rejectionOf(f.admit.execute(chat({}, null)));
      expect(f.catalog.keyLookups).toEqual([]);
      await rejectionOf(f.admit.execute(chat({}, 'gw-key-nobody')));
      expect(f.catalog.keyLookups).toEqual([hashKey('gw-key-nobody')]);
      expect(f.catalog.keyLookups[0]).toMatch(/^[0-9a-f]{64}$/);
    });

    it('names the offending field: model for routes, n / candidateCount for counts', async () => {
      const f = setup();
      await expect(f.admit.execute(chat({ model: 'nope' }))).rejects.toMatchObject({ param: 'model' });
      await expect(f.admit.execute(chat({ n: 3 }))).rejects.toMatchObject({ param: 'n' });
      await expect(f.admit.execute(gemini('gemini-standard', { candidateCount: 3 }))).rejects.toMatchObject({
        param: 'generationConfig.candidateCount',
      });
    });

    it.each<[string, unknown, boolean]>([
      ['omitted', undefined, false],
      ['null', null, false],
      ['equal to the default', 1, false],
      ['a string', '2', false],
      ['above the default', 2, true],
    ])('reads exceptions (always fresh) only when n is above the default: n %s', async (_what, n, queried) => {
      const f = setup();
      await f.admit.execute(chat(n === undefined ? {} : { n })).catch(() => undefined);
      expect(f.exceptions.queries).toEqual(queried ? [{ workloadId: 'wl-1', now: T0 }] : []);
    });

    it('budget_exhausted from the transaction: the reservation was attempted once, then a deny event', async () => {
      const f = setup();
      f.admissions.nextResult = { ok: false, code: 'budget_exhausted', scope: 'workload', quotaScope: 'workload', remainingMicrousd: 12n };
      const err = await rejectionOf(f.admit.execute(chat()));

      expect(err).toBeInstanceOf(DomainError);
      expect(err).toMatchObject({ code: 'budget_exhausted' });
      expect((err as DomainError).message).toContain('12 micro-USD left');
      expect((err as DomainError).headers['retry-after']).toBeUndefined();
      expect(f.admissions.admitted).toHaveLength(1);
      expect(f.admissions.denials).toEqual([
        {
          key: 'wl-1',
          event: expect.objectContaining({ policy_result: 'deny', policy_reason: 'budget_exhausted', effective_candidate_count: 1 }),
        },
      ]);
      // the deny event is a new event, not the allow event that rolled back
      expect(f.admissions.denials[0].event.event_id).not.toBe(f.admissions.admitted[0].decisionEvent.event_id);
      expect(f.bus.published).toHaveLength(0);
    });

    it('concurrency_limit_exceeded from the transaction carries Retry-After', async () => {
      const f = setup();
      f.admissions.nextResult = { ok: false, code: 'concurrency_limit_exceeded', inFlight: 8 };
      const err = await rejectionOf(f.admit.execute(chat()));

      expect(err).toBeInstanceOf(DomainError);
      expect(err).toMatchObject({ code: 'concurrency_limit_exceeded' });
      expect((err as DomainError).headers).toEqual({ 'x-gateway-action-id': f.admissions.admitted[0].action.id, 'retry-after': '1' });
      expect(f.admissions.denials.map((d) => d.event.policy_reason)).toEqual(['concurrency_limit_exceeded']);
    });

    // Issue 8 item 7: a 401 used to write a decision event (an outbox row) per request, so a flood
    // of bad keys became a flood of rows. Nobody is accountable for it: it is counted instead.
    it.each([
      ['a missing key', null, 'missing_credential'],
      ['an unknown key', 'gw-key-nobody', 'unknown_credential'],
    ])('%s → unauthorized, nothing recorded or published, counted by reason', async (_what, key, reason) => {
      const f = setup();
      const err = await rejectionOf(f.admit.execute(chat({}, key)));

      expect(err).toMatchObject({ code: 'unauthorized' });
      expect(f.admissions.denials).toHaveLength(0);
      expect(f.admissions.admitted).toHaveLength(0);
      expect(f.bus.published).toHaveLength(0);
      expect((err as DomainError).headers['x-gateway-action-id']).toBeUndefined();
      const metric = await f.metrics.unauthenticated.get();
      expect(metric.values.map((v) => [v.labels.reason, v.value])).toEqual([[reason, 1]]);
    });

    it('counts every decision by result and code', async () => {
      const f = setup();
      await rejectionOf(f.admit.execute(chat({}, null)));
      await rejectionOf(f.admit.execute(chat({ n: 9 })));
      await f.admit.execute(chat());
      const metric = await f.metrics.decisions.get();
      const byLabels = Object.fromEntries(metric.values.map((v) => [`${v.labels.result}/${v.labels.code}`, v.value]));
      expect(byLabels).toEqual({ 'deny/unauthorized': 1, 'deny/candidate_count_exceeds_policy': 1, 'allow/ok': 1 });
    });

    it('observes the requested count per workload and route, allowed or refused; omitted is 1 with omitted="true"', async () => {
      const f = setup();
      await rejectionOf(f.admit.execute(chat({ n: 9 })));
      await f.admit.execute(chat({ n: 1 }));
      await f.admit.execute(chat());
      await rejectionOf(f.admit.execute(chat({ n: 0 })));
      await rejectionOf(f.admit.execute(chat({ model: 'nope', n: 2 })));
      const metric = await f.metrics.requestedCandidates.get();
      const at = (suffix: string, omitted: string, le?: number) =>
        metric.values.find(
          (v) =>
            v.metricName === `gateway_admission_requested_candidates${suffix}` &&
            v.labels.omitted === omitted &&
            v.labels.workload === 'wl-1' &&
            v.labels.route === 'rt-openai' &&
            (le === undefined || (v.labels as Record<string, unknown>).le === le),
        )?.value;
      expect(at('_count', 'false')).toBe(2); // n=9 (refused) and n=1; n=0 is no count, an unknown route has no route
      expect(at('_sum', 'false')).toBe(10);
      expect(at('_bucket', 'false', 1)).toBe(1);
      expect(at('_count', 'true')).toBe(1);
      expect(at('_sum', 'true')).toBe(1);
    });
  });

  describe('admitted', () => {
    it('omitted n: effective 1, the workload ceiling, a monthly budget hold and an allow event', async () => {
      const f = setup();
      const admitted = await f.admit.execute(chat());

      expect(f.admissions.admitted).toHaveLength(1);
      const input = f.admissions.admitted[0];
      // price(29 input tokens × 2) + 1 × 500 output tokens × 8
      const reserved = 29n * 2n + 500n * 8n;
      expect(input.reservation).toMatchObject({ reservedOutputTokens: 500, reservedMicrousd: reserved, priceRevisionId: 'price-1' });
      expect(input.action).toMatchObject({
        id: admitted.actionId,
        workloadId: 'wl-1',
        environment: 'prod',
        routeId: 'rt-openai',
        routeVersion: 3,
        modelAlias: 'approved-standard',
        apiKind: 'openai-chat',
        streamMode: 'none',
        requestedCandidates: null,
        effectiveCandidates: 1,
        outputCeiling: 500,
        inputTokensEstimate: INPUT_TOKENS,
        exceptionId: null,
        idempotencyKey: null,
        deadlineAt: new Date(T0.getTime() + 30_000),
        dispatchDeadlineAt: new Date(T0.getTime() + 32_000),
      });
      expect(input.action.requestFingerprint).toMatch(/^[0-9a-f]{64}$/);
      expect(input.now).toEqual(T0);
      expect(input.workloadBudget).toEqual({ budgetMicrousd: 10_000_000n, periodStart: MONTH_START });
      expect(input.exceptionBudget).toBeNull();
      expect(input.concurrency).toEqual({ scope: 'workload', scopeId: 'wl-1', maxInFlight: 8 });

      expect(admitted.headers).toEqual({
        'x-gateway-action-id': admitted.actionId,
        'x-gateway-requested-candidates': 'omitted',
        'x-gateway-effective-candidates': '1',
        'x-gateway-reserved-microusd': input.reservation.reservedMicrousd.toString(),
      });
      expect(admitted.headers['x-gateway-reserved-microusd']).toBe('4058');
      expect(admitted.deadline).toEqual(new Date(T0.getTime() + 30_000));

      const event = input.decisionEvent;
      expect(event).toMatchObject({
        action_id: admitted.actionId,
        workload_id: 'wl-1',
        environment: 'prod',
        route_id: 'rt-openai',
        route_version: 3,
        model_alias: 'approved-standard',
        requested_candidate_count: null,
        effective_candidate_count: 1,
        stream_mode: 'none',
        policy_result: 'allow',
        policy_reason: 'within_policy',
        reserved_microusd: '4058',
        exception_id: null,
        timestamp: T0.toISOString(),
      });
      expect(() => admissionDecisionV1.parse(event)).not.toThrow();
      expect(JSON.stringify(event)).not.toContain(PROMPT);
      expect(f.admissions.denials).toHaveLength(0);
      expect(f.exceptions.queries).toHaveLength(0);
    });

    it('builds the dispatch command: route target, ceiling, acceptance and the normalised body', async () => {
      const f = setup();
      const admitted = await f.admit.execute(chat({ max_tokens: 100, stream_options: { include_usage: true } }));
      const command: DispatchCommandV1 = admitted.command;

      expect(() => dispatchCommandV1.parse(command)).not.toThrow();
      expect(command).toMatchObject({
        action_id: admitted.actionId,
        request_id: f.admissions.admitted[0].decisionEvent.request_id,
        workload_id: 'wl-1',
        environment: 'prod',
        api_kind: 'openai-chat',
        stream: false,
        requested_candidates: null,
        effective_candidates: 1,
        output_ceiling: 100,
        include_usage_for_client: true,
        deadline: new Date(T0.getTime() + 30_000).toISOString(),
        dispatch_deadline: new Date(T0.getTime() + 32_000).toISOString(),
        acceptance: { allow_length: false, allow_content_filter: true },
        route: {
          route_id: 'rt-openai',
          route_version: 3,
          model_alias: 'approved-standard',
          provider_kind: 'openai-chat',
          base_url: 'https://upstream.example/v1',
          upstream_model: 'model-x',
          candidate_param: 'n',
          output_cap_param: 'max_completion_tokens',
          output_cap_semantics: 'per_candidate',
          price_revision_id: 'price-1',
        },
      });
      // the body travels without any cap or count field: the adapter writes the reserved ones
      expect(command.request).toEqual({
        model: 'approved-standard',
        messages: [{ role: 'user', content: PROMPT }],
        stream_options: { include_usage: true },
      });
      // a smaller cap than policy shrinks the reservation: 43 input tokens (this body) × 2 + 100 × 8
      expect(f.admissions.admitted[0].reservation.reservedMicrousd).toBe(886n);
    });

    describe('extra attempts: the primary hold and the approved fallbacks travel in the command', () => {
      /** $4 in, $16 out per MTok: every fallback hold here is exactly double the primary's */
      const DOUBLE: PriceRevision = { ...PRICE, id: 'price-double', inputPerMTokMicrousd: 4_000_000n, outputPerMTokMicrousd: 16_000_000n };
      function withChain(f: ReturnType<typeof setup>, chain: string[]) {
        f.catalog.workloads.set(hashKey(KEY), { ...WORKLOAD, fallbackChain: chain });
        f.catalog.routes.set('backup-openai', route('backup-openai', 'rt-backup', { upstreamModel: 'model-y' }));
        f.catalog.routes.set('backup-shared', route('backup-shared', 'rt-shared', { outputCapSemantics: 'shared', maxCandidates: 1 }));
        f.catalog.prices.set('rt-backup', DOUBLE);
        f.catalog.prices.set('rt-shared', PRICE);
      }

      it('hold_microusd is the reservation; each fallback carries its own hold at its own price', async () => {
        const f = setup();
        withChain(f, [
          'approved-standard',
          'backup-openai',
          'gemini-standard',
          'unverified-standard',
          'unpriced-standard',
          'backup-shared',
        ]);
        const admitted = await f.admit.execute(chat({ max_tokens: 100 }));
        const reserved = f.admissions.admitted[0].reservation.reservedMicrousd;
        expect(reserved).toBe(29n * 2n + 100n * 8n);
        expect(admitted.command.hold_microusd).toBe(String(reserved));
        // the primary itself, a Gemini route (another dialect), an unverified route and a route with
        // no price in force are left out; the order of the chain is kept
        expect(admitted.command.fallbacks?.map((x) => x.route.route_id)).toEqual(['rt-backup', 'rt-shared']);
        expect(admitted.command.fallbacks?.[0]).toMatchObject({
          hold_microusd: String(reserved * 2n),
          route: { route_id: 'rt-backup', model_alias: 'backup-openai', upstream_model: 'model-y', price_revision_id: 'price-double' },
        });
        expect(admitted.command.fallbacks?.[1].hold_microusd).toBe(String(reserved));
        expect(() => dispatchCommandV1.parse(admitted.command)).not.toThrow();
      });

      it('several candidates: no fallback unless every route in the chain is verified for the count', async () => {
        const f = setup();
        f.exceptions.exceptions = [EXCEPTION];
        withChain(f, ['backup-openai', 'backup-shared']);
        // rt-shared supports one candidate only: the whole chain is off for this action
        expect((await f.admit.execute(chat({ n: 2 }))).command.fallbacks).toEqual([]);
        withChain(f, ['backup-openai']);
        const admitted = await f.admit.execute(chat({ n: 2 }));
        // per_candidate: 29 × 4 + 2 × 200 × 16 at the fallback's price
        expect(admitted.command.fallbacks?.map((x) => x.hold_microusd)).toEqual([String(29n * 4n + 400n * 16n)]);
      });
    });

    it('a cap above policy is clamped to the workload ceiling', async () => {
      const f = setup();
      const admitted = await f.admit.execute(chat({ max_completion_tokens: 10_000 }));
      expect(admitted.command.output_ceiling).toBe(500);
      expect(f.admissions.admitted[0].reservation.reservedOutputTokens).toBe(500);
    });

    it('n = 2 within an active exception: exception ceiling and budget, within_exception', async () => {
      const f = setup();
      f.exceptions.exceptions = [EXCEPTION];
      const admitted = await f.admit.execute(chat({ n: 2 }));

      const input = f.admissions.admitted[0];
      expect(f.exceptions.queries).toEqual([{ workloadId: 'wl-1', now: T0 }]);
      expect(input.exceptionBudget).toEqual({ exceptionId: 'ex-wide', budgetMicrousd: 1_000_000n });
      expect(input.workloadBudget).toEqual({ budgetMicrousd: 10_000_000n, periodStart: MONTH_START });
      expect(input.action).toMatchObject({ requestedCandidates: 2, effectiveCandidates: 2, outputCeiling: 200, exceptionId: 'ex-wide' });
      // per_candidate: 2 × 200 output tokens
      expect(input.reservation).toMatchObject({ reservedOutputTokens: 400, reservedMicrousd: 29n * 2n + 400n * 8n });
      expect(input.decisionEvent).toMatchObject({
        policy_result: 'allow',
        policy_reason: 'within_exception',
        exception_id: 'ex-wide',
        requested_candidate_count: 2,
        effective_candidate_count: 2,
        reserved_microusd: '3258',
        approved_max_candidates: 3,
      });
      expect(admitted.headers).toMatchObject({
        'x-gateway-requested-candidates': '2',
        'x-gateway-effective-candidates': '2',
        'x-gateway-reserved-microusd': '3258',
      });
      expect(admitted.command).toMatchObject({ requested_candidates: 2, effective_candidates: 2, output_ceiling: 200 });
    });

    it('two candidates at temperature 0 with an exception that allows it; exceptions read even within the default', async () => {
      const f = setup();
      f.exceptions.exceptions = [{ ...EXCEPTION, allowsDeterministicSampling: true }];
      await f.admit.execute(chat({ n: 2, temperature: 0 }));
      expect(f.admissions.admitted[0].action).toMatchObject({ effectiveCandidates: 2, exceptionId: 'ex-wide' });

      const within = setup();
      within.catalog.workloads.set(hashKey(KEY), { ...WORKLOAD, defaultMaxCandidates: 2 });
      await expect(within.admit.execute(chat({ n: 2, temperature: 0 }))).rejects.toMatchObject({
        code: 'candidate_count_without_sampling',
      });
      within.exceptions.exceptions = [{ ...EXCEPTION, allowsDeterministicSampling: true }];
      await within.admit.execute(chat({ n: 2, temperature: 0 }));
      expect(within.admissions.admitted[0].action).toMatchObject({ effectiveCandidates: 2, exceptionId: null });
      // the exception was read, so the maximum the decision applied is its 3, not the default's 2
      expect(within.admissions.admitted[0].decisionEvent).toMatchObject({ approved_max_candidates: 3 });
    });

    it('n = 1 sent explicitly is recorded as requested 1, no exception involved', async () => {
      const f = setup();
      f.exceptions.exceptions = [EXCEPTION];
      const admitted = await f.admit.execute(chat({ n: 1 }));
      expect(admitted.headers['x-gateway-requested-candidates']).toBe('1');
      expect(f.admissions.admitted[0].exceptionBudget).toBeNull();
      expect(f.admissions.admitted[0].action.outputCeiling).toBe(500);
    });

    it('a Gemini request on a Gemini route: candidateCount omitted → effective 1, usage always included', async () => {
      const f = setup();
      const admitted = await f.admit.execute(gemini('gemini-standard', { maxOutputTokens: 50 }));
      expect(admitted.command).toMatchObject({
        api_kind: 'gemini-generate',
        requested_candidates: null,
        effective_candidates: 1,
        output_ceiling: 50,
        include_usage_for_client: true,
        route: { provider_kind: 'gemini-generate', candidate_param: 'candidateCount' },
      });
      expect(f.admissions.admitted[0].action).toMatchObject({
        apiKind: 'gemini-generate',
        routeId: 'rt-gemini',
        inputTokensEstimate: GEMINI_INPUT_TOKENS,
      });
    });

    it('a daily budget holds against the UTC day start', async () => {
      const f = setup();
      f.catalog.workloads.set(hashKey(KEY), { ...WORKLOAD, budgetPeriod: 'day' });
      await f.admit.execute(chat());
      expect(f.admissions.admitted[0].workloadBudget.periodStart).toEqual(new Date('2026-03-17T00:00:00.000Z'));
    });
  });

  describe('spend integrity: spellings, unpriced input and features', () => {
    it('reserves a snake_case Gemini count (it is the count that goes upstream)', async () => {
      const f = setup();
      f.exceptions.exceptions = [{ ...EXCEPTION, routeId: null }];
      const cmd = fromGeminiGenerate(
        { contents: [{ parts: [{ text: PROMPT }] }], generation_config: { candidate_count: 2, max_output_tokens: 100 } },
        'gemini-standard',
        false,
        KEY,
        null,
      );
      const admitted = await f.admit.execute(cmd);
      expect(admitted.command).toMatchObject({ requested_candidates: 2, effective_candidates: 2, output_ceiling: 100 });
      expect(admitted.command.request).toEqual({ contents: [{ parts: [{ text: PROMPT }] }], generationConfig: {} });
      expect(f.admissions.admitted[0].reservation.reservedOutputTokens).toBe(200);
    });

    it('refuses two spellings of one field that disagree, before anything is reserved', async () => {
      const f = setup();
      expect(() =>
        fromGeminiGenerate(
          { contents: [{ parts: [{ text: PROMPT }] }], generationConfig: { candidateCount: 1, candidate_count: 8 } },
          'gemini-standard',
          false,
          KEY,
          null,
        ),
      ).toThrow(expect.objectContaining({ code: 'invalid_request' }));
      expect(() => chat({ max_tokens: 10, max_completion_tokens: 20 })).toThrow(expect.objectContaining({ code: 'invalid_request' }));
      expect(f.admissions.admitted).toHaveLength(0);
    });

    it("reads the contract's own candidate spelling on an openai-compatible route", async () => {
      const f = setup();
      f.catalog.routes.set('approved-standard', {
        ...route('approved-standard', 'rt-openai'),
        providerKind: 'openai-compatible',
        candidateParam: 'num_completions',
      });
      await expect(f.admit.execute(chat({ num_completions: 8 }))).rejects.toMatchObject({ code: 'candidate_count_exceeds_policy' });
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['service_tier', { service_tier: 'priority' }, 'service_tier'],
      ['audio output', { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } }, 'modalities'],
      ['web search', { web_search_options: {} }, 'web_search_options'],
      ['predicted output', { prediction: { type: 'content', content: 'x' } }, 'prediction'],
    ])('refuses %s as unpriced_feature unless the contract declares it and the price revision prices it', async (_name, change, param) => {
      const f = setup();
      await expect(f.admit.execute(chat(change))).rejects.toMatchObject({
        code: 'unpriced_feature',
        param,
        message: expect.stringContaining("route rt-openai's contract"),
      });
      expect(f.admissions.denials[0].event).toMatchObject({ policy_reason: 'unpriced_feature' });
      f.catalog.routes.set('approved-standard', {
        ...route('approved-standard', 'rt-openai'),
        pricedFeatures: ['service_tier', 'audio_output', 'web_search', 'predicted_output'],
      });
      // declared by the contract, but the flat revision in force has no rate for it
      await expect(f.admit.execute(chat(change))).rejects.toMatchObject({
        code: 'unpriced_feature',
        param,
        message: expect.stringContaining('its price revision price-1 does not price'),
      });
      expect(f.admissions.denials[1].event).toMatchObject({ policy_reason: 'unpriced_feature' });
      f.catalog.prices.set('rt-openai', PRICED_EVERYTHING);
      await expect(f.admit.execute(chat(change))).resolves.toMatchObject({ actionId: expect.any(String) });
    });

    describe('reserves at the worst reachable tier (issue 14)', () => {
      /** The chat body of `chat()` with a prompt of `bytes` ASCII bytes estimates 29 + ceil(bytes / 3) - 8 tokens. */
      const withPrompt = (bytes: number, change: Record<string, unknown> = {}) =>
        chat({ messages: [{ role: 'user', content: 'x'.repeat(bytes) }], ...change });
      const reservedBy = async (f: ReturnType<typeof setup>, cmd: AdmitRequestCommand) => {
        await f.admit.execute(cmd);
        const input = f.admissions.admitted[f.admissions.admitted.length - 1];
        return { input: input.action.inputTokensEstimate, reserved: input.reservation.reservedMicrousd };
      };

      it('a prompt whose estimate crosses the context threshold reserves every token at the higher tier', async () => {
        const f = setup();
        f.catalog.prices.set('rt-openai', LONG_CONTEXT);
        const below = await reservedBy(f, withPrompt(0));
        expect(below.input).toBeLessThanOrEqual(LONG_CONTEXT_ABOVE);
        expect(below.reserved).toBe(BigInt(below.input) * 2n + 500n * 8n);
        const above = await reservedBy(f, withPrompt(3 * LONG_CONTEXT_ABOVE));
        expect(above.input).toBeGreaterThan(LONG_CONTEXT_ABOVE);
        // whole_request: input at $4, output at $16 per MTok
        expect(above.reserved).toBe(BigInt(above.input) * 4n + 500n * 16n);
      });

      it('priority is refused on a revision without a priority tier and reserved at priority rates on one with it', async () => {
        const f = setup();
        f.catalog.routes.set('approved-standard', { ...route('approved-standard', 'rt-openai'), pricedFeatures: ['service_tier'] });
        await expect(f.admit.execute(chat({ service_tier: 'priority' }))).rejects.toMatchObject({
          code: 'unpriced_feature',
          param: 'service_tier',
          message: expect.stringContaining("service tier 'priority'"),
        });
        f.catalog.prices.set('rt-openai', PRICED_EVERYTHING);
        expect(await reservedBy(f, chat({ service_tier: 'priority' }))).toEqual({
          input: INPUT_TOKENS + 9,
          reserved: BigInt(INPUT_TOKENS + 9) * 4n + 500n * 16n,
        });
        expect(await reservedBy(f, chat({ service_tier: 'default' }))).toEqual({
          input: INPUT_TOKENS + 9,
          reserved: BigInt(INPUT_TOKENS + 9) * 2n + 500n * 8n,
        });
        await expect(f.admit.execute(chat({ service_tier: 'flex' }))).rejects.toMatchObject({ code: 'unpriced_feature' });
      });

      it('a priced tool adds its fee for the reserved calls', async () => {
        const f = setup();
        f.catalog.routes.set('approved-standard', { ...route('approved-standard', 'rt-openai'), pricedFeatures: ['web_search'] });
        f.catalog.prices.set('rt-openai', PRICED_EVERYTHING);
        const r = await reservedBy(f, chat({ web_search_options: {} }));
        expect(r.reserved).toBe(BigInt(r.input) * 2n + 500n * 8n + 3n * 30_000n);
      });

      it('audio in the prompt reserves the input at the audio rate', async () => {
        const f = setup();
        f.catalog.prices.set('rt-openai', PRICED_EVERYTHING);
        const audio = { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } };
        const r = await reservedBy(f, chat({ messages: [{ role: 'user', content: [audio] }] }));
        expect(r.reserved).toBe(BigInt(r.input) * 32n + 500n * 8n);
      });
    });

    it('refuses cached content and remote files as unpriced_input', async () => {
      const f = setup();
      const withBody = (body: Record<string, unknown>) => fromGeminiGenerate(body, 'gemini-standard', false, KEY, null);
      await expect(
        f.admit.execute(withBody({ contents: [{ parts: [{ text: PROMPT }] }], cached_content: 'cachedContents/abc' })),
      ).rejects.toMatchObject({ code: 'unpriced_input', param: 'cachedContent' });
      await expect(
        f.admit.execute(withBody({ contents: [{ parts: [{ file_data: { file_uri: 'gs://b/f.pdf', mime_type: 'application/pdf' } }] }] })),
      ).rejects.toMatchObject({ code: 'unpriced_input', param: 'contents[0].parts[0].file_data' });
      expect(f.admissions.admitted).toHaveLength(0);
    });

    it('counts tools and inline media in the input estimate', async () => {
      const f = setup();
      const tools = [
        { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } },
      ];
      const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } };
      await f.admit.execute(chat({ tools, messages: [{ role: 'user', content: [{ type: 'text', text: PROMPT }, image] }] }));
      expect(f.admissions.admitted[0].action.inputTokensEstimate).toBeGreaterThan(INPUT_TOKENS + DEFAULT_MEDIA_INPUT_TOKENS.image);
    });

    it("passes the workload's storage opt-in to dispatch", async () => {
      const f = setup();
      expect((await f.admit.execute(chat())).command.allow_provider_storage).toBe(false);
    });
  });

  describe('the Responses API (openai-responses on openai-chat routes)', () => {
    it('one candidate (requested omitted, effective 1), max_output_tokens is the cap, the whole body is the estimate', async () => {
      const f = setup();
      const admitted = await f.admit.execute(
        responses({ instructions: 'be brief', max_output_tokens: 40, tools: [{ type: 'function', name: 'f', parameters: {} }] }),
      );
      expect(admitted.command).toMatchObject({
        api_kind: 'openai-responses',
        requested_candidates: null,
        effective_candidates: 1,
        output_ceiling: 40,
        include_usage_for_client: true,
        route: { provider_kind: 'openai-chat' },
        request: { input: PROMPT, instructions: 'be brief' },
      });
      expect(admitted.command.request).not.toHaveProperty('max_output_tokens');
      expect(admitted.headers).toMatchObject({ 'x-gateway-requested-candidates': 'omitted', 'x-gateway-effective-candidates': '1' });
      const { action, reservation } = f.admissions.admitted[0];
      expect(action).toMatchObject({ apiKind: 'openai-responses', requestedCandidates: null, effectiveCandidates: 1, outputCeiling: 40 });
      // ceil(bytes/3) of the body without its alias, + 4 for the input, + 4 for the instructions, + 3
      const bytes = Buffer.byteLength(
        JSON.stringify({ input: PROMPT, instructions: 'be brief', tools: [{ type: 'function', name: 'f', parameters: {} }] }),
      );
      expect(action.inputTokensEstimate).toBe(Math.ceil(bytes / 3) + 11);
      expect(reservation.reservedOutputTokens).toBe(40);
    });

    it('a cap above policy is clamped to the workload ceiling', async () => {
      const f = setup();
      expect((await f.admit.execute(responses({ max_output_tokens: 100_000 }))).command.output_ceiling).toBe(500);
    });

    it.each<[string, Record<string, unknown>, DenialCode, string]>([
      ['background runs', { background: true }, 'background_not_supported', 'background'],
      ['previous_response_id', { previous_response_id: 'resp_1' }, 'stored_state_not_supported', 'previous_response_id'],
      ['a stored conversation', { conversation: 'conv_1' }, 'stored_state_not_supported', 'conversation'],
      ['store: true without allow_provider_storage', { store: true }, 'provider_storage_not_allowed', 'store'],
      ['web search', { tools: [{ type: 'web_search' }] }, 'unpriced_feature', 'tools[0].type'],
      ['file search', { tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }, 'unpriced_feature', 'tools[0].type'],
      ['code interpreter', { tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] }, 'unpriced_feature', 'tools[0].type'],
      ['image generation', { tools: [{ type: 'image_generation' }] }, 'unpriced_feature', 'tools[0].type'],
      ['computer use', { tools: [{ type: 'computer_use_preview' }] }, 'unpriced_feature', 'tools[0].type'],
      ['a non-default service tier', { service_tier: 'priority' }, 'unpriced_feature', 'service_tier'],
      [
        'a file stored at the provider',
        { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] },
        'unpriced_input',
        'input[0].content[0]',
      ],
      ['a candidate count', { n: 2 }, 'invalid_request', 'n'],
    ])('refuses %s (%s), with a deny event and nothing reserved', async (_name, change, code, param) => {
      const f = setup();
      const build = () => responses(change);
      const err = await rejectionOf(Promise.resolve().then(() => f.admit.execute(build())));
      expect(err).toMatchObject({ code, param });
      expect(f.admissions.admitted).toHaveLength(0);
      expect(f.bus.published).toHaveLength(0);
      if (code !== 'invalid_request') expect(f.admissions.denials[0].event).toMatchObject({ policy_result: 'deny', policy_reason: code });
    });

    it('store: true passes on a workload that allows provider storage', async () => {
      const f = setup();
      f.catalog.workloads.set(hashKey(KEY), { ...WORKLOAD, allowProviderStorage: true });
      const admitted = await f.admit.execute(responses({ store: true }));
      expect(admitted.command).toMatchObject({ allow_provider_storage: true, request: { store: true } });
    });

    it('is served on openai-chat routes only (not on aggregators, not on Gemini routes)', async () => {
      const f = setup();
      await expect(f.admit.execute(responses({ model: 'gemini-standard' }))).rejects.toMatchObject({ code: 'unknown_route' });
      f.catalog.routes.set('approved-standard', { ...route('approved-standard', 'rt-openai'), providerKind: 'openai-compatible' });
      await expect(f.admit.execute(responses())).rejects.toMatchObject({ code: 'unknown_route' });
    });
  });

  describe('quota scopes and fan-out (issue 16)', () => {
    const TEAM_LIMIT = {
      scope: 'team' as const,
      scopeId: 'search',
      tokensPerMinute: 5000,
      budgetMicrousd: 2_000_000n,
      budgetPeriod: 'day' as const,
    };

    it('counts the request against the team and environment limits, in lock order, and names every scope that applied', async () => {
      const f = setup();
      f.catalog.scopeLimits = {
        team: { ...TEAM_LIMIT, tokenRateEnforcement: 'organisation' },
        environment: {
          scope: 'environment',
          scopeId: 'prod',
          tokensPerMinute: 9000,
          tokenRateEnforcement: 'instance',
          budgetMicrousd: null,
          budgetPeriod: 'month',
        },
      };
      await f.admit.execute(chat());
      const input = f.admissions.admitted[0];
      expect(input.scopeTokenRates).toEqual([
        expect.objectContaining({ scope: 'team', scopeId: 'search', instanceId: null, limit: 5000 }),
        expect.objectContaining({ scope: 'environment', scopeId: 'prod', instanceId: 'adm-1', limit: 9000 }),
      ]);
      expect(input.scopeBudgets).toEqual([
        { scope: 'team', scopeId: 'search', budgetMicrousd: 2_000_000n, periodStart: new Date('2026-03-17T00:00:00.000Z') },
      ]);
      expect(input.quotaScope).toBe('workload,team:search,instance:adm-1/environment:prod');
      expect(input.decisionEvent.quota_scope).toBe(input.quotaScope);
      expect(input.workflowCalls).toBeNull();
    });

    it('a refused team budget is budget_exhausted naming the team scope, in the message and the deny event', async () => {
      const f = setup();
      f.admissions.nextResult = { ok: false, code: 'budget_exhausted', scope: 'team', quotaScope: 'team:search', remainingMicrousd: 3n };
      const err = await rejectionOf(f.admit.execute(chat()));
      expect(err).toMatchObject({ code: 'budget_exhausted', message: expect.stringContaining('team:search budget (3 micro-USD left)') });
      expect(f.admissions.denials[0].event).toMatchObject({ policy_reason: 'budget_exhausted', quota_scope: 'team:search' });
    });

    it('an instance-scoped token refusal says so', async () => {
      const f = setup();
      f.admissions.nextResult = { ok: false, code: 'token_quota_exceeded', limit: 10, quotaScope: 'instance:adm-1/team:search' };
      const err = (await rejectionOf(f.admit.execute(chat()))) as DomainError;
      expect(err).toMatchObject({ code: 'token_quota_exceeded', message: expect.stringContaining('scope instance:adm-1/team:search') });
      expect(err.headers['retry-after']).toBe('30');
      expect(f.admissions.denials[0].event.quota_scope).toBe('instance:adm-1/team:search');
    });

    it('a workflow id is counted by its hash per workload and window; over the limit is fanout_limit_exceeded with Retry-After', async () => {
      const f = setup();
      f.catalog.workloads.set(hashKey(KEY), { ...WORKLOAD, maxCallsPerWorkflow: 3, workflowWindowSeconds: 300 });
      await f.admit.execute({ ...chat(), workflowId: 'run-7' });
      const input = f.admissions.admitted[0];
      const hash = hashKey('run-7');
      expect(input.workflowCalls).toEqual({ scopeId: `wl-1/${hash}`, windowStart: new Date('2026-03-17T10:20:00.000Z'), limit: 3 });
      expect(input.workflowIdHash).toBe(hash);
      expect(input.decisionEvent).toMatchObject({ workflow_id_hash: hash, quota_scope: 'workload,workflow' });
      expect(JSON.stringify(input, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))).not.toContain('run-7');

      f.admissions.nextResult = { ok: false, code: 'fanout_limit_exceeded', limit: 3 };
      const err = (await rejectionOf(f.admit.execute({ ...chat(), workflowId: 'run-7' }))) as DomainError;
      expect(err.code).toBe('fanout_limit_exceeded');
      expect(err.headers['retry-after']).toBe('270');
      expect(f.admissions.denials[0].event).toMatchObject({
        policy_reason: 'fanout_limit_exceeded',
        quota_scope: 'workflow',
        workflow_id_hash: hash,
      });
    });

    it('reads the workflow id from the field the workload designates when the header is absent', async () => {
      const f = setup();
      f.catalog.workloads.set(hashKey(KEY), { ...WORKLOAD, maxCallsPerWorkflow: 3, workflowIdField: 'metadata.run' });
      await f.admit.execute(chat({ metadata: { run: 'r-1' } }));
      expect(f.admissions.admitted[0].workflowIdHash).toBe(hashKey('r-1'));
    });

    it('a hostile workflow id is invalid_request before any reservation', async () => {
      const f = setup();
      const err = await rejectionOf(f.admit.execute({ ...chat(), workflowId: 'x'.repeat(257) }));
      expect(err).toMatchObject({ code: 'invalid_request', param: 'x-gateway-workflow-id' });
      expect(f.admissions.admitted).toHaveLength(0);
      expect(f.admissions.denials[0].event.policy_reason).toBe('invalid_request');
    });
  });

  describe('dispatch()', () => {
    const reply: DispatchReplyV1 = {
      kind: 'response',
      http_status: 200,
      body: { choices: [] },
      attempt_id: 'at-1',
      provider_request_id: 'prov-1',
      requested_candidates: null,
      effective_candidates: 1,
      returned_candidates: 1,
      candidates: [],
    };

    it('publishes one encrypted command bound to the action id, after the reply waiter is registered', async () => {
      const f = setup();
      const admitted: AdmittedAction = await f.admit.execute(chat());
      const got: DispatchReplyV1[] = [];
      const stop = await f.admit.dispatch(
        admitted,
        (r) => got.push(r),
        () => got.push({ kind: 'stream_chunk', seq: -1, data: 'timeout' }),
      );
      try {
        expect(f.bus.published).toHaveLength(1);
        const { topicKey, messages } = f.bus.published[0];
        expect(topicKey).toBe('dispatchCommands');
        expect(messages).toHaveLength(1);
        const [message] = messages;
        expect(message.key).toBe(admitted.actionId);
        expect(message.value).toMatchObject({
          action_id: admitted.actionId,
          reply_to: 'adm-1',
          dispatch_deadline: admitted.command.dispatch_deadline,
        });
        expect(f.bus.waitersAtPublish).toEqual([1]);

        const body = (message.value as { body: EncryptedBody }).body;
        expect(body.alg).toBe('A256GCM');
        expect(f.cipher.decrypt(body, admitted.actionId)).toEqual(admitted.command);
        expect(() => f.cipher.decrypt(body, 'another-action')).toThrow();
        expect(JSON.stringify(messages)).not.toContain(PROMPT);
        expect(JSON.stringify(messages)).not.toContain('plum');

        // the waiter registered before publishing receives the reply for this action
        expect(f.replies.deliver(admitted.actionId, reply)).toBe(true);
        expect(got).toEqual([reply]);
      } finally {
        stop();
      }
      expect(f.replies.pending).toBe(0);
    });

    it('times out at the action deadline (frozen clock + fake timers)', async () => {
      jest.useFakeTimers();
      try {
        const f = setup();
        const admitted = await f.admit.execute(chat());
        let timedOut = false;
        await f.admit.dispatch(
          admitted,
          () => undefined,
          () => (timedOut = true),
        );
        jest.advanceTimersByTime(29_999);
        expect(timedOut).toBe(false);
        jest.advanceTimersByTime(1);
        expect(timedOut).toBe(true);
        expect(f.replies.pending).toBe(0);
      } finally {
        jest.useRealTimers();
      }
    });

    // Regression test for a fixed bug: admit-request.usecase.ts dispatch() registers the reply waiter, then awaits
    // bus.publish; when publish rejects, the waiter (and its deadline timer) stays registered
    // and onTimeout still fires at the deadline for an action that was never sent.
    it('a failed publish leaves no reply waiter behind', async () => {
      const f = setup();
      const admitted = await f.admit.execute(chat());
      f.bus.fail = new Error('broker down');
      let timedOut = 0;
      try {
        await expect(
          f.admit.dispatch(
            admitted,
            () => undefined,
            () => timedOut++,
          ),
        ).rejects.toThrow('broker down');
        expect(f.replies.pending).toBe(0);
      } finally {
        f.replies.cancel(admitted.actionId);
      }
      expect(timedOut).toBe(0);
    });
  });

  describe('stopRelay (a dispatched stream whose client is gone)', () => {
    const stops = async (f: ReturnType<typeof setup>) =>
      Object.fromEntries((await f.metrics.relayStops.get()).values.map((v) => [`${v.labels.reason}/${v.labels.outcome}`, v.value]));

    it('publishes the action id, kind, reason and time, on the controls topic, keyed by the action; nothing of the request', async () => {
      const f = setup();
      f.admit.stopRelay('act-9', 'client_left');
      await new Promise((r) => setImmediate(r));
      expect(f.bus.published).toEqual([
        {
          topicKey: 'dispatchControls',
          messages: [
            {
              key: 'act-9',
              value: {
                event_id: expect.any(String),
                action_id: 'act-9',
                kind: 'stop_relay',
                reason: 'client_left',
                timestamp: new Date(T0).toISOString(),
              },
            },
          ],
        },
      ]);
      expect(JSON.stringify(f.bus.published)).not.toContain(PROMPT);
      expect(await stops(f)).toEqual({ 'client_left/published': 1 });
    });

    it('a broker that is down: counted as failed, never thrown, nothing left unhandled', async () => {
      const f = setup();
      f.bus.fail = new Error('broker down');
      expect(() => f.admit.stopRelay('act-9', 'client_too_slow')).not.toThrow();
      await new Promise((r) => setImmediate(r));
      expect(f.bus.published).toEqual([]);
      expect(await stops(f)).toEqual({ 'client_too_slow/failed': 1 });
    });
  });

  describe('Idempotency-Key', () => {
    it('same key + same body → IdempotentReplay carrying the first action id; nothing reserved twice', async () => {
      const f = setup();
      const first = await f.admit.execute(chat({}, KEY, 'idem-1'));
      expect(f.admissions.admitted[0].action.idempotencyKey).toBe('idem-1');

      const err = await rejectionOf(f.admit.execute(chat({}, KEY, 'idem-1')));
      expect(err).toBeInstanceOf(IdempotentReplay);
      expect((err as IdempotentReplay).actionId).toBe(first.actionId);
      expect(err).toMatchObject({ running: true, streamed: false });
      expect(f.admissions.admitted).toHaveLength(1);
      expect(f.bus.published).toHaveLength(0);
    });

    it.each([
      ['admitted', 'none', true, false],
      ['dispatched', 'none', true, false],
      ['answered', 'none', false, false],
      ['failed', 'none', false, false],
      ['expired', 'none', false, false],
      ['dispatched', 'sse', true, true],
    ])('a replay of an action %s (stream mode %s) says running=%s, streamed=%s', async (status, streamMode, running, streamed) => {
      const f = setup();
      await f.admit.execute(chat({}, KEY, 'idem-1'));
      const prior = f.admissions.priors.get('wl-1/idem-1')!;
      f.admissions.priors.set('wl-1/idem-1', { ...prior, status, streamMode });
      const err = await rejectionOf(f.admit.execute(chat({}, KEY, 'idem-1')));
      expect(err).toBeInstanceOf(IdempotentReplay);
      expect(err).toMatchObject({ actionId: prior.id, running, streamed });
    });

    it('same key + different body → idempotency_key_reused', async () => {
      const f = setup();
      await f.admit.execute(chat({}, KEY, 'idem-1'));
      const err = await rejectionOf(f.admit.execute(chat({ max_tokens: 7 }, KEY, 'idem-1')));
      expect(err).toBeInstanceOf(DomainError);
      expect(err).toMatchObject({ code: 'idempotency_key_reused' });
      expect(f.admissions.admitted).toHaveLength(1);
    });

    it('keys are per workload: another workload may reuse the same key', async () => {
      const f = setup();
      f.catalog.workloads.set(hashKey('gw-key-wl-2'), { ...WORKLOAD, id: 'wl-2' });
      await f.admit.execute(chat({}, KEY, 'idem-1'));
      await expect(f.admit.execute(chat({}, 'gw-key-wl-2', 'idem-1'))).resolves.toBeDefined();
      expect(f.admissions.admitted.map((a) => a.action.workloadId)).toEqual(['wl-1', 'wl-2']);
    });

    it('losing the insert race to an identical twin replays the winner', async () => {
      const f = setup();
      f.admissions.nextResult = { ok: false, code: 'idempotency_conflict' };
      f.admissions.duringAdmit = (input) =>
        f.admissions.priors.set('wl-1/idem-1', {
          id: 'act-winner',
          requestFingerprint: input.action.requestFingerprint,
          status: 'admitted',
          streamMode: 'none',
        });
      const err = await rejectionOf(f.admit.execute(chat({}, KEY, 'idem-1')));
      expect(err).toBeInstanceOf(IdempotentReplay);
      expect((err as IdempotentReplay).actionId).toBe('act-winner');
    });

    it('losing the insert race to a different body → idempotency_key_reused', async () => {
      const f = setup();
      f.admissions.nextResult = { ok: false, code: 'idempotency_conflict' };
      f.admissions.duringAdmit = () =>
        f.admissions.priors.set('wl-1/idem-1', {
          id: 'act-winner',
          requestFingerprint: 'f'.repeat(64),
          status: 'admitted',
          streamMode: 'none',
        });
      await expect(f.admit.execute(chat({}, KEY, 'idem-1'))).rejects.toMatchObject({ code: 'idempotency_key_reused' });
    });

    // Regression test for a fixed bug: admit-request.usecase.ts replay() (line 202) and the idempotency_conflict branch
    // (line 143) throw a bare DomainError: no deny event reaches gateway.admission.decisions.v1
    // and the decisions counter is not incremented, although this is a refusal like the others.
    it('a reused Idempotency-Key is recorded as a deny decision like every other refusal', async () => {
      const f = setup();
      await f.admit.execute(chat({}, KEY, 'idem-1'));
      const err = await rejectionOf(f.admit.execute(chat({ max_tokens: 7 }, KEY, 'idem-1')));
      expect(err).toMatchObject({ code: 'idempotency_key_reused' });
      expect(f.admissions.denials).toEqual([
        { key: 'wl-1', event: expect.objectContaining({ policy_result: 'deny', policy_reason: 'idempotency_key_reused' }) },
      ]);
    });

    it('the key is checked only after authentication and routing', async () => {
      const f = setup();
      await f.admit.execute(chat({}, KEY, 'idem-1'));
      await expect(f.admit.execute(chat({}, 'gw-key-nobody', 'idem-1'))).rejects.toMatchObject({ code: 'unauthorized' });
      await expect(f.admit.execute(chat({ model: 'nope' }, KEY, 'idem-1'))).rejects.toMatchObject({ code: 'unknown_route' });
    });
  });

  describe('the hedging experiment (issue 11)', () => {
    const EXPERIMENT: RunningExperiment = { id: 'exp-1', holdoutShareBps: 5_000, hedgePolicyRevisionId: 'hp-1', readOnlyTools: ['lookup'] };

    it('without a running experiment, the action and the command carry no cohort', async () => {
      const f = setup();
      const admitted = await f.admit.execute(chat());
      expect(f.admissions.admitted[0].action).toMatchObject({ experimentId: null, cohort: null });
      expect(admitted.command.experiment).toBeUndefined();
    });

    it('an eligible action gets the cohort assignCohort gives it, on the action row and the dispatch command', async () => {
      const f = setup();
      f.catalog.experiment = EXPERIMENT;
      const seen = new Set<string>();
      for (let i = 0; i < 40; i++) {
        const admitted = await f.admit.execute(chat());
        const expected = assignCohort('exp-1', admitted.actionId, 5_000);
        seen.add(expected);
        expect(f.admissions.admitted[i].action).toMatchObject({ experimentId: 'exp-1', cohort: expected });
        expect(admitted.command.experiment).toEqual({ id: 'exp-1', cohort: expected, policy_revision_id: 'hp-1' });
        expect(() => dispatchCommandV1.parse(admitted.command)).not.toThrow();
      }
      expect([...seen].sort()).toEqual(['hedged', 'holdout']);
    });

    it.each([
      ['streaming', { stream: true }],
      ['a tool the policy does not list as read-only', { tools: [{ type: 'function', function: { name: 'send_mail' } }] }],
    ])('%s is ineligible, excluded from both cohorts', async (_what, change) => {
      const f = setup();
      f.catalog.experiment = EXPERIMENT;
      const admitted = await f.admit.execute(chat(change));
      expect(f.admissions.admitted[0].action).toMatchObject({ experimentId: 'exp-1', cohort: 'ineligible' });
      expect(admitted.command.experiment).toEqual({ id: 'exp-1', cohort: 'ineligible', policy_revision_id: 'hp-1' });
    });

    it('a read-only tool stays eligible', async () => {
      const f = setup();
      f.catalog.experiment = EXPERIMENT;
      const admitted = await f.admit.execute(chat({ tools: [{ type: 'function', function: { name: 'lookup' } }] }));
      expect(f.admissions.admitted[0].action.cohort).toBe(assignCohort('exp-1', admitted.actionId, 5_000));
    });
  });
});
