import { APIError } from 'openai';
import { Topics } from '@gateway/contracts';
import { eventually, gemini, openai, simLastSeq, simRequestsSince, stack, TopicReader, uid, withSeeder } from './support';

/**
 * A provider's answer is as untrusted as a client's request. provider-sim's `hostile-fields`
 * answers like a broken or hostile upstream: a responseId with a NUL, 3,000 characters long (jsonb
 * refuses a NUL; the attempt's provider-id index refuses a key that long), and 40 unknown usage
 * fields with 150-character names (the event's schema takes 32 of at most 128). Before the gateway
 * bounded what an adapter reads (libs/providers `boundedResponse`), the usage of such an answer
 * never reached the ledger: the evidence write failed and the attempt became an orphan case.
 * provider-sim's `pad-bytes` answers with more than dispatch reads of one answer
 * (UPSTREAM_ANSWER_MAX_BYTES): dispatch stops reading, and neither it nor the SDK pays for it twice.
 */
describe('a provider that answers with what no evidence column takes, or with more than dispatch reads', () => {
  const run = uid();
  const route = `hostile-${run}`;
  const huge = `hostile-huge-${run}`;
  const workload = `hostile-wl-${run}`;
  let key: string;
  let settled: TopicReader;
  const seen = new Set<string>();

  beforeAll(async () => {
    key = await withSeeder(async (seed) => {
      await seed.route({
        routeId: route,
        alias: route,
        providerKind: 'gemini-generate',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'gemini-sim;hostile-fields',
      });
      // 9 MiB before the usage: more than dispatch reads of one answer (UPSTREAM_ANSWER_MAX_BYTES, 8 MiB)
      await seed.route({
        routeId: huge,
        alias: huge,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: `sim-gpt;pad-bytes=${9 * 1024 * 1024}`,
      });
      return (await seed.workload({ id: workload, allowedAliases: [route, huge] })).key;
    });
    settled = new TopicReader([Topics.usageSettled.name]);
    await settled.start();
  });

  afterAll(() => settled.stop());

  it.each([
    ['whole', false],
    ['streamed', true],
  ])('%s: the client gets its answer, the usage is settled, the id is dropped and the field names bounded', async (_, stream) => {
    const before = await simLastSeq();
    const client = gemini(key);
    const contents = `hostile upstream ${uid()}`;
    if (stream) {
      let text = '';
      for await (const chunk of await client.models.generateContentStream({ model: route, contents })) text += chunk.text ?? '';
      expect(text.length).toBeGreaterThan(0);
    } else {
      const answer = await client.models.generateContent({ model: route, contents });
      expect(answer.text?.length).toBeGreaterThan(0);
    }
    const actionId = await eventually(() =>
      withSeeder(async (_s, db) => {
        const all = await db.prisma.action.findMany({ where: { workloadId: workload }, select: { id: true } });
        return all.map((a) => a.id).find((id) => !seen.has(id));
      }),
    );
    seen.add(actionId);
    // what the upstream really sent: the hostile id
    const [sent] = await simRequestsSince(before);
    expect(sent.providerRequestId).toContain('\u0000');

    const event = await settled.waitFor<Record<string, any>>((m) => m.action_id === actionId, 'usage.settled');
    expect(event.output_tokens_total).toBeGreaterThan(0);
    expect(BigInt(event.cost_microusd)).toBeGreaterThan(0n);
    expect(event.provider_request_id).toBeNull();

    const { attempt, cases } = await eventually(() =>
      withSeeder(async (_s, db) => {
        const attempt = await db.prisma.attempt.findFirst({ where: { actionId } });
        const cases = await db.prisma.reconciliationCase.findMany({ where: { actionId } });
        return attempt?.status === 'settled' && cases.length > 0 ? { attempt, cases } : undefined;
      }),
    );
    expect(attempt.providerRequestId).toBeNull();
    // settled from the reported total, the unknown fields (names only, bounded) to an operator
    expect(cases.map((c) => c.reason)).toEqual(['usage_shape_unknown']);
    const fields = (cases[0].details as { unknown_fields: string[] }).unknown_fields;
    expect(fields).toHaveLength(32);
    expect(fields.every((f) => f.length <= 128)).toBe(true);
    expect(fields[31]).toBe('(9 more)');
  });

  it('an answer larger than dispatch reads (@openai SDK, its retries on): one 502 naming the bound, not retried, usage held on a case', async () => {
    const before = await simLastSeq();
    const err = (await openai(key)
      .chat.completions.create({ model: huge, messages: [{ role: 'user', content: `huge ${uid()}` }] })
      .catch((e: unknown) => e)) as APIError;
    expect(err).toBeInstanceOf(APIError);
    expect(err.status).toBe(502);
    expect(err.message).toMatch(/larger than the gateway reads \(8388608 bytes\)/);
    expect(err.headers?.get('x-should-retry')).toBe('false');
    // the provider answered it whole (and bills it): one call, the SDK did not retry it on its own
    expect((await simRequestsSince(before)).map((r) => r.status)).toEqual([200]);
    const actionId = err.headers?.get('x-gateway-action-id') as string;
    // Dispatch records the attempt `usage_missing`; settlement then opens the case and moves the
    // attempt on in one transaction. The case is read first, so the attempt read after it sees
    // that transaction whole (read the other way round, the two could straddle its commit).
    const { attempt, cases } = await eventually(() =>
      withSeeder(async (_s, db) => {
        const cases = await db.prisma.reconciliationCase.findMany({ where: { actionId } });
        const attempt = await db.prisma.attempt.findFirst({ where: { actionId } });
        return cases.length > 0 ? { attempt, cases } : undefined;
      }),
    );
    expect(attempt?.status).toBe('reconciliation_required');
    expect(cases).toEqual([expect.objectContaining({ reason: 'usage_missing', status: 'open' })]);
    expect(cases[0].exposureMicrousd).toBeGreaterThan(0n);
  });
});
