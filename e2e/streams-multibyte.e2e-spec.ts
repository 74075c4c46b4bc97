import { openai, stack, uid, withSeeder, gemini } from './support';

/**
 * Issue 6, defect 1: non-ASCII text survives the stream end to end. The provider simulator echoes
 * the prompt and writes its stream in pieces cut inside every multi-byte character and every CRLF
 * (with a byte-order mark), so dispatch reads characters split across network reads; the SDKs
 * must assemble exactly the text the simulator sent.
 */
describe('streams carry multi-byte text intact (openai and @google/genai SDKs)', () => {
  const run = uid();
  const r = (name: string) => `${name}-${run}`;
  const TEXT = 'naïve 日本 🚀 café — ∑ ✓ Ωmega straße 👩‍💻 done';
  let key: string;

  const ai = () => gemini(key);

  beforeAll(async () => {
    await withSeeder(async (seed) => {
      await seed.route({
        routeId: r('mb-oa'),
        alias: r('mb-oa'),
        providerKind: 'openai-chat',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'sim-gpt;fragment;echo',
      });
      await seed.route({
        routeId: r('mb-gm'),
        alias: r('mb-gm'),
        providerKind: 'gemini-generate',
        upstreamBaseUrl: stack.providerSim,
        upstreamModel: 'gemini-sim;fragment;echo',
      });
      key = (await seed.workload({ id: r('w-mb'), allowedAliases: [r('mb-oa'), r('mb-gm')] })).key;
    });
  });

  it('openai chat.completions stream', async () => {
    const stream = await openai(key).chat.completions.create({
      model: r('mb-oa'),
      messages: [{ role: 'user', content: TEXT }],
      stream: true,
    });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(text).toBe(TEXT);
    expect(finish).toBe('stop');
  });

  it('@google/genai generateContentStream', async () => {
    const stream = await ai().models.generateContentStream({ model: r('mb-gm'), contents: TEXT });
    let text = '';
    for await (const chunk of stream) text += chunk.text ?? '';
    expect(text).toBe(TEXT);
  });

  it('Gemini streamGenerateContent without alt=sse (a JSON array)', async () => {
    const res = await fetch(`${stack.admission}/v1beta/models/${r('mb-gm')}:streamGenerateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-goog-api-key': key },
      body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: TEXT }] }] }),
    });
    expect(res.status).toBe(200);
    const chunks = (await res.json()) as Array<{ candidates?: Array<{ content?: { parts?: Array<{ text?: string }> } }> }>;
    const text = chunks.map((c) => c.candidates?.[0]?.content?.parts?.map((p) => p.text ?? '').join('') ?? '').join('');
    expect(text).toBe(TEXT);
  });
});
