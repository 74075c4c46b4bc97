import fc from 'fast-check';
import { normaliseRequest, RequestDialect, spendFieldSpellings, SpendFieldNames, toLowerCamel } from './request-shape';

const OPENAI: SpendFieldNames = { candidateParam: 'n', outputCapParam: 'max_completion_tokens' };
const GEMINI: SpendFieldNames = { candidateParam: 'candidateCount', outputCapParam: 'maxOutputTokens' };
const contents = [{ role: 'user', parts: [{ text: 'hi' }] }];

describe('normaliseRequest', () => {
  it('responses: every cap spelling leaves the body; the contract names (chat fields) do not apply', () => {
    const r = normaliseRequest({ input: 'q', max_output_tokens: 9, max_completion_tokens: 9, store: true }, 'openai-responses', {
      candidateParam: 'num_completions',
      outputCapParam: 'max_out',
    });
    expect(r).toMatchObject({ ok: true, body: { input: 'q', store: true }, requestedOutputCap: 9, requestedCandidates: undefined });
    expect(spendFieldSpellings('openai-responses', OPENAI)).toEqual({
      candidate: [],
      cap: ['max_output_tokens', 'max_completion_tokens', 'max_tokens'],
    });
  });

  it.each<[string, RequestDialect, SpendFieldNames, Record<string, unknown>, unknown, number | null, string]>([
    ['openai n', 'openai-chat', OPENAI, { messages: [], n: 3 }, 3, null, 'n'],
    ['openai max_tokens', 'openai-chat', OPENAI, { messages: [], max_tokens: 50 }, undefined, 50, 'n'],
    ['openai both caps equal', 'openai-chat', OPENAI, { messages: [], max_tokens: 50, max_completion_tokens: 50 }, undefined, 50, 'n'],
    ['openai null n is omitted', 'openai-chat', OPENAI, { messages: [], n: null }, undefined, null, 'n'],
    [
      'aggregator spelling',
      'openai-chat',
      { candidateParam: 'num_completions', outputCapParam: 'max_output_tokens' },
      { messages: [], num_completions: 4, max_output_tokens: 7 },
      4,
      7,
      'num_completions',
    ],
    [
      'gemini camel',
      'gemini-generate',
      GEMINI,
      { contents, generationConfig: { candidateCount: 2 } },
      2,
      null,
      'generationConfig.candidateCount',
    ],
    [
      'gemini snake inside camel',
      'gemini-generate',
      GEMINI,
      { contents, generationConfig: { candidate_count: 8, max_output_tokens: 9 } },
      8,
      9,
      'generationConfig.candidateCount',
    ],
    [
      'gemini snake config',
      'gemini-generate',
      GEMINI,
      { contents, generation_config: { candidate_count: 8 } },
      8,
      null,
      'generationConfig.candidateCount',
    ],
    [
      'gemini both configs merged',
      'gemini-generate',
      GEMINI,
      { contents, generation_config: { candidate_count: 2 }, generationConfig: { maxOutputTokens: 5 } },
      2,
      5,
      'generationConfig.candidateCount',
    ],
    ['gemini omitted', 'gemini-generate', GEMINI, { contents }, undefined, null, 'candidateCount'],
    ['responses cap', 'openai-responses', OPENAI, { input: 'q', max_output_tokens: 40 }, undefined, 40, 'n'],
    ['responses chat spelling of the cap', 'openai-responses', OPENAI, { input: 'q', max_tokens: 40 }, undefined, 40, 'n'],
    ['responses no cap', 'openai-responses', OPENAI, { input: 'q' }, undefined, null, 'n'],
  ])('%s', (_name, dialect, contract, body, candidates, cap, param) => {
    const r = normaliseRequest(body, dialect, contract);
    expect(r).toMatchObject({ ok: true, requestedCandidates: candidates, requestedOutputCap: cap, candidateParamName: param });
  });

  it.each<[string, RequestDialect, SpendFieldNames, Record<string, unknown>, string]>([
    ['responses has no candidate count', 'openai-responses', OPENAI, { input: 'q', n: 2 }, 'n'],
    ['responses caps differ', 'openai-responses', OPENAI, { input: 'q', max_output_tokens: 5, max_tokens: 6 }, 'max_output_tokens'],
    ['openai caps differ', 'openai-chat', OPENAI, { messages: [], max_tokens: 5, max_completion_tokens: 6 }, 'max_completion_tokens'],
    [
      'aggregator count differs from n',
      'openai-chat',
      { candidateParam: 'num_completions', outputCapParam: 'max_tokens' },
      { messages: [], n: 1, num_completions: 8 },
      'n',
    ],
    [
      'gemini counts differ',
      'gemini-generate',
      GEMINI,
      { contents, generationConfig: { candidateCount: 1, candidate_count: 8 } },
      'generationConfig.',
    ],
    [
      'gemini configs disagree',
      'gemini-generate',
      GEMINI,
      { contents, generation_config: { candidate_count: 8 }, generationConfig: { candidateCount: 1 } },
      'generationConfig.',
    ],
    [
      'gemini system instructions differ',
      'gemini-generate',
      GEMINI,
      { contents, systemInstruction: { parts: [{ text: 'a' }] }, system_instruction: { parts: [{ text: 'b' }] } },
      'system',
    ],
    ['cap not an integer', 'openai-chat', OPENAI, { messages: [], max_tokens: 1.5 }, 'max_tokens'],
    [
      'gemini cap zero',
      'gemini-generate',
      GEMINI,
      { contents, generationConfig: { max_output_tokens: 0 } },
      'generationConfig.maxOutputTokens',
    ],
  ])('refuses %s as invalid_request', (_name, dialect, contract, body, param) => {
    const r = normaliseRequest(body, dialect, contract);
    expect(r).toMatchObject({ ok: false, code: 'invalid_request' });
    if (!r.ok) expect(r.param.startsWith(param)).toBe(true);
  });

  it('brings Gemini top-level and generationConfig keys to lowerCamel, never keys inside schemas', () => {
    const r = normaliseRequest(
      {
        contents,
        system_instruction: { parts: [{ text: 's' }] },
        generation_config: { response_mime_type: 'application/json', response_schema: { properties: { user_id: { type: 'string' } } } },
      },
      'gemini-generate',
      GEMINI,
    );
    expect(r.ok && r.body).toEqual({
      contents,
      systemInstruction: { parts: [{ text: 's' }] },
      generationConfig: { responseMimeType: 'application/json', responseSchema: { properties: { user_id: { type: 'string' } } } },
    });
  });

  it('does not mutate its input', () => {
    const body = { contents, generationConfig: { candidateCount: 2, maxOutputTokens: 3 } };
    const before = structuredClone(body);
    normaliseRequest(body, 'gemini-generate', GEMINI);
    expect(body).toEqual(before);
  });

  it('property: whatever spellings carry one count, that count is read and no spelling survives', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<RequestDialect>('openai-chat', 'gemini-generate'),
        fc.integer({ min: 1, max: 128 }),
        fc.integer({ min: 1, max: 100_000 }),
        fc.boolean(),
        fc.boolean(),
        (dialect, count, cap, snakeConfig, twice) => {
          const contract = { candidateParam: 'num_completions', outputCapParam: 'max_tokens' };
          const spellings = spendFieldSpellings(dialect, contract);
          const fields: Record<string, unknown> = {};
          for (const name of twice ? spellings.candidate : spellings.candidate.slice(-1)) fields[name] = count;
          for (const name of spellings.cap) fields[name] = cap;
          const body: Record<string, unknown> =
            dialect === 'openai-chat'
              ? { messages: [], ...fields }
              : { contents, [snakeConfig ? 'generation_config' : 'generationConfig']: fields };
          const r = normaliseRequest(body, dialect, contract);
          expect(r).toMatchObject({ ok: true, requestedCandidates: count, requestedOutputCap: cap });
          if (!r.ok) return;
          const container = (dialect === 'openai-chat' ? r.body : r.body.generationConfig) as Record<string, unknown>;
          for (const name of [...spellings.candidate, ...spellings.cap]) expect(container).not.toHaveProperty(name);
          expect(r.body).not.toHaveProperty('generation_config');
        },
      ),
    );
  });

  it('property: two spellings with different counts are always refused', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<RequestDialect>('openai-chat', 'gemini-generate'),
        fc.integer({ min: 1, max: 128 }),
        fc.integer({ min: 1, max: 128 }),
        (dialect, a, b) => {
          fc.pre(a !== b);
          const [first, second] = spendFieldSpellings(dialect, {
            candidateParam: 'num_completions',
            outputCapParam: 'max_tokens',
          }).candidate;
          const fields = { [first]: a, [second]: b };
          const body = dialect === 'openai-chat' ? { messages: [], ...fields } : { contents, generationConfig: fields };
          expect(normaliseRequest(body, dialect, { candidateParam: 'num_completions', outputCapParam: 'max_tokens' })).toMatchObject({
            ok: false,
            code: 'invalid_request',
          });
        },
      ),
    );
  });
});

describe('toLowerCamel', () => {
  it.each([
    ['candidate_count', 'candidateCount'],
    ['candidateCount', 'candidateCount'],
    ['max_output_tokens', 'maxOutputTokens'],
    ['n', 'n'],
  ])('%s → %s', (a, b) => expect(toLowerCamel(a)).toBe(b));
});
