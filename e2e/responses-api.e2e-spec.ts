import { Topics } from '@gateway/contracts';
import { APIError } from 'openai';
import { actionStatus, settledAction } from './actions';
import { eventually, openai, simLastSeq, stack, TopicReader, uid, withSeeder } from './support';

/**
 * Issue 9 item 4: the OpenAI Responses API (`client.responses.create`) through the gateway with
 * the guarantees of chat completions: one candidate (requested omitted, effective 1), the
 * reserved ceiling written upstream as `max_output_tokens` with `store: false`, refusals with
 * their stable codes before anything is sent, usage settled from the response (whole) or from
 * `response.completed` (streamed) into one ledger row, cached and reasoning tokens priced once,
 * and a stream cut before `response.completed` left for reconciliation.
 */

interface Received {
  seq: number;
  path: string;
  candidateFields: Record<string, unknown>;
  capFields: Record<string, unknown>;
  store: unknown;
  stream: boolean;
}

async function receivedSince(seq: number): Promise<Received[]> {
  const res = await fetch(`${stack.providerSim}/_sim/requests?since=${seq}`);
  return ((await res.json()) as { requests: Received[] }).requests;
}

/** ceil(tokens × per-MTok rate / 1e6): the gateway's rounding, upwards per category. */
const cost = (tokens: number, perMTokMicrousd: bigint) => (BigInt(tokens) * perMTokMicrousd + 999_999n) / 1_000_000n;

describe('OpenAI Responses API (openai SDK client.responses.create)', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  const CEILING = 256;
  // the seeder's default price: $2.50 in, $1.25 cached, $10 out, $10 reasoning per MTok
  const PRICE = { input: 2_500_000n, cached: 1_250_000n, output: 10_000_000n, reasoning: 10_000_000n };
  const settlement = process.env.E2E_SETTLEMENT_URL!;
  let key: string;
  let storingKey: string;
  let finance: string;
  let settled: TopicReader;

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      const sim = stack.providerSim;
      const route = (name: string, upstreamModel: string, providerKind: 'openai-chat' | 'openai-compatible' = 'openai-chat') =>
        seed.route({ routeId: r(name), alias: r(name), providerKind, upstreamBaseUrl: sim, upstreamModel });
      await route('plain', 'sim-gpt');
      await route('thinking', 'sim-gpt;words=10;reasoning=6;cached=4');
      await route('cut', 'sim-gpt;cut-stream');
      await route('agg', 'sim-gpt', 'openai-compatible');
      const aliases = ['plain', 'thinking', 'cut', 'agg'].map(r);
      key = (await seed.workload({ id: r('w'), allowedAliases: aliases, perCandidateOutputCeiling: CEILING })).key;
      storingKey = (
        await seed.workload({ id: r('w-store'), allowedAliases: aliases, perCandidateOutputCeiling: CEILING, allowProviderStorage: true })
      ).key;
      finance = await seed.operator(r('fin'), ['finance']);
    });
    settled = new TopicReader([Topics.usageSettled.name]);
    await settled.start();
  });

  afterAll(() => settled.stop());

  const ledgerRow = async (actionId: string) => {
    const res = await fetch(`${settlement}/ledger?action_id=${actionId}`, { headers: { authorization: `Bearer ${finance}` } });
    expect(res.status).toBe(200);
    const { entries } = (await res.json()) as { entries: Array<Record<string, any>> };
    expect(entries).toHaveLength(1);
    return entries[0];
  };

  it('whole: one candidate, the reserved ceiling upstream as max_output_tokens with store: false, settled from the response', async () => {
    const before = await simLastSeq();
    const { data, response } = await openai(key)
      .responses.create({ model: r('plain'), input: `tell me ${run}`, instructions: 'Be brief.', max_output_tokens: 5000 })
      .withResponse();
    expect(data.object).toBe('response');
    expect(data.status).toBe('completed');
    expect(data.output_text.split(' ')).toHaveLength(12);
    expect(response.headers.get('x-gateway-requested-candidates')).toBe('omitted');
    expect(response.headers.get('x-gateway-effective-candidates')).toBe('1');
    expect(response.headers.get('x-gateway-returned-candidates')).toBe('1');
    expect(BigInt(response.headers.get('x-gateway-reserved-microusd')!)).toBeGreaterThan(0n);

    // what arrived upstream: the Responses endpoint, one cap (the workload ceiling: 5000 was clamped), no count, store false
    const sent = await receivedSince(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ path: '/v1/responses', candidateFields: {}, capFields: { max_output_tokens: CEILING }, store: false });

    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await settledAction(key, actionId);
    expect(status).toMatchObject({
      requested_candidate_count: null,
      effective_candidate_count: 1,
      returned_candidate_count: 1,
      output_ceiling_per_candidate: CEILING,
      stream_mode: 'none',
      delivery_outcome: 'answered',
      acceptance: { verdict: 'valid' },
    });
    const row = await ledgerRow(actionId);
    expect(row).toMatchObject({
      usage_source: 'provider_response',
      requested_candidate_count: null,
      effective_candidate_count: 1,
      returned_candidate_count: 1,
      input_tokens: data.usage!.input_tokens,
      output_tokens_total: data.usage!.output_tokens,
      total_tokens: data.usage!.total_tokens,
      cost_microusd: status.money_microusd.settled,
    });
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'usage.settled for the whole response');
    expect(event).toMatchObject({ stream_mode: 'none', usage_source: 'provider_response', requested_candidate_count: null });
  });

  it('ledger: cached and reasoning tokens are priced once each, the row equals the usage the provider reported', async () => {
    const { data, response } = await openai(key)
      .responses.create({ model: r('thinking'), input: [{ role: 'user', content: `think about ${run}` }] })
      .withResponse();
    const usage = data.usage!;
    expect(usage.input_tokens_details.cached_tokens).toBe(4);
    expect(usage.output_tokens_details.reasoning_tokens).toBe(6);
    expect(usage.output_tokens).toBe(16); // 10 visible + 6 reasoning: output_tokens includes reasoning

    const actionId = response.headers.get('x-gateway-action-id')!;
    await settledAction(key, actionId);
    const row = await ledgerRow(actionId);
    const byCategory = {
      input: cost(usage.input_tokens - 4, PRICE.input),
      cached_input: cost(4, PRICE.cached),
      output: cost(usage.output_tokens - 6, PRICE.output),
      reasoning: cost(6, PRICE.reasoning),
    };
    expect(row).toMatchObject({
      input_tokens: usage.input_tokens,
      cached_input_tokens: 4,
      output_tokens_total: usage.output_tokens,
      reasoning_tokens: 6,
      total_tokens: usage.total_tokens,
      cost_microusd_by_category: Object.fromEntries(Object.entries(byCategory).map(([k, v]) => [k, v.toString()])),
      cost_microusd: Object.values(byCategory)
        .reduce((a, b) => a + b, 0n)
        .toString(),
    });
  });

  it('streamed: SDK events end in response.completed with usage; settled from it with stream_mode sse', async () => {
    const before = await simLastSeq();
    const { data: stream, response } = await openai(key)
      .responses.create({ model: r('plain'), input: `stream ${run}`, stream: true })
      .withResponse();
    const types: string[] = [];
    let text = '';
    let completedUsage: Record<string, any> | null = null;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') text += event.delta;
      if (event.type === 'response.completed') completedUsage = event.response.usage as Record<string, any> | null;
    }
    expect(types[0]).toBe('response.created');
    expect(types[types.length - 1]).toBe('response.completed');
    expect(text.split(' ')).toHaveLength(12);
    expect(completedUsage).not.toBeNull();
    expect((await receivedSince(before))[0]).toMatchObject({
      path: '/v1/responses',
      stream: true,
      capFields: { max_output_tokens: CEILING },
      store: false,
    });

    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await settledAction(key, actionId);
    expect(status).toMatchObject({ stream_mode: 'sse', returned_candidate_count: 1, delivery_outcome: 'answered' });
    const row = await ledgerRow(actionId);
    expect(row).toMatchObject({
      usage_source: 'stream_final_chunk',
      input_tokens: completedUsage!.input_tokens,
      output_tokens_total: completedUsage!.output_tokens,
    });
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'usage.settled for the stream');
    expect(event).toMatchObject({ stream_mode: 'sse', usage_source: 'stream_final_chunk' });
  });

  it('a stream cut before response.completed raises in the SDK and stays with reconciliation (never zero)', async () => {
    const { data: stream, response } = await openai(key)
      .responses.create({ model: r('cut'), input: `cut ${run}`, stream: true })
      .withResponse();
    const types: string[] = [];
    const err = await (async () => {
      for await (const event of stream) types.push(event.type);
    })().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ code: 'upstream_error' });
    expect(types).toContain('response.output_text.delta');
    expect(types).not.toContain('response.completed');
    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await eventually(
      async () => {
        const s = await actionStatus(key, actionId);
        return s.open_reconciliation_cases.length ? s : undefined;
      },
      { what: 'case opened for the cut stream' },
    );
    expect(BigInt(status.money_microusd.unresolved)).toBeGreaterThan(0n);
    expect(status.money_microusd.settled).toBe('0');
  });

  it.each<[string, Record<string, unknown>, string, string]>([
    ['background runs', { background: true }, 'background_not_supported', 'background'],
    ['previous_response_id', { previous_response_id: 'resp_abc' }, 'stored_state_not_supported', 'previous_response_id'],
    ['a stored conversation', { conversation: 'conv_abc' }, 'stored_state_not_supported', 'conversation'],
    ['store: true (workload without allow_provider_storage)', { store: true }, 'provider_storage_not_allowed', 'store'],
    ['a hosted web search tool', { tools: [{ type: 'web_search' }] }, 'unpriced_feature', 'tools[0].type'],
    ['a non-default service tier', { service_tier: 'priority' }, 'unpriced_feature', 'service_tier'],
  ])('refuses %s: 400 with its code, x-should-retry false, nothing sent upstream', async (_name, extra, code, param) => {
    const before = await simLastSeq();
    const err = await openai(key)
      .responses.create({ model: r('plain'), input: `refuse ${run}`, ...extra } as never)
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(APIError);
    expect(err).toMatchObject({ status: 400, code, param });
    expect((err as APIError).headers?.get('x-should-retry')).toBe('false');
    expect(await receivedSince(before)).toHaveLength(0);
  });

  it('store: true reaches the provider only for a workload that allows provider storage', async () => {
    const before = await simLastSeq();
    const data = await openai(storingKey).responses.create({ model: r('plain'), input: `store ${run}`, store: true });
    expect(data.status).toBe('completed');
    expect((await receivedSince(before))[0]).toMatchObject({
      path: '/v1/responses',
      store: true,
      capFields: { max_output_tokens: CEILING },
    });
  });

  it('is not served on an openai-compatible route (no /responses in an aggregator contract)', async () => {
    await expect(openai(key).responses.create({ model: r('agg'), input: 'q' })).rejects.toMatchObject({
      status: 404,
      code: 'unknown_route',
    });
  });
});
