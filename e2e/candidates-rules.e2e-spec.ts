import { ApiError, GoogleGenAI } from '@google/genai';
import { APIError } from 'openai';
import { Topics } from '@gateway/contracts';
import { actionStatus } from './actions';
import { policyCall } from './policy-call';
import { eventually, openai, simLastSeq, simRequestsSince, stack, TopicReader, uid, withSeeder } from './support';

/**
 * Issue 16, through the official SDKs: the decision event records the approved maximum; several
 * candidates without sampling are refused unless an exception allows it (both dialects, every
 * spelling the SDKs send); an under-reported multi-candidate usage is settled and flagged; the
 * requested count is a histogram on admission's /metrics.
 */
describe('candidate policy: approved maximum, sampling sanity, usage plausibility, count metric', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  const CEILING = 100;
  let plainKey: string;
  let plainWorkload: string;
  let samplingKey: string;
  let decisions: TopicReader;

  const ai = (key: string) => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: stack.admission } });
  const ask = () => [{ role: 'user' as const, content: `issue 16 ${uid()}` }];
  const geminiError = (err: ApiError) => JSON.parse(err.message).error as { code: number; status: string; message: string };

  beforeAll(async () => {
    const sim = stack.providerSim;
    plainWorkload = r('w-plain');
    const samplingWorkload = r('w-sampling');
    let operator = '';
    let approver = '';
    await withSeeder(async (seed) => {
      await seed.route({ routeId: r('oa'), alias: r('oa'), providerKind: 'openai-chat', upstreamBaseUrl: sim, upstreamModel: 'sim-gpt' });
      await seed.route({
        routeId: r('oa-under'),
        alias: r('oa-under'),
        providerKind: 'openai-chat',
        upstreamBaseUrl: sim,
        upstreamModel: 'sim-gpt;under-usage;words=40',
      });
      await seed.route({
        routeId: r('gm'),
        alias: r('gm'),
        providerKind: 'gemini-generate',
        upstreamBaseUrl: sim,
        upstreamModel: 'gemini-sim',
      });
      await seed.route({
        routeId: r('gm-under'),
        alias: r('gm-under'),
        providerKind: 'gemini-generate',
        upstreamBaseUrl: sim,
        upstreamModel: 'gemini-sim;under-usage;words=40',
      });
      const aliases = ['oa', 'oa-under', 'gm', 'gm-under'].map(r);
      plainKey = (await seed.workload({ id: plainWorkload, allowedAliases: aliases })).key;
      samplingKey = (await seed.workload({ id: samplingWorkload, allowedAliases: aliases })).key;
      await seed.approvedException({
        workloadId: plainWorkload,
        maxCandidates: 2,
        perCandidateOutputCeiling: CEILING,
        budgetMicrousd: 5_000_000n,
        expiresAt: new Date(Date.now() + 86400_000),
      });
      operator = await seed.operator(`op-${run}`, ['operator']);
      approver = await seed.operator(`ap-${run}`, ['approver']);
    });
    // The permission for deterministic sampling goes through the policy API like any exception.
    const requested = await policyCall('POST', '/exceptions', operator, {
      owner: 'eval-team',
      workload_id: samplingWorkload,
      max_candidates: 2,
      per_candidate_output_ceiling: CEILING,
      budget_microusd: '5000000',
      expires_at: new Date(Date.now() + 86400_000).toISOString(),
      justification: 'self-consistency check: identical answers expected',
      allows_deterministic_sampling: true,
      outcome: { metric: 'answer agreement rate', baseline: 0.7, target: 0.8 },
      expected_requests: 100,
      typical_input_tokens: 100,
    });
    expect(requested.status).toBe(201);
    expect(requested.body.allows_deterministic_sampling).toBe(true);
    const approved = await policyCall('POST', `/exceptions/${requested.body.id}/approve`, approver, { reason: 'bounded' });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ status: 'active', allows_deterministic_sampling: true });

    decisions = new TopicReader([Topics.admissionDecisions.name]);
    await decisions.start();
  });

  afterAll(() => decisions.stop());

  describe('the decision event records the approved maximum', () => {
    it('n over the maximum → 400 to the client, and the topic carries workload, route, requested, maximum and result', async () => {
      const err = (await openai(plainKey)
        .chat.completions.create({ model: r('oa'), n: 4, messages: ask() })
        .catch((e) => e)) as APIError;
      expect(err.status).toBe(400);
      expect(err.code).toBe('candidate_count_exceeds_policy');
      const actionId = err.headers?.get('x-gateway-action-id');
      expect(actionId).toBeTruthy();
      const event = await decisions.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'deny decision');
      expect(event).toMatchObject({
        workload_id: plainWorkload,
        route_id: r('oa'),
        requested_candidate_count: 4,
        approved_max_candidates: 2,
        policy_result: 'deny',
        policy_reason: 'candidate_count_exceeds_policy',
        effective_candidate_count: null,
      });
      expect(Topics.admissionDecisions.schema.safeParse(event).success).toBe(true);
    });

    it('an allowed multi-candidate request records the maximum it was judged against', async () => {
      const { response } = await openai(plainKey)
        .chat.completions.create({ model: r('oa'), n: 2, temperature: 0.7, messages: ask() })
        .withResponse();
      const actionId = response.headers.get('x-gateway-action-id');
      const event = await decisions.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'allow decision');
      expect(event).toMatchObject({ policy_result: 'allow', requested_candidate_count: 2, approved_max_candidates: 2 });
    });
  });

  describe('several candidates without sampling', () => {
    it('openai: temperature 0 with n=2 under an exception without the permission → 400, not retried, nothing sent', async () => {
      const before = await simLastSeq();
      const err = (await openai(plainKey)
        .chat.completions.create({ model: r('oa'), n: 2, temperature: 0, messages: ask() })
        .catch((e) => e)) as APIError;
      expect(err.status).toBe(400);
      expect(err.code).toBe('candidate_count_without_sampling');
      expect(err.param).toBe('temperature');
      expect(err.headers?.get('x-should-retry')).toBe('false');
      expect(await simRequestsSince(before)).toHaveLength(0);
      const actionId = err.headers?.get('x-gateway-action-id');
      const event = await decisions.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'sampling deny');
      expect(event).toMatchObject({ policy_reason: 'candidate_count_without_sampling', approved_max_candidates: 2 });
    });

    it('openai: one candidate at temperature 0 is fine', async () => {
      const data = await openai(plainKey).chat.completions.create({ model: r('oa'), temperature: 0, messages: ask() });
      expect(data.choices).toHaveLength(1);
    });

    it('gemini: generationConfig temperature 0 or topK 1 with candidateCount 2 → 400 in error.status', async () => {
      const before = await simLastSeq();
      for (const config of [
        { candidateCount: 2, temperature: 0 },
        { candidateCount: 2, topK: 1 },
      ]) {
        const err = (await ai(plainKey)
          .models.generateContent({ model: r('gm'), contents: `issue 16 ${uid()}`, config })
          .catch((e) => e)) as ApiError;
        expect(err).toBeInstanceOf(ApiError);
        expect(err.status).toBe(400);
        expect(geminiError(err).status).toBe('candidate_count_without_sampling');
      }
      expect(await simRequestsSince(before)).toHaveLength(0);
    });

    it('an exception with allows_deterministic_sampling (from the policy API) admits both dialects', async () => {
      const before = await simLastSeq();
      const chat = await openai(samplingKey).chat.completions.create({ model: r('oa'), n: 2, temperature: 0, messages: ask() });
      expect(chat.choices).toHaveLength(2);
      const gem = await ai(samplingKey).models.generateContent({
        model: r('gm'),
        contents: `issue 16 ${uid()}`,
        config: { candidateCount: 2, temperature: 0, topK: 1 },
      });
      expect(gem.candidates).toHaveLength(2);
      expect((await simRequestsSince(before)).map((s) => s.candidateCount)).toEqual([2, 2]);
    });
  });

  describe('usage plausibility', () => {
    it.each([
      ['openai', 'oa-under'],
      ['gemini', 'gm-under'],
    ])(
      '%s: usage that covers only the first of two candidates is settled as reported and flagged usage_implausible',
      async (dialect, route) => {
        let actionId: string;
        let reportedOutput: number;
        if (dialect === 'openai') {
          const { data, response } = await openai(plainKey)
            .chat.completions.create({ model: r(route), n: 2, messages: ask() })
            .withResponse();
          expect(data.choices).toHaveLength(2);
          actionId = response.headers.get('x-gateway-action-id')!;
          reportedOutput = data.usage!.completion_tokens;
        } else {
          const resp = await ai(plainKey).models.generateContent({
            model: r(route),
            contents: `issue 16 ${uid()}`,
            config: { candidateCount: 2 },
          });
          expect(resp.candidates).toHaveLength(2);
          actionId = resp.sdkHttpResponse!.headers!['x-gateway-action-id'];
          reportedOutput = resp.usageMetadata!.candidatesTokenCount!;
        }
        const status = await eventually(
          async () => {
            const s = await actionStatus(plainKey, actionId);
            return s.reservation_status === 'settled' && s.open_reconciliation_cases.length > 0 ? s : undefined;
          },
          { what: 'settled with a usage_implausible case' },
        );
        // provider usage is the evidence: booked as reported (40 of 80 words), and flagged
        expect(reportedOutput).toBe(40);
        expect(status.attempts[0].output_tokens_total).toBe(40);
        expect(status.open_reconciliation_cases.map((c: any) => c.reason)).toEqual(['usage_implausible']);
        expect(status.money_microusd.unresolved).toBe('0');
      },
    );

    it('an honest multi-candidate usage opens no case', async () => {
      const { response } = await openai(plainKey)
        .chat.completions.create({ model: r('oa'), n: 2, messages: ask() })
        .withResponse();
      const actionId = response.headers.get('x-gateway-action-id')!;
      const status = await eventually(
        async () => {
          const s = await actionStatus(plainKey, actionId);
          return s.reservation_status === 'settled' ? s : undefined;
        },
        { what: 'settled' },
      );
      expect(status.open_reconciliation_cases).toEqual([]);
    });
  });

  it('admission /metrics has the requested-count histogram by workload and route, omitted apart', async () => {
    const mine = { workload: plainWorkload, route: r('oa') };
    const scrape = async () => {
      const text = await (await fetch(`${stack.admission}/metrics`)).text();
      const value = (suffix: string, labels: Record<string, string>) =>
        text
          .split('\n')
          .filter(
            (l) =>
              l.startsWith(`gateway_admission_requested_candidates${suffix}{`) &&
              Object.entries({ ...mine, ...labels }).every(([k, v]) => l.includes(`${k}="${v}"`)),
          )
          .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
      return {
        omittedCount: value('_count', { omitted: 'true' }),
        omittedSum: value('_sum', { omitted: 'true' }),
        sentCount: value('_count', { omitted: 'false' }),
        sentSum: value('_sum', { omitted: 'false' }),
        sentAtMost1: value('_bucket', { omitted: 'false', le: '1' }),
        sentAtMost2: value('_bucket', { omitted: 'false', le: '2' }),
      };
    };
    const before = await scrape();
    await openai(plainKey).chat.completions.create({ model: r('oa'), messages: ask() });
    await openai(plainKey).chat.completions.create({ model: r('oa'), n: 1, messages: ask() });
    await openai(plainKey)
      .chat.completions.create({ model: r('oa'), n: 5, messages: ask() })
      .catch((e) => e); // refused, still counted: the metric shows demand, not only what passed
    const after = await scrape();
    expect({
      omittedCount: after.omittedCount - before.omittedCount,
      omittedSum: after.omittedSum - before.omittedSum,
      sentCount: after.sentCount - before.sentCount,
      sentSum: after.sentSum - before.sentSum,
      sentAtMost1: after.sentAtMost1 - before.sentAtMost1,
      sentAtMost2: after.sentAtMost2 - before.sentAtMost2,
    }).toEqual({ omittedCount: 1, omittedSum: 1, sentCount: 2, sentSum: 6, sentAtMost1: 1, sentAtMost2: 1 });
  });
});
