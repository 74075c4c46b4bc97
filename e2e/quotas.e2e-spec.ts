import OpenAI, { APIError } from 'openai';
import { eventually, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * The backstops of DESIGN §7: a token rate per workload and an in-flight ceiling. Both refuse
 * with 429, Retry-After and x-should-retry: true (the SDK may retry later), before dispatch.
 */
describe('token quota and concurrency ceiling', () => {
  const run = uid();
  const fast = `q-fast-${run}`;
  const slow = `q-slow-${run}`;
  let tpmKey: string;
  let oneAtATimeKey: string;
  const client = (key: string) => new OpenAI({ apiKey: key, baseURL: `${stack.admission}/v1`, maxRetries: 0 });

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      await seed.route({
        routeId: fast,
        alias: fast,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt',
      });
      await seed.route({
        routeId: slow,
        alias: slow,
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;latency=1500',
      });
      tpmKey = (await seed.workload({ id: `q-tpm-${run}`, allowedAliases: [fast], perCandidateOutputCeiling: 256, tokensPerMinute: 400 }))
        .key;
      oneAtATimeKey = (await seed.workload({ id: `q-one-${run}`, allowedAliases: [slow], maxInFlight: 1 })).key;
    });
  });

  it('a request that would exceed the tokens-per-minute quota → 429 token_quota_exceeded, Retry-After, not dispatched', async () => {
    // Both requests must fall in the same UTC-minute window: start well before its end.
    await eventually(() => (new Date().getUTCSeconds() < 55 ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 200,
      what: 'a UTC minute with time left for two requests',
    });
    const first = await client(tpmKey).chat.completions.create({ model: fast, messages: [{ role: 'user', content: 'first' }] });
    expect(first.choices).toHaveLength(1);
    const before = await simLastSeq();
    const err = (await client(tpmKey)
      .chat.completions.create({ model: fast, messages: [{ role: 'user', content: 'second' }] })
      .catch((e) => e)) as APIError;
    expect(err.status).toBe(429);
    expect(err.code).toBe('token_quota_exceeded');
    expect(Number(err.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(err.headers?.get('x-should-retry')).toBe('true');
    expect(await simRequestsSince(before)).toHaveLength(0);
  });

  it('a second concurrent request over the in-flight ceiling → 429 concurrency_limit_exceeded', async () => {
    const c = client(oneAtATimeKey);
    const before = await simLastSeq();
    const slowOne = c.chat.completions.create({ model: slow, messages: [{ role: 'user', content: 'slow' }] });
    // The first request holds the only slot once it reached the upstream (which answers after 1.5 s).
    await eventually(async () => ((await simRequestsSince(before)).some((r) => r.directives.includes('latency=1500')) ? true : undefined), {
      what: 'the first request in flight upstream',
    });
    const err = (await c.chat.completions
      .create({ model: slow, messages: [{ role: 'user', content: 'again' }] })
      .catch((e) => e)) as APIError;
    expect(err.status).toBe(429);
    expect(err.code).toBe('concurrency_limit_exceeded');
    expect(err.headers?.get('retry-after')).toBe('1');
    expect(err.headers?.get('x-should-retry')).toBe('true');
    expect((await slowOne).choices).toHaveLength(1);
    // once the first finished, the slot is free again
    const after = await c.chat.completions.create({ model: slow, messages: [{ role: 'user', content: 'later' }] });
    expect(after.choices).toHaveLength(1);
  });
});
