import fc from 'fast-check';
import {
  contractSpendRaises,
  HedgeSettings,
  hedgePolicySpendRaises,
  PriceRates,
  priceSpendRaises,
  WorkloadSpendLimits,
  workloadSpendRaises,
} from './spend-changes';

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

describe('priceSpendRaises on structured revisions', () => {
  const base = {
    inputPerMTokMicrousd: 1_250_000n,
    cachedInputPerMTokMicrousd: 125_000n,
    outputPerMTokMicrousd: 10_000_000n,
    reasoningPerMTokMicrousd: 10_000_000n,
  };
  const long = {
    inputPerMTokMicrousd: 2_500_000n,
    cachedInputPerMTokMicrousd: 250_000n,
    outputPerMTokMicrousd: 15_000_000n,
    reasoningPerMTokMicrousd: 15_000_000n,
  };
  const priority = {
    inputPerMTokMicrousd: 2_500_000n,
    cachedInputPerMTokMicrousd: 250_000n,
    outputPerMTokMicrousd: 20_000_000n,
    reasoningPerMTokMicrousd: 20_000_000n,
  };
  const inForce: PriceRates = {
    ...base,
    contextTiers: [{ aboveInputTokens: 200_000, rates: long }],
    serviceTiers: {
      priority: {
        rates: priority,
        contextTiers: [{ aboveInputTokens: 200_000, rates: { ...priority, inputPerMTokMicrousd: 5_000_000n } }],
      },
    },
    perCallFees: [{ feature: 'web_search', feeMicrousd: 10_000n, reservedCallsPerRequest: 5 }],
  };

  it.each<[string, PriceRates, string[]]>([
    ['the same revision', inForce, []],
    [
      'every rate raised',
      {
        ...inForce,
        outputPerMTokMicrousd: 11_000_000n,
        contextTiers: [{ aboveInputTokens: 200_000, rates: { ...long, inputPerMTokMicrousd: 3_000_000n } }],
      },
      [],
    ],
    [
      'a context tier rate lowered',
      { ...inForce, contextTiers: [{ aboveInputTokens: 200_000, rates: { ...long, outputPerMTokMicrousd: 14_000_000n } }] },
      ['context tier above 200000 input tokens: outputPerMTokMicrousd lowered'],
    ],
    ['a context tier removed', { ...inForce, contextTiers: undefined }, ['context tier above 200000 input tokens removed']],
    [
      'a context tier threshold raised',
      { ...inForce, contextTiers: [{ aboveInputTokens: 250_000, rates: long }] },
      ['context tier above 200000 input tokens: threshold raised to 250000'],
    ],
    ['a threshold lowered at the same rates', { ...inForce, contextTiers: [{ aboveInputTokens: 128_000, rates: long }] }, []],
    [
      'a threshold lowered with a cheaper rate',
      { ...inForce, contextTiers: [{ aboveInputTokens: 128_000, rates: { ...long, inputPerMTokMicrousd: 2_000_000n } }] },
      ['context tier above 200000 input tokens (now above 128000): inputPerMTokMicrousd lowered'],
    ],
    [
      'a new context tier cheaper than the tier below it',
      {
        ...inForce,
        contextTiers: [
          { aboveInputTokens: 200_000, rates: long },
          { aboveInputTokens: 500_000, rates: { ...long, cachedInputPerMTokMicrousd: 200_000n } },
        ],
      },
      ['context tier above 500000 input tokens: cachedInputPerMTokMicrousd lowered'],
    ],
    [
      'a new, dearer context tier',
      {
        ...inForce,
        contextTiers: [
          { aboveInputTokens: 200_000, rates: long },
          { aboveInputTokens: 500_000, rates: { ...long, inputPerMTokMicrousd: 4_000_000n } },
        ],
      },
      [],
    ],
    [
      'a service tier rate lowered',
      {
        ...inForce,
        serviceTiers: { priority: { ...inForce.serviceTiers!.priority, rates: { ...priority, reasoningPerMTokMicrousd: 1n } } },
      },
      ['service tier priority: reasoningPerMTokMicrousd lowered'],
    ],
    [
      'a service tier context tier removed',
      { ...inForce, serviceTiers: { priority: { rates: priority } } },
      ['service tier priority: context tier above 200000 input tokens removed'],
    ],
    ['a service tier removed', { ...inForce, serviceTiers: undefined }, ['service tier priority removed']],
    [
      'a service tier added',
      { ...inForce, serviceTiers: { ...inForce.serviceTiers, flex: { rates: base } } },
      ['service tier flex added (admits service_tier flex)'],
    ],
    [
      'a fee lowered',
      { ...inForce, perCallFees: [{ feature: 'web_search', feeMicrousd: 9_999n, reservedCallsPerRequest: 5 }] },
      ['per-call fee web_search lowered'],
    ],
    [
      'a fee reserving fewer calls',
      { ...inForce, perCallFees: [{ feature: 'web_search', feeMicrousd: 10_000n, reservedCallsPerRequest: 4 }] },
      ['per-call fee web_search: reserved calls per request lowered'],
    ],
    ['a fee removed', { ...inForce, perCallFees: undefined }, ['per-call fee web_search removed']],
    [
      'a fee added',
      {
        ...inForce,
        perCallFees: [...inForce.perCallFees!, { feature: 'code_execution', feeMicrousd: 30_000n, reservedCallsPerRequest: 1 }],
      },
      ['per-call fee code_execution added (admits code_execution)'],
    ],
    [
      'audio output priced',
      { ...inForce, audioOutputPerMTokMicrousd: 80_000_000n },
      ['audioOutputPerMTokMicrousd added (admits audio_output)'],
    ],
    [
      'image output priced',
      { ...inForce, imageOutputPerMTokMicrousd: 30_000_000n },
      ['imageOutputPerMTokMicrousd added (admits image_output)'],
    ],
    [
      'a cache-write rate below the input rate it replaces',
      { ...inForce, cacheWritePerMTokMicrousd: 1_000_000n },
      ['cacheWritePerMTokMicrousd lowered'],
    ],
    ['a cache-write rate above the input rate', { ...inForce, cacheWritePerMTokMicrousd: 1_562_500n }, []],
    [
      'context tiers switched to input_only',
      { ...inForce, contextTierRule: 'input_only' },
      ['context_tier_rule changed to input_only (output no longer billed at the tier)'],
    ],
    ['context tiers switched to whole_request', inForce, []],
  ])('%s', (_name, proposed, raises) => {
    expect(priceSpendRaises(inForce, proposed)).toEqual(raises);
  });

  it('a dropped cache-write rate bills those tokens at the input rate: lower than before is a raise', () => {
    const withCacheWrite = { ...inForce, cacheWritePerMTokMicrousd: 1_562_500n };
    expect(priceSpendRaises(withCacheWrite, inForce)).toEqual(['cacheWritePerMTokMicrousd lowered']);
  });

  it('leaving input_only for whole_request does not', () => {
    expect(priceSpendRaises({ ...inForce, contextTierRule: 'input_only' }, inForce)).toEqual([]);
  });
});

describe('hedgePolicySpendRaises', () => {
  const hedge: HedgeSettings = {
    enabled: true,
    delay: { kind: 'quantile', quantilePerMille: 950, floorMs: 200, ceilingMs: 2_000, minSamples: 20 },
    maxHedges: 1,
    retry: { transient: ['connection_error'], maxRetries: 1 },
    allowance: { maxAttempts: 3, maxExtraSpendMicrousd: 10_000n },
    stop: { spendFloorMicrousd: 1_000n, maxRouteErrorPerMille: 100, maxRouteInFlight: 50, minUsefulRemainingMs: 500 },
    bucket: { maxMilliTokens: 10_000, successRefillMilliTokens: 100 },
    approvedPremiumMicrousd: 2_000n,
    experimentAllowance: { budgetMicrousd: 5_000_000n, period: 'month' },
    readOnlyTools: ['lookup'],
  };
  const q = hedge.delay as Extract<HedgeSettings['delay'], { kind: 'quantile' }>;

  it('a first policy raises spend only when it allows an extra attempt', () => {
    expect(hedgePolicySpendRaises(null, hedge)).toEqual(['first hedge policy allowing extra attempts']);
    const off = {
      ...hedge,
      enabled: false,
      retry: { transient: [], maxRetries: 0 },
      allowance: { maxAttempts: 1, maxExtraSpendMicrousd: 0n },
    };
    expect(hedgePolicySpendRaises(null, off)).toEqual([]);
    expect(hedgePolicySpendRaises(null, { ...off, allowance: { maxAttempts: 2, maxExtraSpendMicrousd: 0n } })).not.toEqual([]);
  });

  it.each<[string, Partial<HedgeSettings>, string]>([
    ['enabling', {}, 'hedging enabled'],
    ['more attempts', { allowance: { maxAttempts: 4, maxExtraSpendMicrousd: 10_000n } }, 'max_attempts up'],
    ['more retries', { retry: { transient: ['connection_error'], maxRetries: 2 } }, 'max_retries up'],
    ['more extra spend', { allowance: { maxAttempts: 3, maxExtraSpendMicrousd: 10_001n } }, 'max_extra_spend_microusd up'],
    ['a larger premium', { approvedPremiumMicrousd: 2_001n }, 'approved_premium_microusd up'],
    ['a larger experiment budget', { experimentAllowance: { budgetMicrousd: 5_000_001n, period: 'month' } }, 'experiment budget up'],
    [
      'a daily experiment budget',
      { experimentAllowance: { budgetMicrousd: 5_000_000n, period: 'day' } },
      'experiment budget period shortened',
    ],
    ['a lower floor', { delay: { ...q, floorMs: 100 } }, 'shortest hedge delay lowered'],
    ['a lower ceiling', { delay: { ...q, ceilingMs: 1_000 } }, 'longest hedge delay lowered'],
    ['a lower quantile', { delay: { ...q, quantilePerMille: 900 } }, 'delay quantile lowered'],
    ['fewer samples', { delay: { ...q, minSamples: 10 } }, 'delay min_samples lowered'],
    ['a fixed delay below the floor', { delay: { kind: 'fixed', ms: 100 } }, 'shortest hedge delay lowered'],
    ['a lower spend floor', { stop: { ...hedge.stop, spendFloorMicrousd: 999n } }, 'spend_floor_microusd lowered'],
    ['a higher error ceiling', { stop: { ...hedge.stop, maxRouteErrorPerMille: 101 } }, 'max_route_error_per_mille up'],
    ['a higher in-flight ceiling', { stop: { ...hedge.stop, maxRouteInFlight: 51 } }, 'max_route_in_flight up'],
    ['a larger bucket', { bucket: { maxMilliTokens: 10_001, successRefillMilliTokens: 100 } }, 'bucket max_milli_tokens up'],
    ['a larger refill', { bucket: { maxMilliTokens: 10_000, successRefillMilliTokens: 101 } }, 'bucket success_refill_milli_tokens up'],
    [
      'a new transient class',
      { retry: { transient: ['connection_error', 'server_error'], maxRetries: 1 } },
      'transient failure server_error added',
    ],
    ['a new read-only tool', { readOnlyTools: ['lookup', 'search'] }, 'read-only tool search added'],
  ])('%s raises spend', (_name, change, raise) => {
    const current = { ...hedge, enabled: false };
    expect(hedgePolicySpendRaises(current, { ...current, ...change, ...(raise === 'hedging enabled' ? { enabled: true } : {}) })).toContain(
      raise,
    );
  });

  it('an experiment allowance where there was none raises; dropping it does not', () => {
    expect(hedgePolicySpendRaises({ ...hedge, experimentAllowance: null }, hedge)).toEqual(['experiment allowance added']);
    expect(hedgePolicySpendRaises(hedge, { ...hedge, experimentAllowance: null })).toEqual([]);
  });

  it('a change that only lowers applies at once', () => {
    const lower: HedgeSettings = {
      ...hedge,
      enabled: false,
      maxHedges: 0,
      delay: { ...q, floorMs: 300, ceilingMs: 3_000, quantilePerMille: 990, minSamples: 50 },
      retry: { transient: [], maxRetries: 0 },
      allowance: { maxAttempts: 1, maxExtraSpendMicrousd: 0n },
      stop: { spendFloorMicrousd: 2_000n, maxRouteErrorPerMille: 50, maxRouteInFlight: 10, minUsefulRemainingMs: 1_000 },
      bucket: { maxMilliTokens: 5_000, successRefillMilliTokens: 50 },
      approvedPremiumMicrousd: 0n,
      experimentAllowance: { budgetMicrousd: 1n, period: 'month' },
      readOnlyTools: [],
    };
    expect(hedgePolicySpendRaises(hedge, lower)).toEqual([]);
  });

  it('no change is never a raise, and a raise one way is not one the other way round', () => {
    const settings = fc.record({
      maxAttempts: fc.integer({ min: 1, max: 10 }),
      extra: fc.bigInt({ min: 0n, max: 100n }),
      floor: fc.integer({ min: 0, max: 100 }),
    });
    fc.assert(
      fc.property(settings, settings, (a, b) => {
        const mk = (s: typeof a): HedgeSettings => ({
          ...hedge,
          allowance: { maxAttempts: s.maxAttempts, maxExtraSpendMicrousd: s.extra },
          delay: { kind: 'fixed', ms: s.floor },
          retry: { transient: [], maxRetries: 0 },
        });
        expect(hedgePolicySpendRaises(mk(a), mk(a))).toEqual([]);
        const there = hedgePolicySpendRaises(mk(a), mk(b));
        const back = hedgePolicySpendRaises(mk(b), mk(a));
        for (const r of there) expect(back).not.toContain(r);
      }),
    );
  });
});
