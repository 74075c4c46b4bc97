import fc from 'fast-check';
import {
  AcceptanceOptions,
  FinishReason,
  NormalisedCandidate,
  NormalisedResponse,
  ProviderKind,
  accept,
  candidateShortfall,
  normaliseAnyFinishReason,
  normaliseFinishReason,
} from './acceptance';

const KINDS: ProviderKind[] = ['openai-chat', 'openai-compatible', 'gemini-generate'];
const CANONICAL: FinishReason[] = ['stop', 'length', 'content_filter', 'tool_calls', 'other'];

describe('normaliseFinishReason', () => {
  it.each<[ProviderKind, string | null | undefined, FinishReason | null]>([
    ['openai-chat', 'stop', 'stop'],
    ['openai-chat', 'length', 'length'],
    ['openai-chat', 'content_filter', 'content_filter'],
    ['openai-chat', 'tool_calls', 'tool_calls'],
    ['openai-chat', 'function_call', 'tool_calls'],
    ['openai-chat', 'weird', 'other'],
    ['openai-chat', 'STOP', 'other'],
    ['openai-chat', null, null],
    ['openai-chat', undefined, null],
    ['openai-chat', '', null],
    ['openai-compatible', 'stop', 'stop'],
    ['openai-compatible', 'eos', 'stop'],
    ['openai-compatible', 'max_tokens', 'length'],
    ['openai-compatible', 'constructor', 'other'],
    ['gemini-generate', 'STOP', 'stop'],
    ['gemini-generate', 'MAX_TOKENS', 'length'],
    ['gemini-generate', 'SAFETY', 'content_filter'],
    ['gemini-generate', 'RECITATION', 'content_filter'],
    ['gemini-generate', 'BLOCKLIST', 'content_filter'],
    ['gemini-generate', 'PROHIBITED_CONTENT', 'content_filter'],
    ['gemini-generate', 'SPII', 'content_filter'],
    ['gemini-generate', 'IMAGE_SAFETY', 'content_filter'],
    ['gemini-generate', 'OTHER', 'other'],
    ['gemini-generate', 'LANGUAGE', 'other'],
    ['gemini-generate', 'MALFORMED_FUNCTION_CALL', 'other'],
    ['gemini-generate', 'FINISH_REASON_UNSPECIFIED', 'other'],
    ['gemini-generate', 'stop', 'stop'], // already canonical
    ['gemini-generate', 'toString', 'other'],
  ])('%s %p -> %p', (kind, raw, expected) => {
    expect(normaliseFinishReason(kind, raw)).toBe(expected);
  });

  it.each<[string | null, FinishReason | null]>([
    ['SAFETY', 'content_filter'],
    ['function_call', 'tool_calls'],
    ['length', 'length'],
    ['eos', 'stop'],
    ['?', 'other'],
    [null, null],
  ])('provider-agnostic %p -> %p', (raw, expected) => {
    expect(normaliseAnyFinishReason(raw)).toBe(expected);
  });

  it('property: always returns a canonical value or null, and is idempotent', () => {
    fc.assert(
      fc.property(fc.constantFrom(...KINDS), fc.option(fc.string()), (kind, raw) => {
        const once = normaliseFinishReason(kind, raw);
        expect(once === null || CANONICAL.includes(once)).toBe(true);
        expect(normaliseFinishReason(kind, once)).toBe(once);
      }),
    );
  });
});

const t0 = new Date('2030-01-01T00:00:00.000Z');
const t1 = new Date('2030-01-01T00:00:30.000Z');
const opts: AcceptanceOptions = {
  allowLength: false,
  allowContentFilter: false,
  receivedAt: t0,
  deadline: t1,
};
const cand = (index: number, finishReason: string | null, hasContent = true): NormalisedCandidate => ({
  index,
  finishReason,
  hasContent,
});
const resp = (candidates: NormalisedCandidate[], extra: Partial<NormalisedResponse> = {}): NormalisedResponse => ({
  providerKind: 'openai-chat',
  candidates,
  promptBlockReason: null,
  ...extra,
});

describe('accept', () => {
  it.each<[string, NormalisedResponse, Partial<AcceptanceOptions>, { valid: boolean; reason: string; validCandidateIndexes: number[] }]>([
    ['single good candidate', resp([cand(0, 'stop')]), {}, { valid: true, reason: 'ok', validCandidateIndexes: [0] }],
    ['tool calls count as success', resp([cand(0, 'tool_calls')]), {}, { valid: true, reason: 'ok', validCandidateIndexes: [0] }],
    ['no candidates', resp([]), {}, { valid: false, reason: 'no_candidates', validCandidateIndexes: [] }],
    [
      'prompt blocked',
      resp([], { providerKind: 'gemini-generate', promptBlockReason: 'SAFETY' }),
      {},
      { valid: false, reason: 'prompt_blocked', validCandidateIndexes: [] },
    ],
    [
      'all empty',
      resp([cand(0, 'stop', false), cand(1, null, false)]),
      {},
      { valid: false, reason: 'no_content', validCandidateIndexes: [] },
    ],
    [
      'truncated not allowed',
      resp([cand(0, 'length')]),
      {},
      { valid: false, reason: 'finish_reason_not_allowed', validCandidateIndexes: [] },
    ],
    ['truncated allowed', resp([cand(0, 'length')]), { allowLength: true }, { valid: true, reason: 'ok', validCandidateIndexes: [0] }],
    [
      'filtered not allowed',
      resp([cand(0, 'content_filter')]),
      {},
      { valid: false, reason: 'finish_reason_not_allowed', validCandidateIndexes: [] },
    ],
    [
      'filtered allowed',
      resp([cand(0, 'content_filter')]),
      { allowContentFilter: true },
      { valid: true, reason: 'ok', validCandidateIndexes: [0] },
    ],
    ['missing finish reason', resp([cand(0, null)]), {}, { valid: false, reason: 'finish_reason_not_allowed', validCandidateIndexes: [] }],
    [
      'looks beyond candidates[0]',
      resp([cand(0, 'content_filter', false), cand(1, 'stop'), cand(2, 'length'), cand(3, 'stop')]),
      {},
      { valid: true, reason: 'ok', validCandidateIndexes: [1, 3] },
    ],
    [
      'uses candidate.index, not array position',
      resp([cand(5, 'stop'), cand(2, 'stop')]),
      {},
      { valid: true, reason: 'ok', validCandidateIndexes: [5, 2] },
    ],
    [
      'gemini vocabulary',
      resp([cand(0, 'SAFETY'), cand(1, 'STOP')], { providerKind: 'gemini-generate' }),
      {},
      { valid: true, reason: 'ok', validCandidateIndexes: [1] },
    ],
    ['at the deadline is in time', resp([cand(0, 'stop')]), { receivedAt: t1 }, { valid: true, reason: 'ok', validCandidateIndexes: [0] }],
    [
      'after the deadline',
      resp([cand(0, 'stop')]),
      { receivedAt: new Date(t1.getTime() + 1) },
      { valid: false, reason: 'after_deadline', validCandidateIndexes: [] },
    ],
  ])('%s', (_label, r, o, expected) => {
    expect(accept(r, { ...opts, ...o })).toEqual(expected);
  });

  const candArb = fc.record({
    index: fc.nat(16),
    finishReason: fc.option(fc.constantFrom('stop', 'length', 'content_filter', 'tool_calls', 'function_call', 'weird')),
    hasContent: fc.boolean(),
  });

  it('property: valid iff some candidate has content and an allowed reason, in time and unblocked', () => {
    fc.assert(
      fc.property(
        fc.array(candArb, { maxLength: 8 }),
        fc.boolean(),
        fc.boolean(),
        fc.integer({ min: -1_000, max: 1_000 }),
        fc.option(fc.constant('SAFETY')),
        (candidates, allowLength, allowContentFilter, lateByMs, promptBlockReason) => {
          const a = accept(
            { providerKind: 'openai-chat', candidates, promptBlockReason },
            { allowLength, allowContentFilter, deadline: t1, receivedAt: new Date(t1.getTime() + lateByMs) },
          );
          const allowed = (c: NormalisedCandidate) => {
            const r = normaliseFinishReason('openai-chat', c.finishReason);
            return r === 'stop' || r === 'tool_calls' || (r === 'length' && allowLength) || (r === 'content_filter' && allowContentFilter);
          };
          const expectedValid = lateByMs <= 0 && promptBlockReason === null && candidates.some((c) => c.hasContent && allowed(c));
          expect(a.valid).toBe(expectedValid);
          expect(a.reason === 'ok').toBe(a.valid);
          if (a.valid) expect(a.validCandidateIndexes).toEqual(candidates.filter((c) => c.hasContent && allowed(c)).map((c) => c.index));
          else expect(a.validCandidateIndexes).toEqual([]);
        },
      ),
    );
  });

  it('property: shuffling candidates never changes validity', () => {
    fc.assert(
      fc.property(
        fc.array(candArb, { maxLength: 8 }).chain((cs) => fc.tuple(fc.constant(cs), fc.shuffledSubarray(cs, { minLength: cs.length }))),
        ([cs, shuffled]) => {
          expect(accept(resp(shuffled), opts).valid).toBe(accept(resp(cs), opts).valid);
        },
      ),
    );
  });
});

describe('candidateShortfall', () => {
  it.each<[string, Parameters<typeof candidateShortfall>[0], Partial<ReturnType<typeof candidateShortfall>>]>([
    [
      'exact',
      { effective: 2, returned: [cand(0, 'stop'), cand(1, 'stop')], promptBlockReason: null },
      {
        returnedCount: 2,
        missingCount: 0,
        excessCount: 0,
        unexplainedShortfall: false,
        excess: false,
        blocked: false,
      },
    ],
    [
      'unexplained shortfall',
      { effective: 3, returned: [cand(0, 'stop')], promptBlockReason: null },
      { returnedCount: 1, missingCount: 2, unexplainedShortfall: true, excess: false },
    ],
    [
      'shortfall explained by a filtered candidate',
      { effective: 3, returned: [cand(0, 'stop'), cand(1, 'SAFETY', false)], promptBlockReason: null },
      { missingCount: 1, unexplainedShortfall: false },
    ],
    [
      'shortfall explained by a prompt block',
      { effective: 2, returned: [], promptBlockReason: 'PROHIBITED_CONTENT' },
      { returnedCount: 0, missingCount: 2, blocked: true, unexplainedShortfall: false },
    ],
    [
      'excess',
      { effective: 1, returned: [cand(0, 'stop'), cand(1, 'stop')], promptBlockReason: null },
      { excessCount: 1, excess: true, missingCount: 0 },
    ],
  ])('%s', (_label, input, expected) => {
    expect(candidateShortfall(input)).toMatchObject(expected);
  });

  it('classifies each candidate', () => {
    const r = candidateShortfall({
      effective: 5,
      returned: [
        cand(0, 'stop'),
        cand(1, 'content_filter', false),
        cand(2, 'MAX_TOKENS'),
        cand(3, 'stop', false),
        cand(4, 'length', false),
      ],
      promptBlockReason: null,
      providerKind: 'gemini-generate',
    });
    expect(r.perCandidate).toEqual([
      { index: 0, outcome: 'ok' },
      { index: 1, outcome: 'filtered' },
      { index: 2, outcome: 'truncated' },
      { index: 3, outcome: 'empty' },
      { index: 4, outcome: 'truncated' },
    ]);
  });

  it('throws on a non-positive effective count', () => {
    expect(() => candidateShortfall({ effective: 0, returned: [], promptBlockReason: null })).toThrow(RangeError);
  });

  it('property: counts reconcile with effective', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(
          fc.record({
            index: fc.nat(10),
            finishReason: fc.option(fc.constantFrom('stop', 'SAFETY', 'length')),
            hasContent: fc.boolean(),
          }),
          { maxLength: 12 },
        ),
        fc.option(fc.constant('SAFETY')),
        (effective, returned, promptBlockReason) => {
          const r = candidateShortfall({ effective, returned, promptBlockReason });
          expect(r.returnedCount - r.excessCount + r.missingCount).toBe(effective);
          expect(r.missingCount === 0 || r.excessCount === 0).toBe(true);
          expect(r.excess).toBe(r.excessCount > 0);
          expect(r.perCandidate).toHaveLength(returned.length);
          if (r.unexplainedShortfall) {
            expect(r.missingCount).toBeGreaterThan(0);
            expect(r.blocked).toBe(false);
            expect(r.perCandidate.some((c) => c.outcome === 'filtered')).toBe(false);
          }
        },
      ),
    );
  });
});
