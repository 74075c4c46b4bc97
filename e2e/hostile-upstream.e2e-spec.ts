import { Topics } from '@gateway/contracts';
import { eventually, gemini, simLastSeq, simRequestsSince, stack, TopicReader, uid, withSeeder } from './support';

/**
 * A provider's answer is as untrusted as a client's request. provider-sim's `hostile-fields`
 * answers like a broken or hostile upstream: a responseId with a NUL, 3,000 characters long (jsonb
 * refuses a NUL; the attempt's provider-id index refuses a key that long), and 40 unknown usage
 * fields with 150-character names (the event's schema takes 32 of at most 128). Before the gateway
 * bounded what an adapter reads (libs/providers `boundedResponse`), the usage of such an answer
 * never reached the ledger: the evidence write failed and the attempt became an orphan case.
 */
describe('a provider that answers with values no evidence column takes (@google/genai SDK)', () => {
  const run = uid();
  const route = `hostile-${run}`;
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
      return (await seed.workload({ id: workload, allowedAliases: [route] })).key;
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
});
