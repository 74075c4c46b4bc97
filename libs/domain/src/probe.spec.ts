import fc from 'fast-check';
import { TEST_PRICE } from './price.fixture';
import { PROBE_CANDIDATES, PROBE_OUTPUT_CAP, probeReservation } from './probe';

const price = TEST_PRICE;
const chat = { model: 'm', messages: [{ role: 'user', content: 'Reply with the single word: ok' }] };

describe('probeReservation', () => {
  it('reserves the estimate plus both candidates at the probe cap, per candidate unless the contract says shared', () => {
    const perCandidate = probeReservation(chat, 'openai-chat', 'per_candidate', price);
    expect(perCandidate.reservedOutputTokens).toBe(PROBE_CANDIDATES * PROBE_OUTPUT_CAP);
    expect(perCandidate.inputTokensEstimate).toBeGreaterThan(0);
    expect(probeReservation(chat, 'openai-chat', null, price)).toEqual(perCandidate);
    const shared = probeReservation(chat, 'openai-chat', 'shared', price);
    expect(shared.reservedOutputTokens).toBe(PROBE_OUTPUT_CAP);
    expect(shared.reservedMicrousd).toBeLessThan(perCandidate.reservedMicrousd);
  });

  it('is never free while the price is not, and grows with the price (integer micro-USD)', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 10n ** 9n }), fc.bigInt({ min: 1n, max: 10n ** 9n }), (input, output) => {
        const p = {
          ...price,
          inputPerMTokMicrousd: input,
          cachedInputPerMTokMicrousd: input,
          outputPerMTokMicrousd: output,
          reasoningPerMTokMicrousd: output,
        };
        const r = probeReservation(chat, 'openai-chat', 'per_candidate', p);
        const dearer = probeReservation(chat, 'openai-chat', 'per_candidate', {
          ...p,
          outputPerMTokMicrousd: output + 1_000_000n,
          reasoningPerMTokMicrousd: output + 1_000_000n,
        });
        return typeof r.reservedMicrousd === 'bigint' && r.reservedMicrousd > 0n && dearer.reservedMicrousd > r.reservedMicrousd;
      }),
    );
  });
});
