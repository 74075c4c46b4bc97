import { ApiError } from '@google/genai';
import { Topics } from '@gateway/contracts';
import { actionStatus, settledAction } from './actions';
import { eventually, simLastSeq, simRequestsSince, stack, TopicReader, uid, withSeeder, gemini } from './support';

/**
 * Issue 3, Gemini dialect through the official @google/genai SDK: candidateCount policy,
 * per-candidate finishReason, SAFETY filtering, blocked prompts, silent shortfalls, routes that
 * refuse candidateCount > 1, and streaming usage.
 */
describe('candidate-count policy (@google/genai SDK)', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  let oneKey: string;
  let threeKey: string;
  let settled: TopicReader;
  let recon: TopicReader;

  const headerOf = (resp: { sdkHttpResponse?: { headers?: Record<string, string> } }, name: string) =>
    resp.sdkHttpResponse?.headers?.[name];

  beforeAll(async () => {
    const routes: Array<[string, string]> = [
      ['gm', 'gemini-sim'],
      ['gm-filter', 'gemini-sim;filter=1'],
      ['gm-block', 'gemini-sim;block'],
      ['gm-serve1', 'gemini-sim;serve=1'],
      ['gm-rejectn', 'gemini-sim;reject-n'],
      ['gm-cut', 'gemini-sim;cut-stream'],
    ];
    await withSeeder(async (seed) => {
      for (const [name, model] of routes) {
        await seed.route({
          routeId: r(name),
          alias: r(name),
          providerKind: 'gemini-generate',
          upstreamBaseUrl: stack.providerSim,
          upstreamModel: model,
        });
      }
      const aliases = routes.map(([n]) => r(n));
      oneKey = (await seed.workload({ id: r('g-one'), allowedAliases: aliases })).key;
      threeKey = (await seed.workload({ id: r('g-three'), allowedAliases: aliases })).key;
      await seed.approvedException({
        workloadId: r('g-three'),
        maxCandidates: 3,
        perCandidateOutputCeiling: 64,
        budgetMicrousd: 5_000_000n,
        expiresAt: new Date(Date.now() + 86400_000),
      });
    });
    settled = new TopicReader([Topics.usageSettled.name]);
    recon = new TopicReader([Topics.reconciliationRequired.name]);
    await Promise.all([settled.start(), recon.start()]);
  });

  afterAll(async () => {
    await Promise.all([settled.stop(), recon.stop()]);
  });

  const contents = () => `gemini policy test ${uid()}`;

  it('omitted candidateCount → one candidate, and explicit 1 is recorded as asked', async () => {
    const before = await simLastSeq();
    const omitted = await gemini(oneKey).models.generateContent({ model: r('gm'), contents: contents() });
    expect(omitted.candidates).toHaveLength(1);
    expect(headerOf(omitted, 'x-gateway-requested-candidates')).toBe('omitted');
    expect(headerOf(omitted, 'x-gateway-effective-candidates')).toBe('1');
    expect(headerOf(omitted, 'x-gateway-returned-candidates')).toBe('1');
    const explicit = await gemini(oneKey).models.generateContent({ model: r('gm'), contents: contents(), config: { candidateCount: 1 } });
    expect(explicit.candidates).toHaveLength(1);
    expect(headerOf(explicit, 'x-gateway-requested-candidates')).toBe('1');
    const sent = await simRequestsSince(before);
    // the effective count is always written upstream, omitted or not
    expect(sent.map((s) => s.candidateCount)).toEqual([1, 1]);
    expect(sent.every((s) => s.maxTokens === 256)).toBe(true);
    const id = headerOf(explicit, 'x-gateway-action-id')!;
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === id, 'usage.settled');
    expect(event.output_tokens_total).toBe(explicit.usageMetadata!.candidatesTokenCount);
  });

  it('candidateCount over the workload maximum → 400 with the stable code in error.status, nothing dispatched', async () => {
    const before = await simLastSeq();
    const err = (await gemini(oneKey)
      .models.generateContent({ model: r('gm'), contents: contents(), config: { candidateCount: 2 } })
      .catch((e) => e)) as ApiError;
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(400);
    expect(JSON.parse(err.message).error.status).toBe('candidate_count_exceeds_policy');
    expect(await simRequestsSince(before)).toHaveLength(0);
  });

  it('one candidate filtered for SAFETY: returned 2 of 3, the reason recorded, usage still aggregate', async () => {
    const resp = await gemini(threeKey).models.generateContent({
      model: r('gm-filter'),
      contents: contents(),
      config: { candidateCount: 3 },
    });
    expect(resp.candidates).toHaveLength(3);
    expect(resp.candidates![1].finishReason).toBe('SAFETY');
    expect(headerOf(resp, 'x-gateway-returned-candidates')).toBe('2');
    const id = headerOf(resp, 'x-gateway-action-id')!;
    const status = await settledAction(threeKey, id);
    expect(status.attempts[0].candidates).toEqual([
      { index: 0, outcome: 'ok', finish_reason: 'STOP' },
      { index: 1, outcome: 'filtered', finish_reason: 'SAFETY' },
      { index: 2, outcome: 'ok', finish_reason: 'STOP' },
    ]);
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === id, 'usage.settled');
    expect(event.output_tokens_total).toBe(resp.usageMetadata!.candidatesTokenCount);
    expect(event).toMatchObject({ effective_candidate_count: 3, returned_candidate_count: 2, requested_candidate_count: 3 });
  });

  it('a blocked prompt: zero candidates, the reason from promptFeedback, input still billed', async () => {
    const resp = await gemini(oneKey).models.generateContent({ model: r('gm-block'), contents: contents() });
    expect(resp.candidates ?? []).toHaveLength(0);
    expect(resp.promptFeedback?.blockReason).toBe('SAFETY');
    const id = headerOf(resp, 'x-gateway-action-id')!;
    const status = await settledAction(oneKey, id);
    expect(status.returned_candidate_count).toBe(0);
    expect(status.attempts[0].prompt_block_reason).toBe('SAFETY');
    expect(status.attempts[0].candidates).toEqual([{ index: 0, outcome: 'blocked', finish_reason: null }]);
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === id, 'usage.settled');
    expect(event.input_tokens).toBe(resp.usageMetadata!.promptTokenCount);
    expect(event.output_tokens_total).toBe(0);
  });

  it('a route that silently serves 1 of 2 is flagged as a contract failure, not hidden', async () => {
    const resp = await gemini(threeKey).models.generateContent({
      model: r('gm-serve1'),
      contents: contents(),
      config: { candidateCount: 2 },
    });
    expect(resp.candidates).toHaveLength(1);
    const id = headerOf(resp, 'x-gateway-action-id')!;
    const status = await settledAction(threeKey, id);
    expect(status.returned_candidate_count).toBe(1);
    expect(status.effective_candidate_count).toBe(2);
    expect(status.attempts[0].candidates).toEqual([
      { index: 0, outcome: 'ok', finish_reason: 'STOP' },
      { index: 1, outcome: 'missing', finish_reason: null },
    ]);
    expect(status.open_reconciliation_cases.map((c: any) => c.reason)).toContain('candidate_shortfall_unexplained');
    await recon.waitFor<Record<string, any>>(
      (m) => m.action_id === id && m.reason === 'candidate_shortfall_unexplained',
      'reconciliation.required event',
    );
    const metrics = await (await fetch(`${stack.dispatch}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(`gateway_route_contract_failures_total\\{[^}]*route="${r('gm-serve1')}"[^}]*kind="silent_shortfall"[^}]*\\} [1-9]`),
    );
  });

  it('400 INVALID_ARGUMENT for candidateCount > 1: not retried, reservation released', async () => {
    const before = await simLastSeq();
    const err = (await gemini(threeKey)
      .models.generateContent({ model: r('gm-rejectn'), contents: contents(), config: { candidateCount: 2 } })
      .catch((e) => e)) as ApiError;
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(502);
    const body = JSON.parse(err.message);
    expect(body.error.status).toBe('upstream_error');
    expect(body.error.message).toMatch(/INVALID_ARGUMENT/);
    expect(await simRequestsSince(before)).toHaveLength(1);
    const actionId = await eventually(async () => {
      const all = await withSeeder((_s, db) =>
        db.prisma.action.findMany({ where: { workloadId: r('g-three'), routeId: r('gm-rejectn') }, select: { id: true } }),
      );
      return all[0]?.id;
    });
    const status = await settledAction(threeKey, actionId);
    expect(status.status).toBe('failed');
    expect(status.money_microusd.settled).toBe('0');
    expect(status.money_microusd.released).toBe(status.money_microusd.reserved);
    expect(status.status_reason).toMatch(/contract failure/);
  });

  it('streamGenerateContent without alt=sse answers a JSON array of chunks, as Gemini does', async () => {
    const res = await fetch(`${stack.admission}/v1beta/models/${r('gm')}:streamGenerateContent`, {
      method: 'POST',
      headers: { 'x-goog-api-key': oneKey, 'content-type': 'application/json' },
      body: JSON.stringify({ contents: [{ parts: [{ text: contents() }] }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/application\/json/);
    const chunks = (await res.json()) as Array<Record<string, any>>;
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.some((c) => c.candidates?.[0]?.content?.parts?.[0]?.text)).toBe(true);
    expect(chunks[chunks.length - 1].usageMetadata.promptTokenCount).toBeGreaterThan(0);
    const id = res.headers.get('x-gateway-action-id')!;
    await settled.waitFor<Record<string, any>>((m) => m.action_id === id, 'usage.settled for the JSON-array stream');
  });

  it('streamGenerateContent: usage from the final chunk settles; a cut stream keeps its exposure', async () => {
    const stream = await gemini(oneKey).models.generateContentStream({ model: r('gm'), contents: contents() });
    let text = '';
    let id: string | undefined;
    for await (const chunk of stream) {
      text += chunk.text ?? '';
      id = id ?? headerOf(chunk, 'x-gateway-action-id');
    }
    expect(text.length).toBeGreaterThan(0);
    expect(id).toBeDefined();
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === id, 'usage.settled for the stream');
    expect(event).toMatchObject({ usage_source: 'stream_final_chunk', stream_mode: 'sse' });

    const cut = await gemini(oneKey).models.generateContentStream({ model: r('gm-cut'), contents: contents() });
    let cutId: string | undefined;
    await (async () => {
      for await (const chunk of cut) cutId = cutId ?? headerOf(chunk, 'x-gateway-action-id');
    })().catch(() => undefined);
    expect(cutId).toBeDefined();
    const status = await eventually(
      async () => {
        const s = await actionStatus(oneKey, cutId!);
        return s.reservation_status !== 'pending' ? s : undefined;
      },
      { what: 'cut stream recorded' },
    );
    expect(status.open_reconciliation_cases.map((c: any) => c.reason)).toEqual(['stream_ended_before_usage']);
    expect(status.money_microusd.unresolved).toBe(status.money_microusd.reserved);
  });
});
