import { ApiError, Modality } from '@google/genai';
import { APIError } from 'openai';
import { actionStatus } from './actions';
import { DEFAULT_PRICES } from '@gateway/testing';
import { eventually, openai, simLastSeq, stack, uid, withSeeder, gemini } from './support';

/**
 * Issue 8 "spend that escapes the reservation", against a recording upstream (provider-sim's
 * request log): for every spelling of the candidate count and the output cap, and every field
 * that changes the provider's price, either what arrived upstream carries exactly one candidate
 * field and one cap field with the values admission reserved, or the request was refused with
 * the stated code and nothing arrived upstream at all.
 */

interface Received {
  seq: number;
  candidateFields: Record<string, unknown>;
  capFields: Record<string, unknown>;
  pricedFields: string[];
  store: unknown;
}

async function receivedSince(seq: number): Promise<Received[]> {
  const res = await fetch(`${stack.providerSim}/_sim/requests?since=${seq}`);
  return ((await res.json()) as { requests: Received[] }).requests;
}

/** The billable detail dispatch kept on the action's attempt row, once the attempt has ended. */
function billedDetail(actionId: string) {
  return withSeeder((_seed, db) =>
    eventually(async () => (await db.prisma.attempt.findFirst({ where: { actionId, endedAt: { not: null } } })) ?? undefined, {
      what: 'the attempt row',
    }),
  );
}

describe('spend integrity: nothing leaves the gateway that was not reserved', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  const CEILING = 64;
  let key: string;
  let storingKey: string;

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      const sim = stack.providerSim;
      await seed.route({ routeId: r('oa'), alias: r('oa'), providerKind: 'openai-chat', upstreamBaseUrl: sim, upstreamModel: 'sim-gpt' });
      const oaPriced = {
        routeId: r('oa-priced'),
        alias: r('oa-priced'),
        providerKind: 'openai-chat',
        upstreamBaseUrl: sim,
        upstreamModel: 'sim-gpt',
        pricedFeatures: ['service_tier'],
      };
      // contract and price revision both price the priority tier; the "declared" twin has a flat price
      await seed.route(oaPriced, { price: { ...DEFAULT_PRICES, serviceTiers: { priority: { rates: DEFAULT_PRICES } } } });
      await seed.route({ ...oaPriced, routeId: r('oa-declared'), alias: r('oa-declared') });
      await seed.route({
        routeId: r('agg'),
        alias: r('agg'),
        providerKind: 'openai-compatible',
        upstreamBaseUrl: sim,
        upstreamModel: 'sim-gpt',
        candidateParam: 'num_completions',
        outputCapParam: 'max_tokens',
      });
      await seed.route({
        routeId: r('gm'),
        alias: r('gm'),
        providerKind: 'gemini-generate',
        upstreamBaseUrl: sim,
        upstreamModel: 'gemini-sim',
      });
      const gmPriced = {
        routeId: r('gm-priced'),
        alias: r('gm-priced'),
        providerKind: 'gemini-generate',
        upstreamBaseUrl: sim,
        upstreamModel: 'gemini-sim',
        pricedFeatures: ['search_grounding'],
      };
      await seed.route(gmPriced, {
        price: { ...DEFAULT_PRICES, perCallFees: [{ feature: 'search_grounding', feeMicrousd: 35_000n, reservedCallsPerRequest: 1 }] },
      });
      await seed.route({ ...gmPriced, routeId: r('gm-declared'), alias: r('gm-declared') });
      const aliases = ['oa', 'oa-priced', 'oa-declared', 'agg', 'gm', 'gm-priced', 'gm-declared'].map(r);
      key = (await seed.workload({ id: r('si'), allowedAliases: aliases, perCandidateOutputCeiling: CEILING })).key;
      storingKey = (
        await seed.workload({ id: r('si-store'), allowedAliases: aliases, perCandidateOutputCeiling: CEILING, allowProviderStorage: true })
      ).key;
      await seed.approvedException({
        workloadId: r('si'),
        maxCandidates: 3,
        perCandidateOutputCeiling: CEILING,
        budgetMicrousd: 5_000_000n,
        expiresAt: new Date(Date.now() + 86400_000),
      });
    });
  });

  const prompt = () => `spend integrity ${uid()}`;

  /** The one request the upstream received since `before` carries exactly the reserved count and cap. */
  async function expectReserved(before: number, actionId: string, candidateField: string, capField: string): Promise<Received> {
    const sent = await receivedSince(before);
    expect(sent).toHaveLength(1);
    const status = await actionStatus(key, actionId).catch(() => actionStatus(storingKey, actionId));
    expect(sent[0].candidateFields).toEqual({ [candidateField]: status.effective_candidate_count });
    expect(sent[0].capFields).toEqual({ [capField]: status.output_ceiling_per_candidate });
    return sent[0];
  }

  async function expectNothingSent(before: number): Promise<void> {
    expect(await receivedSince(before)).toHaveLength(0);
  }

  function rawOpenAi(body: Record<string, unknown>, k = key): Promise<Response> {
    return fetch(`${stack.admission}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${k}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: prompt() }], ...body }),
    });
  }

  function rawGemini(alias: string, body: Record<string, unknown>): Promise<Response> {
    return fetch(`${stack.admission}/v1beta/models/${alias}:generateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: prompt() }] }], ...body }),
    });
  }

  async function refusalCode(res: Response): Promise<string> {
    // OpenAI shape: the code in error.code; Gemini shape: error.code is the HTTP status, the code in error.status
    const body = (await res.json()) as { error: { code?: unknown; status?: string } };
    return typeof body.error.code === 'string' ? body.error.code : (body.error.status ?? '');
  }

  describe('spellings of the candidate count and the cap', () => {
    it.each<[string, Record<string, unknown>, string, string]>([
      ['openai SDK, n omitted', {}, 'n', 'max_completion_tokens'],
      ['openai SDK, n=2 and max_tokens', { n: 2, max_tokens: 50 }, 'n', 'max_completion_tokens'],
      ['openai SDK, both caps equal', { max_tokens: 40, max_completion_tokens: 40 }, 'n', 'max_completion_tokens'],
    ])('%s', async (_name, extra, candidateField, capField) => {
      const before = await simLastSeq();
      const { response } = await openai(key)
        .chat.completions.create({ model: r('oa'), messages: [{ role: 'user', content: prompt() }], ...extra })
        .withResponse();
      await expectReserved(before, response.headers.get('x-gateway-action-id')!, candidateField, capField);
    });

    it.each<[string, Record<string, unknown>]>([
      ['n=2 (the SDK spelling)', { n: 2 }],
      ["num_completions=2 (the contract's spelling)", { num_completions: 2, max_tokens: 30 }],
      ['max_completion_tokens (not the contract cap)', { max_completion_tokens: 20 }],
    ])('openai-compatible route, %s → only num_completions and max_tokens upstream', async (_name, extra) => {
      const before = await simLastSeq();
      const res = await rawOpenAi({ model: r('agg'), ...extra });
      expect(res.status).toBe(200);
      await expectReserved(before, res.headers.get('x-gateway-action-id')!, 'num_completions', 'max_tokens');
    });

    it('gemini SDK candidateCount and maxOutputTokens', async () => {
      const before = await simLastSeq();
      const resp = await gemini(key).models.generateContent({
        model: r('gm'),
        contents: prompt(),
        config: { candidateCount: 2, maxOutputTokens: 30 },
      });
      expect(resp.candidates).toHaveLength(2);
      const id = resp.sdkHttpResponse?.headers?.['x-gateway-action-id'] as string;
      await expectReserved(before, id, 'generationConfig.candidateCount', 'generationConfig.maxOutputTokens');
    });

    it('gemini SDK, count omitted: the effective one is written explicitly', async () => {
      const before = await simLastSeq();
      const resp = await gemini(key).models.generateContent({ model: r('gm'), contents: prompt() });
      const id = resp.sdkHttpResponse?.headers?.['x-gateway-action-id'] as string;
      await expectReserved(before, id, 'generationConfig.candidateCount', 'generationConfig.maxOutputTokens');
    });

    it.each<[string, Record<string, unknown>]>([
      ['generationConfig.candidate_count', { generationConfig: { candidate_count: 2 } }],
      ['generationConfig.max_output_tokens', { generationConfig: { max_output_tokens: 20 } }],
      ['generation_config with proto names', { generation_config: { candidate_count: 2, max_output_tokens: 20 } }],
      [
        'both configs, agreeing',
        { generation_config: { candidate_count: 2 }, generationConfig: { candidateCount: 2, maxOutputTokens: 10 } },
      ],
    ])('gemini raw %s → one camelCase field of each upstream, as reserved', async (_name, extra) => {
      const before = await simLastSeq();
      const res = await rawGemini(r('gm'), extra);
      expect(res.status).toBe(200);
      const sent = await expectReserved(
        before,
        res.headers.get('x-gateway-action-id')!,
        'generationConfig.candidateCount',
        'generationConfig.maxOutputTokens',
      );
      const body = (await res.json()) as { candidates: unknown[] };
      expect(body.candidates).toHaveLength(sent.candidateFields['generationConfig.candidateCount'] as number);
    });

    it('gemini raw candidate_count above the approved maximum is refused, not forwarded as one', async () => {
      const before = await simLastSeq();
      const res = await rawGemini(r('gm'), { generationConfig: { candidate_count: 8 } });
      expect(res.status).toBe(400);
      expect(await refusalCode(res)).toBe('candidate_count_exceeds_policy');
      await expectNothingSent(before);
    });

    it.each<[string, () => Promise<Response>]>([
      ['openai max_tokens ≠ max_completion_tokens', () => rawOpenAi({ model: r('oa'), max_tokens: 10, max_completion_tokens: 20 })],
      ['openai-compatible n ≠ num_completions', () => rawOpenAi({ model: r('agg'), n: 1, num_completions: 3 })],
      [
        'gemini candidateCount ≠ candidate_count',
        () => rawGemini(r('gm'), { generationConfig: { candidateCount: 1, candidate_count: 3 } }),
      ],
      [
        'gemini generationConfig ≠ generation_config',
        () => rawGemini(r('gm'), { generationConfig: { maxOutputTokens: 10 }, generation_config: { max_output_tokens: 20 } }),
      ],
    ])('two spellings that disagree are invalid_request: %s', async (_name, send) => {
      const before = await simLastSeq();
      const res = await send();
      expect(res.status).toBe(400);
      expect(await refusalCode(res)).toBe('invalid_request');
      await expectNothingSent(before);
    });
  });

  describe('fields that change the price', () => {
    it.each<[string, Record<string, unknown>]>([
      ['service_tier priority', { service_tier: 'priority' }],
      ['audio output', { modalities: ['text', 'audio'], audio: { voice: 'alloy', format: 'wav' } }],
      ['web_search_options', { web_search_options: {} }],
      ['prediction', { prediction: { type: 'content', content: 'predicted' } }],
    ])('openai SDK %s → 400 unpriced_feature, nothing upstream', async (_name, extra) => {
      const before = await simLastSeq();
      const err = await openai(key)
        .chat.completions.create({ model: r('oa'), messages: [{ role: 'user', content: prompt() }], ...extra })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(APIError);
      expect((err as APIError).status).toBe(400);
      expect((err as APIError).code).toBe('unpriced_feature');
      await expectNothingSent(before);
    });

    it.each<[string, Record<string, unknown>]>([
      ['models', { models: ['a', 'b'] }],
      ['plugins', { plugins: [{ id: 'web' }] }],
    ])('aggregator %s → 400 unpriced_feature', async (_name, extra) => {
      const before = await simLastSeq();
      const res = await rawOpenAi({ model: r('agg'), ...extra });
      expect(res.status).toBe(400);
      expect(await refusalCode(res)).toBe('unpriced_feature');
      await expectNothingSent(before);
    });

    it('a feature the contract declares and the price revision prices passes, and is what arrives upstream', async () => {
      const before = await simLastSeq();
      const { response } = await openai(key)
        .chat.completions.create({ model: r('oa-priced'), messages: [{ role: 'user', content: prompt() }], service_tier: 'priority' })
        .withResponse();
      const actionId = response.headers.get('x-gateway-action-id')!;
      const sent = await expectReserved(before, actionId, 'n', 'max_completion_tokens');
      expect(sent.pricedFields).toEqual(['service_tier']);
      // the tier the provider reported is kept as the attempt's evidence (issue 14)
      expect(await billedDetail(actionId)).toMatchObject({ serviceTier: 'priority', featureCalls: {} });
    });

    // Issue 14: declared by the contract is not enough, the price revision in force must price it.
    it('a feature the contract declares but the price revision does not price → 400 unpriced_feature, nothing upstream', async () => {
      const before = await simLastSeq();
      const err = await openai(key)
        .chat.completions.create({ model: r('oa-declared'), messages: [{ role: 'user', content: prompt() }], service_tier: 'priority' })
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(APIError);
      expect((err as APIError).code).toBe('unpriced_feature');
      expect((err as APIError).message).toContain('price revision');
      await expectNothingSent(before);
    });

    it.each<[string, Record<string, unknown>]>([
      ['googleSearch', { tools: [{ googleSearch: {} }] }],
      ['codeExecution', { tools: [{ codeExecution: {} }] }],
      ['urlContext', { tools: [{ urlContext: {} }] }],
      ['image output', { responseModalities: [Modality.TEXT, Modality.IMAGE] }],
      ['audio output', { responseModalities: [Modality.AUDIO] }],
    ])('gemini SDK %s → 400 unpriced_feature, nothing upstream', async (_name, config) => {
      const before = await simLastSeq();
      const err = (await gemini(key)
        .models.generateContent({ model: r('gm'), contents: prompt(), config })
        .catch((e: unknown) => e)) as ApiError;
      expect(err).toBeInstanceOf(ApiError);
      expect(err.status).toBe(400);
      expect(JSON.parse(err.message).error.status).toBe('unpriced_feature');
      await expectNothingSent(before);
    });

    it.each<[string, Record<string, unknown>]>([
      ['google_search', { tools: [{ google_search: {} }] }],
      ['code_execution', { tools: [{ code_execution: {} }] }],
      ['response_modalities', { generation_config: { response_modalities: ['AUDIO'] } }],
    ])('gemini raw %s (proto spelling) → 400 unpriced_feature', async (_name, extra) => {
      const before = await simLastSeq();
      const res = await rawGemini(r('gm'), extra);
      expect(res.status).toBe(400);
      expect(await refusalCode(res)).toBe('unpriced_feature');
      await expectNothingSent(before);
    });

    it('gemini search grounding on a route whose price revision has a grounding fee passes', async () => {
      const before = await simLastSeq();
      const resp = await gemini(key).models.generateContent({
        model: r('gm-priced'),
        contents: prompt(),
        config: { tools: [{ googleSearch: {} }] },
      });
      const id = resp.sdkHttpResponse?.headers?.['x-gateway-action-id'] as string;
      const sent = await expectReserved(before, id, 'generationConfig.candidateCount', 'generationConfig.maxOutputTokens');
      expect(sent.pricedFields).toEqual(['tools[0].googleSearch']);
      // the grounded answer is evidence of one grounding call (issue 14)
      expect(await billedDetail(id)).toMatchObject({ serviceTier: 'default', featureCalls: { search_grounding: 1 } });
    });

    it('gemini search grounding declared by the contract but without a fee in the price revision → 400 unpriced_feature', async () => {
      const before = await simLastSeq();
      const err = (await gemini(key)
        .models.generateContent({ model: r('gm-declared'), contents: prompt(), config: { tools: [{ googleSearch: {} }] } })
        .catch((e: unknown) => e)) as ApiError;
      expect(err).toBeInstanceOf(ApiError);
      expect(err.status).toBe(400);
      expect(JSON.parse(err.message).error.status).toBe('unpriced_feature');
      await expectNothingSent(before);
    });
  });

  describe('input the estimate cannot price', () => {
    it.each<[string, Record<string, unknown>]>([
      ['cachedContent', { cachedContent: 'cachedContents/abc' }],
      ['cached_content', { cached_content: 'cachedContents/abc' }],
      [
        'a remote fileData URI',
        { contents: [{ role: 'user', parts: [{ fileData: { fileUri: 'gs://bucket/doc.pdf', mimeType: 'application/pdf' } }] }] },
      ],
      [
        'a remote file_data URI',
        { contents: [{ role: 'user', parts: [{ file_data: { file_uri: 'https://x.example/a.pdf', mime_type: 'application/pdf' } }] }] },
      ],
    ])('gemini %s → 400 unpriced_input', async (_name, extra) => {
      const before = await simLastSeq();
      const res = await rawGemini(r('gm'), extra);
      expect(res.status).toBe(400);
      expect(await refusalCode(res)).toBe('unpriced_input');
      await expectNothingSent(before);
    });

    it('an OpenAI file stored at the provider → 400 unpriced_input', async () => {
      const before = await simLastSeq();
      const res = await rawOpenAi({
        model: r('oa'),
        messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-abc' } }] }],
      });
      expect(res.status).toBe(400);
      expect(await refusalCode(res)).toBe('unpriced_input');
      await expectNothingSent(before);
    });

    it('tools and inline images are reserved for (the estimate sees them)', async () => {
      const small = await openai(key)
        .chat.completions.create({ model: r('oa'), messages: [{ role: 'user', content: 'hi' }] })
        .withResponse();
      const withTools = await openai(key)
        .chat.completions.create({
          model: r('oa'),
          messages: [
            {
              role: 'user',
              content: [
                { type: 'text', text: 'hi' },
                { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
              ],
            },
          ],
          tools: [{ type: 'function', function: { name: 'lookup', description: 'd'.repeat(600), parameters: { type: 'object' } } }],
        })
        .withResponse();
      const reserved = (x: { response: Response }) => BigInt(x.response.headers.get('x-gateway-reserved-microusd')!);
      // 600 description bytes ≈ 200 tokens and one image ≥ 1600 tokens, at $2.50/MTok input
      expect(reserved(withTools) - reserved(small)).toBeGreaterThanOrEqual(((200n + 1600n) * 2_500_000n) / 1_000_000n);
    });
  });

  describe('provider-side storage', () => {
    it('store:true from the app is sent as store:false unless the workload opted in', async () => {
      const before = await simLastSeq();
      await openai(key).chat.completions.create({ model: r('oa'), messages: [{ role: 'user', content: prompt() }], store: true });
      await openai(key).chat.completions.create({ model: r('oa'), messages: [{ role: 'user', content: prompt() }] });
      await openai(storingKey).chat.completions.create({ model: r('oa'), messages: [{ role: 'user', content: prompt() }], store: true });
      expect((await receivedSince(before)).map((s) => s.store)).toEqual([false, false, true]);
    });
  });
});
