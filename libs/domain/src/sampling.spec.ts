import { deterministicSamplingParam } from './sampling';

describe('deterministicSamplingParam', () => {
  it.each([
    ['openai temperature 0', { temperature: 0 }, 'openai-chat', 'temperature'],
    ['openai temperature 0.7 samples', { temperature: 0.7 }, 'openai-chat', null],
    ['openai temperature omitted samples', {}, 'openai-chat', null],
    ['openai temperature "0" is not a number', { temperature: '0' }, 'openai-chat', null],
    ['aggregator top_k 1', { top_k: 1 }, 'openai-chat', 'top_k'],
    ['aggregator topK 1', { topK: 1 }, 'openai-chat', 'topK'],
    ['aggregator top_k 40 samples', { top_k: 40 }, 'openai-chat', null],
    ['gemini temperature 0', { generationConfig: { temperature: 0 } }, 'gemini-generate', 'generationConfig.temperature'],
    ['gemini topK 1', { generationConfig: { topK: 1 } }, 'gemini-generate', 'generationConfig.topK'],
    ['gemini top_k 1 (not yet canonical)', { generationConfig: { top_k: 1 } }, 'gemini-generate', 'generationConfig.top_k'],
    ['gemini temperature 1 with topK 3 samples', { generationConfig: { temperature: 1, topK: 3 } }, 'gemini-generate', null],
    ['gemini top-level temperature is not Gemini’s field', { temperature: 0 }, 'gemini-generate', null],
    ['gemini without generationConfig', {}, 'gemini-generate', null],
  ] as const)('%s', (_name, body, dialect, expected) => {
    expect(deterministicSamplingParam(body as Record<string, unknown>, dialect)).toBe(expected);
  });
});
