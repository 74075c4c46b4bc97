import { GoogleGenAI } from '@google/genai';
import OpenAI, { NotFoundError } from 'openai';
import { Database } from '@gateway/db';
import { openai, simLastSeq, simRequestsSince, stack, uid, withSeeder } from './support';

/**
 * Issue 9: Gemini's methods under /v1beta and /v1 alike (countTokens answered by the gateway
 * from its own input estimate), and the model lists both SDKs ask for.
 */
describe('Gemini API versions, countTokens and model lists', () => {
  const run = uid();
  const openAiAlias = `e2e-mod-oa-${run}`;
  const geminiAlias = `e2e-mod-gm-${run}`;
  const notAllowed = `e2e-mod-other-${run}`;
  const workloadId = `e2e-models-${run}`;
  let key: string;
  let client: OpenAI;
  /** Paths the SDKs called on admission, captured around the global fetch they use. */
  const called: string[] = [];
  const realFetch = globalThis.fetch;

  beforeAll(async () => {
    key = await withSeeder(async (seed) => {
      for (const [alias, providerKind, upstreamModel] of [
        [openAiAlias, 'openai-chat', 'sim-gpt'],
        [geminiAlias, 'gemini-generate', 'gemini-sim'],
        [notAllowed, 'openai-chat', 'sim-gpt'],
      ] as const) {
        await seed.route({ routeId: alias, alias, providerKind, upstreamBaseUrl: stack.providerSim, upstreamModel });
      }
      return (await seed.workload({ id: workloadId, allowedAliases: [openAiAlias, geminiAlias] })).key;
    });
    globalThis.fetch = (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (url.origin === stack.admission)
        called.push(`${init?.method ?? (input instanceof Request ? input.method : 'GET')} ${url.pathname}`);
      return realFetch(input, init);
    };
    // After the wrap: the OpenAI client takes the global fetch when it is built.
    client = openai(key);
  });

  afterAll(() => {
    globalThis.fetch = realFetch;
  });

  beforeEach(() => {
    called.length = 0;
  });

  const genai = (apiVersion?: string) =>
    new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: stack.admission, ...(apiVersion ? { apiVersion } : {}) } });

  async function actionCount(): Promise<number> {
    const db = new Database(stack.databaseUrl);
    try {
      const rows = await db.prisma.$queryRaw<Array<{ n: bigint }>>`SELECT count(*) AS n FROM action WHERE workload_id = ${workloadId}`;
      return Number(rows[0].n);
    } finally {
      await db.close();
    }
  }

  /** The installed SDK's default version (v1beta for @google/genai 2.x), read from the path it called. */
  const prefixOf = (path: string | undefined) => /^[A-Z]+ (\/v1(?:beta)?)\/models/.exec(path ?? '')?.[1] ?? 'none';

  it.each([
    ['the SDK default', undefined],
    ["apiVersion: 'v1beta'", 'v1beta'],
    ["apiVersion: 'v1'", 'v1'],
  ])('generateContent and streamGenerateContent with %s', async (_name, apiVersion) => {
    const ai = genai(apiVersion);
    const res = await ai.models.generateContent({ model: geminiAlias, contents: 'hello' });
    expect(res.candidates).toHaveLength(1);
    let chunks = 0;
    for await (const _chunk of await ai.models.generateContentStream({ model: geminiAlias, contents: 'stream' })) chunks++;
    expect(chunks).toBeGreaterThan(0);
    const prefix = apiVersion ? `/${apiVersion}` : prefixOf(called[0]);
    expect(['/v1', '/v1beta']).toContain(prefix);
    expect(called).toEqual([
      `POST ${prefix}/models/${geminiAlias}:generateContent`,
      `POST ${prefix}/models/${geminiAlias}:streamGenerateContent`,
    ]);
  });

  it('countTokens: the gateway estimate under both versions; no upstream call, no action, nothing billed', async () => {
    const before = await simLastSeq();
    const actionsBefore = await actionCount();
    const contents = 'How many tokens is this sentence, roughly?';
    const beta = await genai('v1beta').models.countTokens({ model: geminiAlias, contents });
    const v1 = await genai('v1').models.countTokens({ model: geminiAlias, contents });
    expect(beta.totalTokens).toBeGreaterThan(Math.ceil(contents.length / 4));
    expect(v1.totalTokens).toBe(beta.totalTokens);
    const longer = await genai('v1beta').models.countTokens({ model: geminiAlias, contents: contents.repeat(10) });
    expect(longer.totalTokens).toBeGreaterThan(beta.totalTokens!);
    const byDefault = await genai().models.countTokens({ model: geminiAlias, contents });
    expect(byDefault.totalTokens).toBe(beta.totalTokens);
    expect(called.slice(0, 3)).toEqual([
      `POST /v1beta/models/${geminiAlias}:countTokens`,
      `POST /v1/models/${geminiAlias}:countTokens`,
      `POST /v1beta/models/${geminiAlias}:countTokens`,
    ]);
    expect(called[3]).toMatch(new RegExp(`^POST /v1(beta)?/models/${geminiAlias}:countTokens$`));
    expect(await simRequestsSince(before)).toHaveLength(0);
    expect(await actionCount()).toBe(actionsBefore);
  });

  it('countTokens is authenticated and only for the aliases the workload may use', async () => {
    const bad = new GoogleGenAI({ apiKey: 'gw_not-a-key', httpOptions: { baseUrl: stack.admission } });
    await expect(bad.models.countTokens({ model: geminiAlias, contents: 'x' })).rejects.toMatchObject({ status: 401 });
    await expect(genai().models.countTokens({ model: notAllowed, contents: 'x' })).rejects.toMatchObject({ status: 404 });
    // An OpenAI-kind route does not speak the Gemini dialect.
    await expect(genai().models.countTokens({ model: openAiAlias, contents: 'x' })).rejects.toMatchObject({ status: 404 });
  });

  it('openai.models.list / retrieve: the OpenAI-kind aliases of this workload, in OpenAI shape', async () => {
    const ids: string[] = [];
    for await (const m of client.models.list()) {
      expect(m).toMatchObject({ object: 'model', owned_by: 'llm-gateway' });
      expect(m.created).toBeGreaterThan(1_700_000_000);
      ids.push(m.id);
    }
    expect(ids).toEqual([openAiAlias]);
    await expect(client.models.retrieve(openAiAlias)).resolves.toMatchObject({ id: openAiAlias, object: 'model' });
    const err = await client.models.retrieve(notAllowed).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).code).toBe('unknown_route');
    expect(called).toEqual(['GET /v1/models', 'GET /v1/models/' + openAiAlias, 'GET /v1/models/' + notAllowed]);
  });

  it.each([
    ['the SDK default', undefined],
    ["apiVersion: 'v1beta'", 'v1beta'],
    ["apiVersion: 'v1'", 'v1'],
  ])('ai.models.list / get with %s: the Gemini-kind aliases, in Gemini shape', async (_name, apiVersion) => {
    const ai = genai(apiVersion);
    const names: string[] = [];
    for await (const m of await ai.models.list()) {
      expect(m.supportedActions).toEqual(expect.arrayContaining(['generateContent', 'countTokens']));
      names.push(m.name ?? '');
    }
    expect(names).toEqual([`models/${geminiAlias}`]);
    await expect(ai.models.get({ model: geminiAlias })).resolves.toMatchObject({ name: `models/${geminiAlias}` });
    const prefix = apiVersion ? `/${apiVersion}` : prefixOf(called[0]);
    expect(called).toEqual([`GET ${prefix}/models`, `GET ${prefix}/models/${geminiAlias}`]);
  });

  it('/v1/models refuses a missing or unknown key in the dialect the caller speaks', async () => {
    const plain = await fetch(`${stack.admission}/v1/models`);
    expect(plain.status).toBe(401);
    expect(await plain.json()).toMatchObject({ error: { code: 'unauthorized', type: 'invalid_request_error' } });
    const gemini = await fetch(`${stack.admission}/v1/models`, { headers: { 'x-goog-api-key': 'gw_not-a-key' } });
    expect(gemini.status).toBe(401);
    expect(await gemini.json()).toMatchObject({ error: { code: 401, status: 'unauthorized' } });
  });
});
