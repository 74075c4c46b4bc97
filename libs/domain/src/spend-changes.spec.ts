import { contractSpendRaises, priceSpendRaises, WorkloadSpendLimits, workloadSpendRaises } from './spend-changes';

const limits: WorkloadSpendLimits = {
  defaultMaxCandidates: 1,
  perCandidateOutputCeiling: 256,
  budgetMicrousd: 1_000_000n,
  budgetPeriod: 'month',
  maxInFlight: 8,
  tokensPerMinute: 1000,
  fallbackChain: ['a'],
};

describe('workloadSpendRaises', () => {
  it.each<[string, Partial<WorkloadSpendLimits>, string[]]>([
    ['unchanged', {}, []],
    [
      'lower everything',
      {
        defaultMaxCandidates: 1,
        perCandidateOutputCeiling: 10,
        budgetMicrousd: 1n,
        maxInFlight: 1,
        tokensPerMinute: 10,
        fallbackChain: [],
      },
      [],
    ],
    ['default_max_candidates up', { defaultMaxCandidates: 128 }, ['default_max_candidates up']],
    ['ceiling up', { perCandidateOutputCeiling: 257 }, ['per_candidate_output_ceiling up']],
    ['budget up', { budgetMicrousd: 1_000_001n }, ['budget up']],
    ['period month → day', { budgetPeriod: 'day' }, ['budget period shortened']],
    ['in-flight up', { maxInFlight: 9 }, ['max_in_flight up']],
    ['tpm up', { tokensPerMinute: 1001 }, ['tokens_per_minute up']],
    ['tpm removed', { tokensPerMinute: null }, ['tokens_per_minute removed']],
    ['fallback added', { fallbackChain: ['a', 'b'] }, ['fallback chain additions']],
    ['fallback reordered only', { fallbackChain: ['a'] }, []],
  ])('%s', (_name, change, expected) => {
    expect(workloadSpendRaises(limits, { ...limits, ...change })).toEqual(expected);
  });

  it('a new workload needs approval', () => {
    expect(workloadSpendRaises(null, limits)).toEqual(['new workload']);
  });

  it('setting a tokens_per_minute limit where there was none is a lowering', () => {
    expect(workloadSpendRaises({ ...limits, tokensPerMinute: null }, limits)).toEqual([]);
  });
});

describe('priceSpendRaises', () => {
  const p = { inputPerMTokMicrousd: 10n, cachedInputPerMTokMicrousd: 5n, outputPerMTokMicrousd: 40n, reasoningPerMTokMicrousd: 40n };
  it('any lowered rate raises spend; raising rates does not', () => {
    expect(priceSpendRaises(p, { ...p, outputPerMTokMicrousd: 41n })).toEqual([]);
    expect(priceSpendRaises(p, { ...p, cachedInputPerMTokMicrousd: 4n })).toEqual(['cachedInputPerMTokMicrousd lowered']);
    expect(
      priceSpendRaises(p, {
        inputPerMTokMicrousd: 0n,
        cachedInputPerMTokMicrousd: 0n,
        outputPerMTokMicrousd: 0n,
        reasoningPerMTokMicrousd: 0n,
      }),
    ).toHaveLength(4);
    expect(priceSpendRaises(null, p)).toEqual(['first price of the route']);
    // only the rates count, whatever else the revision carries
    expect(priceSpendRaises(p, { ...p, id: 'a', routeId: 'r' } as typeof p)).toEqual([]);
  });
});

describe('contractSpendRaises', () => {
  const c = { providerKind: 'openai-chat', upstreamBaseUrl: 'https://api.openai.com', upstreamModel: 'gpt' };
  it('a new host, provider or model raises spend; other contract facts do not', () => {
    expect(contractSpendRaises(c, c)).toEqual([]);
    expect(contractSpendRaises(c, { ...c, upstreamBaseUrl: 'https://other.example' })).toEqual(['upstream_base_url changed']);
    expect(contractSpendRaises(c, { ...c, upstreamModel: 'gpt-2', providerKind: 'openai-compatible' })).toEqual([
      'provider_kind changed',
      'upstream_model changed',
    ]);
  });

  it('admitting a price-changing feature or lowering a per-media minimum raises spend; the reverse does not', () => {
    const priced = { ...c, pricedFeatures: ['service_tier'], imageInputTokens: 1600 };
    expect(contractSpendRaises(priced, { ...priced, pricedFeatures: ['service_tier', 'web_search_options'] })).toEqual([
      'priced feature web_search_options admitted',
    ]);
    expect(contractSpendRaises(priced, { ...priced, imageInputTokens: 800 })).toEqual(['imageInputTokens lowered']);
    expect(contractSpendRaises(priced, { ...priced, pricedFeatures: [], imageInputTokens: 3200 })).toEqual([]);
    expect(contractSpendRaises(priced, { ...c })).toEqual([]);
  });

  it('naming another upstream credential, adding or removing one raises spend; leaving it out keeps it', () => {
    const keyed = { ...c, credentialRef: 'OPENAI' };
    expect(contractSpendRaises(keyed, { ...keyed, credentialRef: 'OPENAI_BILLING' })).toEqual(['credential_ref changed']);
    expect(contractSpendRaises(c, { ...c, credentialRef: 'OPENAI' })).toEqual(['credential_ref changed']);
    expect(contractSpendRaises(keyed, { ...keyed, credentialRef: null })).toEqual(['credential_ref changed']);
    expect(contractSpendRaises(keyed, { ...c })).toEqual([]);
    expect(contractSpendRaises(keyed, keyed)).toEqual([]);
  });
});
