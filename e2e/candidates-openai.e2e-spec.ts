import { APIError } from 'openai';
import { Topics } from '@gateway/contracts';
import { computeReservation } from '@gateway/domain';
import { DEFAULT_PRICES } from '@gateway/testing';
import { actionStatus, settledAction } from './actions';
import { eventually, openai, simLastSeq, simRequestsSince, stack, TopicReader, uid, withSeeder } from './support';

/**
 * Issue 3, OpenAI dialect: candidate-count policy end to end through the official openai SDK —
 * headers, provider-sim's request log, the ledger (action status) and usage.settled.
 */
describe('candidate-count policy (openai SDK)', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  const CEILING = 100;
  let oneKey: string;
  let twoKey: string;
  let twoWorkload: string;
  let exceptionId: string;
  let settled: TopicReader;

  beforeAll(async () => {
    const aliases = ['oa', 'oa-shared', 'oa-unverified', 'oa-stale', 'oa-extra', 'oa-cut', 'oa-nousage'].map(r);
    await withSeeder(async (seed) => {
      const sim = stack.providerSim;
      await seed.route({ routeId: r('oa'), alias: r('oa'), providerKind: 'openai-chat', upstreamBaseUrl: sim, upstreamModel: 'sim-gpt' });
      await seed.route({
        routeId: r('oa-shared'),
        alias: r('oa-shared'),
        providerKind: 'openai-compatible',
        upstreamBaseUrl: sim,
        upstreamModel: 'sim-gpt',
        outputCapSemantics: 'shared',
        outputCapParam: 'max_tokens',
      });
      await seed.route(
        {
          routeId: r('oa-unverified'),
          alias: r('oa-unverified'),
          providerKind: 'openai-chat',
          upstreamBaseUrl: sim,
          upstreamModel: 'sim-gpt',
        },
        { verified: false },
      );
      await seed.route(
        {
          routeId: r('oa-stale'),
          alias: r('oa-stale'),
          providerKind: 'openai-chat',
          upstreamBaseUrl: sim,
          upstreamModel: 'sim-gpt',
          verificationTtlSeconds: 86400,
        },
        { verifiedAt: new Date(Date.now() - 3 * 86400 * 1000) },
      );
      await seed.route({
        routeId: r('oa-extra'),
        alias: r('oa-extra'),
        providerKind: 'openai-chat',
        upstreamBaseUrl: sim,
        upstreamModel: 'sim-gpt;extra=1',
      });
      await seed.route({
        routeId: r('oa-cut'),
        alias: r('oa-cut'),
        providerKind: 'openai-chat',
        upstreamBaseUrl: sim,
        upstreamModel: 'sim-gpt;cut-stream',
      });
      await seed.route({
        routeId: r('oa-nousage'),
        alias: r('oa-nousage'),
        providerKind: 'openai-chat',
        upstreamBaseUrl: sim,
        upstreamModel: 'sim-gpt;no-usage',
      });
      oneKey = (await seed.workload({ id: r('w-one'), allowedAliases: aliases })).key;
      twoWorkload = r('w-two');
      twoKey = (await seed.workload({ id: twoWorkload, allowedAliases: aliases, perCandidateOutputCeiling: 256 })).key;
      exceptionId = await seed.approvedException({
        workloadId: twoWorkload,
        maxCandidates: 2,
        perCandidateOutputCeiling: CEILING,
        budgetMicrousd: 5_000_000n,
        expiresAt: new Date(Date.now() + 86400_000),
      });
    });
    settled = new TopicReader([Topics.usageSettled.name]);
    await settled.start();
  });

  afterAll(() => settled.stop());

  const ask = (content = `policy test ${uid()}`) => [{ role: 'user' as const, content }];

  it('explicit n=1 → one candidate, requested=1 recorded and sent upstream', async () => {
    const before = await simLastSeq();
    const { data, response } = await openai(oneKey)
      .chat.completions.create({ model: r('oa'), n: 1, messages: ask() })
      .withResponse();
    expect(data.choices).toHaveLength(1);
    expect(response.headers.get('x-gateway-requested-candidates')).toBe('1');
    expect(response.headers.get('x-gateway-effective-candidates')).toBe('1');
    const sent = await simRequestsSince(before);
    expect(sent.map((s) => s.candidateCount)).toEqual([1]);
  });

  it('n=2 within an approved exception → reservation = 2 × ceiling, ledger = aggregate usage of both', async () => {
    const before = await simLastSeq();
    const messages = ask();
    const { data, response } = await openai(twoKey)
      .chat.completions.create({ model: r('oa'), n: 2, messages })
      .withResponse();
    expect(data.choices).toHaveLength(2);
    expect(response.headers.get('x-gateway-effective-candidates')).toBe('2');
    expect(response.headers.get('x-gateway-returned-candidates')).toBe('2');
    const sent = await simRequestsSince(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ candidateCount: 2, maxTokens: CEILING });
    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await settledAction(twoKey, actionId);
    expect(status.output_ceiling_per_candidate).toBe(CEILING);
    // reserved = price(input estimate, 2 × ceiling)
    const reservedHeader = BigInt(response.headers.get('x-gateway-reserved-microusd')!);
    const oneCandidate = computeReservation({
      inputTokensEstimate: 0,
      effectiveCandidates: 1,
      perCandidateOutputCeiling: CEILING,
      semantics: 'per_candidate',
      price: { id: 'x', ...DEFAULT_PRICES },
    });
    expect(reservedHeader).toBeGreaterThan(2n * oneCandidate.reservedMicrousd);
    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'usage.settled');
    // aggregate usage: both candidates' output, exactly as the provider reported it
    expect(event.output_tokens_total).toBe(data.usage!.completion_tokens);
    expect(event.input_tokens).toBe(data.usage!.prompt_tokens);
    expect(event).toMatchObject({ requested_candidate_count: 2, effective_candidate_count: 2, returned_candidate_count: 2 });
    expect(status.attempts[0].cost_microusd).toBe(event.cost_microusd);
  });

  it('n=4 over an exception max of 2 → 400 naming the maximum, nothing dispatched', async () => {
    const before = await simLastSeq();
    const err = (await openai(twoKey)
      .chat.completions.create({ model: r('oa'), n: 4, messages: ask() })
      .catch((e) => e)) as APIError;
    expect(err.status).toBe(400);
    expect(err.code).toBe('candidate_count_exceeds_policy');
    expect(err.message).toMatch(/maximum of 2/);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    expect(await simRequestsSince(before)).toHaveLength(0);
  });

  it('per-candidate and shared output-cap semantics reserve differently', async () => {
    const messages = ask('identical prompt for both routes');
    const per = await openai(twoKey)
      .chat.completions.create({ model: r('oa'), n: 2, messages })
      .withResponse();
    const shared = await openai(twoKey)
      .chat.completions.create({ model: r('oa-shared'), n: 2, messages })
      .withResponse();
    const perReserved = BigInt(per.response.headers.get('x-gateway-reserved-microusd')!);
    const sharedReserved = BigInt(shared.response.headers.get('x-gateway-reserved-microusd')!);
    // same input estimate; per-candidate reserves 2 × 100 output tokens, shared reserves 100
    const outputPrice = (tokens: number) => (BigInt(tokens) * DEFAULT_PRICES.outputPerMTokMicrousd + 999_999n) / 1_000_000n;
    expect(perReserved - sharedReserved).toBe(outputPrice(2 * CEILING) - outputPrice(CEILING));
  });

  it('any count on an unverified or a stale contract → 403 route_contract_unverified, nothing dispatched', async () => {
    const before = await simLastSeq();
    for (const alias of [r('oa-unverified'), r('oa-stale')]) {
      for (const n of [2, 1, undefined]) {
        const err = (await openai(twoKey)
          .chat.completions.create({ model: alias, ...(n === undefined ? {} : { n }), messages: ask() })
          .catch((e) => e)) as APIError;
        expect(err.status).toBe(403);
        expect(err.code).toBe('route_contract_unverified');
        expect(err.headers?.get('x-should-retry')).toBe('false');
      }
    }
    expect(await simRequestsSince(before)).toHaveLength(0);
  });

  it('more candidates returned than effective → reconciliation case, not settled', async () => {
    const { data, response } = await openai(twoKey)
      .chat.completions.create({ model: r('oa-extra'), n: 2, messages: ask() })
      .withResponse();
    expect(data.choices).toHaveLength(3);
    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await eventually(
      async () => {
        const s = await actionStatus(twoKey, actionId);
        return s.open_reconciliation_cases.length > 0 ? s : undefined;
      },
      { what: 'reconciliation case' },
    );
    expect(status.open_reconciliation_cases.map((c: any) => c.reason)).toContain('returned_exceeds_effective');
    expect(status.reservation_status).toBe('unresolved');
    expect(status.money_microusd.settled).toBe('0');
    expect(status.money_microusd.unresolved).toBe(response.headers.get('x-gateway-reserved-microusd'));
    expect(status.attempts[0].cost_microusd).toBeNull();
  });

  it('a response without aggregate usage is never settled at zero', async () => {
    const { response } = await openai(oneKey)
      .chat.completions.create({ model: r('oa-nousage'), messages: ask() })
      .withResponse();
    const actionId = response.headers.get('x-gateway-action-id')!;
    const status = await eventually(
      async () => {
        const s = await actionStatus(oneKey, actionId);
        return s.reservation_status !== 'pending' ? s : undefined;
      },
      { what: 'reservation resolved' },
    );
    expect(status.reservation_status).toBe('unresolved');
    expect(status.open_reconciliation_cases.map((c: any) => c.reason)).toEqual(['usage_missing']);
    expect(BigInt(status.money_microusd.unresolved)).toBeGreaterThan(0n);
  });

  it('the same request is refused without a restart once the exception is revoked, or expired', async () => {
    const client = openai(twoKey);
    await withSeeder((_s, db) => db.prisma.candidateException.update({ where: { id: exceptionId }, data: { status: 'revoked' } }));
    const revoked = (await client.chat.completions.create({ model: r('oa'), n: 2, messages: ask() }).catch((e) => e)) as APIError;
    expect(revoked.status).toBe(400);
    expect(revoked.code).toBe('candidate_count_exceeds_policy');
    await withSeeder((_s, db) =>
      db.prisma.candidateException.update({
        where: { id: exceptionId },
        data: { status: 'active', expiresAt: new Date(Date.now() - 1000) },
      }),
    );
    const expired = (await client.chat.completions.create({ model: r('oa'), n: 2, messages: ask() }).catch((e) => e)) as APIError;
    expect(expired.status).toBe(400);
    expect(expired.code).toBe('candidate_count_exceeds_policy');
  });

  describe('streaming', () => {
    it('a stream with usage settles from the final chunk; the usage chunk reaches only clients that asked', async () => {
      const withUsage = await openai(oneKey)
        .chat.completions.create({ model: r('oa'), messages: ask(), stream: true, stream_options: { include_usage: true } })
        .withResponse();
      let usageChunks = 0;
      let text = '';
      for await (const chunk of withUsage.data) {
        if (chunk.usage) usageChunks++;
        text += chunk.choices[0]?.delta?.content ?? '';
      }
      expect(text.length).toBeGreaterThan(0);
      expect(usageChunks).toBe(1);
      const actionId = withUsage.response.headers.get('x-gateway-action-id')!;
      const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'usage.settled for the stream');
      expect(event).toMatchObject({ usage_source: 'stream_final_chunk', stream_mode: 'sse' });

      const before = await simLastSeq();
      const without = await openai(oneKey)
        .chat.completions.create({ model: r('oa'), messages: ask(), stream: true })
        .withResponse();
      let sawUsage = false;
      for await (const chunk of without.data) if (chunk.usage) sawUsage = true;
      expect(sawUsage).toBe(false);
      // but the gateway asked upstream for usage anyway, and settled from it
      expect((await simRequestsSince(before))[0].stream).toBe(true);
      const id2 = without.response.headers.get('x-gateway-action-id')!;
      await settled.waitFor<Record<string, any>>((m) => m.action_id === id2, 'usage.settled for the stream without client usage');
    });

    it('a stream cut before its usage chunk leaves the exposure held, never zero', async () => {
      const res = await openai(oneKey)
        .chat.completions.create({ model: r('oa-cut'), messages: ask(), stream: true })
        .withResponse();
      const actionId = res.response.headers.get('x-gateway-action-id')!;
      await (async () => {
        for await (const _chunk of res.data) {
          // drain until the gateway ends the stream
        }
      })().catch(() => undefined);
      const status = await eventually(
        async () => {
          const s = await actionStatus(oneKey, actionId);
          return s.reservation_status !== 'pending' ? s : undefined;
        },
        { what: 'stream cut recorded' },
      );
      expect(status.attempts[0].status).toBe('reconciliation_required');
      expect(status.open_reconciliation_cases.map((c: any) => c.reason)).toEqual(['stream_ended_before_usage']);
      expect(status.money_microusd.settled).toBe('0');
      expect(status.money_microusd.unresolved).toBe(status.money_microusd.reserved);
    });

    it('multi-candidate streaming is refused unless an exception allows it', async () => {
      const client = openai(twoKey);
      await withSeeder((_s, db) =>
        db.prisma.candidateException.update({
          where: { id: exceptionId },
          data: { status: 'active', expiresAt: new Date(Date.now() + 3600_000) },
        }),
      );
      const err = (await client.chat.completions
        .create({ model: r('oa'), n: 2, messages: ask(), stream: true })
        .catch((e) => e)) as APIError;
      expect(err.status).toBe(400);
      expect(err.code).toBe('candidate_count_exceeds_policy');
      expect(err.message).toMatch(/stream/);
    });
  });
});
