import fc from 'fast-check';
import { DEFAULT_MEDIA_INPUT_TOKENS, estimateRequestInputTokens, MediaInputTokens, serialisedInput } from './input-estimate';
import { estimateInputTokens } from './reservation';

const MEDIA: MediaInputTokens = { image: 100, audio: 200, video: 300, document: 400 };
const text = (t: string) => ({ role: 'user', content: t });

function tokens(body: Record<string, unknown>, dialect: 'openai-chat' | 'gemini-generate' = 'openai-chat'): number {
  const r = estimateRequestInputTokens(body, dialect, MEDIA);
  if (!r.ok) throw new Error(r.message);
  return r.tokens;
}

describe('estimateRequestInputTokens', () => {
  it('is the serialised body at the text rate plus the per-message overhead', () => {
    const body = { model: 'm', messages: [text('hello')] };
    expect(tokens(body)).toBe(estimateInputTokens([JSON.stringify({ messages: [text('hello')] })], 1));
  });

  it('does not count the alias in model (the adapter replaces it)', () => {
    expect(tokens({ model: 'a', messages: [text('q')] })).toBe(tokens({ model: 'a-much-longer-alias-name', messages: [text('q')] }));
  });

  it.each<[string, Record<string, unknown>]>([
    [
      'tools and their schemas',
      {
        tools: [
          {
            type: 'function',
            function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'string', description: 'x'.repeat(300) } } } },
          },
        ],
      },
    ],
    [
      'tool-call arguments',
      {
        messages: [
          text('q'),
          { role: 'assistant', tool_calls: [{ id: 't', type: 'function', function: { name: 'f', arguments: 'y'.repeat(300) } }] },
        ],
      },
    ],
    [
      'response_format schema',
      { response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { description: 'z'.repeat(300) } } } },
    ],
  ])('counts %s (text-only estimates did not)', (_name, extra) => {
    const base = { model: 'm', messages: [text('q')] };
    expect(tokens({ ...base, ...extra })).toBeGreaterThanOrEqual(tokens(base) + 100);
  });

  it.each<[string, Record<string, unknown>, 'openai-chat' | 'gemini-generate', number]>([
    [
      'an OpenAI image',
      { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }] },
      'openai-chat',
      100,
    ],
    [
      'OpenAI audio',
      { messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AA', format: 'wav' } }] }] },
      'openai-chat',
      200,
    ],
    [
      'an inline OpenAI file',
      { messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: 'AA', filename: 'a.pdf' } }] }] },
      'openai-chat',
      400,
    ],
    [
      'Gemini inline image (snake)',
      { contents: [{ parts: [{ inline_data: { mime_type: 'image/png', data: 'AA' } }] }] },
      'gemini-generate',
      100,
    ],
    ['Gemini inline video', { contents: [{ parts: [{ inlineData: { mimeType: 'video/mp4', data: 'AA' } }] }] }, 'gemini-generate', 300],
    ['Gemini inline pdf', { contents: [{ parts: [{ inlineData: { mimeType: 'application/pdf', data: 'AA' } }] }] }, 'gemini-generate', 400],
  ])('adds the contract minimum for %s', (_name, body, dialect, minimum) => {
    const r = estimateRequestInputTokens(body, dialect, MEDIA);
    expect(r.ok && r.tokens).toBe(estimateInputTokens([serialisedInput(body)], dialect === 'openai-chat' ? 1 : 1) + minimum);
  });

  it('counts a snake_case system instruction as a message', () => {
    const withSystem = { contents: [{ parts: [{ text: 'q' }] }], system_instruction: { parts: [{ text: 's'.repeat(300) }] } };
    expect(tokens(withSystem, 'gemini-generate')).toBeGreaterThanOrEqual(100 + 8);
  });

  it.each<[string, Record<string, unknown>, 'openai-chat' | 'gemini-generate', string]>([
    ['Gemini cached content', { contents: [], cachedContent: 'cachedContents/1' }, 'gemini-generate', 'cachedContent'],
    ['Gemini cached content (snake)', { contents: [], cached_content: 'cachedContents/1' }, 'gemini-generate', 'cached_content'],
    [
      'a Gemini remote file',
      { contents: [{ parts: [{ fileData: { fileUri: 'gs://b/o' } }] }] },
      'gemini-generate',
      'contents[0].parts[0].fileData',
    ],
    [
      'a Gemini remote file in the system instruction',
      { contents: [], systemInstruction: { parts: [{ file_data: { file_uri: 'https://x' } }] } },
      'gemini-generate',
      'systemInstruction.parts[0].file_data',
    ],
    [
      'an OpenAI stored file',
      { messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'file-1' } }] }] },
      'openai-chat',
      'messages[0].content[0].file',
    ],
  ])('refuses %s as unpriced_input', (_name, body, dialect, param) => {
    expect(estimateRequestInputTokens(body, dialect, MEDIA)).toMatchObject({ ok: false, code: 'unpriced_input', param });
  });

  describe('Responses API (openai-responses)', () => {
    const est = (body: Record<string, unknown>) => estimateRequestInputTokens(body, 'openai-responses', MEDIA);

    it('a string input is one message; instructions another; the whole body is the floor', () => {
      const body = { model: 'm', input: 'hello there', instructions: 'be brief' };
      expect(est(body)).toMatchObject({ ok: true, tokens: estimateInputTokens([serialisedInput(body)], 2) });
      expect(est({ input: 'hello there' })).toMatchObject({
        ok: true,
        tokens: estimateInputTokens([serialisedInput({ input: 'hello there' })], 1),
      });
    });

    it('counts input items, tools and instructions: more of any never estimates less', () => {
      const base = { input: [{ role: 'user', content: 'q' }] };
      const r0 = est(base);
      const withTools = est({ ...base, tools: [{ type: 'function', name: 'f', parameters: { description: 'x'.repeat(300) } }] });
      const withInstructions = est({ ...base, instructions: 'y'.repeat(300) });
      const twoItems = est({ input: [...base.input, { role: 'assistant', content: 'a' }] });
      for (const r of [withTools, withInstructions, twoItems]) expect(r.ok && r0.ok && r.tokens > r0.tokens).toBe(true);
    });

    it.each<[string, Record<string, unknown>, number]>([
      ['an image', { type: 'input_image', image_url: 'https://x/y.png' }, 100],
      ['an image stored at the provider (priced by the image minimum)', { type: 'input_image', file_id: 'file-1' }, 100],
      ['audio', { type: 'input_audio', input_audio: { data: 'AA', format: 'wav' } }, 200],
      ['an inline file', { type: 'input_file', file_data: 'data:application/pdf;base64,AA', filename: 'a.pdf' }, 400],
    ])('adds the contract minimum for %s', (_name, part, minimum) => {
      const body = { input: [{ role: 'user', content: [{ type: 'input_text', text: 'look' }, part] }] };
      expect(est(body)).toMatchObject({ ok: true, tokens: estimateInputTokens([serialisedInput(body)], 1) + minimum });
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['a stored file', { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] }, 'input[0].content[0]'],
      [
        'a file behind a URL',
        { input: [{ role: 'user', content: [{ type: 'input_file', file_url: 'https://x/a.pdf' }] }] },
        'input[0].content[0]',
      ],
      ['a stored prompt template', { prompt: { id: 'pmpt_1' }, input: 'hi' }, 'prompt'],
    ])('refuses %s as unpriced_input', (_name, body, param) => {
      expect(est(body)).toMatchObject({ ok: false, code: 'unpriced_input', param });
    });
  });

  it('throws on a bad contract minimum (configuration, not caller input)', () => {
    expect(() => estimateRequestInputTokens({ messages: [] }, 'openai-chat', { ...DEFAULT_MEDIA_INPUT_TOKENS, image: -1 })).toThrow(
      RangeError,
    );
  });

  const json: fc.Arbitrary<unknown> = fc.jsonValue();

  it('property: never below the text-only estimate of the same messages, and monotonic in added fields', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'grapheme' }), { minLength: 1, maxLength: 8 }),
        fc.dictionary(fc.string({ minLength: 1 }), json),
        (texts, extra) => {
          const body = { messages: texts.map(text) };
          const base = tokens(body);
          expect(base).toBeGreaterThanOrEqual(estimateInputTokens(texts, texts.length));
          const keys = Object.keys(extra).filter((k) => k !== 'messages' && k !== '__proto__');
          const more = { ...body, ...Object.fromEntries(keys.map((k) => [k, extra[k]])) };
          expect(tokens(more)).toBeGreaterThanOrEqual(base);
        },
      ),
    );
  });

  it('property: every media item adds at least its minimum', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('image/png', 'audio/wav', 'video/mp4', 'application/pdf'), { maxLength: 10 }), (mimes) => {
        const body = { contents: [{ parts: mimes.map((mimeType) => ({ inlineData: { mimeType, data: 'AAAA' } })) }] };
        const r = estimateRequestInputTokens(body, 'gemini-generate', MEDIA);
        const floor = estimateInputTokens([serialisedInput(body)], 1);
        const minimums = mimes.reduce(
          (n, m) => n + ({ image: 100, audio: 200, video: 300, application: 400 } as Record<string, number>)[m.split('/')[0]],
          0,
        );
        expect(r.ok && r.tokens).toBe(floor + minimums);
      }),
    );
  });
});
