import { priceRevisionFromWire, priceRevisionToWire, priceWirePath, storedPriceWire } from './price-revision';

describe('price revision wire shape', () => {
  it.each([
    ['inputPerMTokMicrousd', ['input_per_mtok_microusd']],
    ['contextTiers[1].aboveInputTokens', ['context_tiers', 1, 'above_input_tokens']],
    [
      'serviceTiers.flex.contextTiers[0].rates.cacheWritePerMTokMicrousd',
      ['service_tiers', 'flex', 'context_tiers', 0, 'rates', 'cache_write_per_mtok_microusd'],
    ],
    // a tier named like a field keeps its name
    ['serviceTiers.rates.rates.outputPerMTokMicrousd', ['service_tiers', 'rates', 'rates', 'output_per_mtok_microusd']],
    ['perCallFees[2].reservedCallsPerRequest', ['per_call_fees', 2, 'reserved_calls_per_request']],
  ])('maps the domain path %s to its wire path', (path, wire) => {
    expect(priceWirePath(path)).toEqual(wire);
  });

  it('reads what it writes: wire → domain → wire through the stored schemas', () => {
    const rates = {
      input_per_mtok_microusd: '1',
      cached_input_per_mtok_microusd: '0',
      output_per_mtok_microusd: '9223372036854775807',
      reasoning_per_mtok_microusd: '2',
    };
    const wire = {
      ...rates,
      context_tier_rule: 'input_only' as const,
      context_tiers: [{ above_input_tokens: 128_000, rates }],
      service_tiers: { flex: { rates, context_tiers: [{ above_input_tokens: 5, rates }] } },
      per_call_fees: [{ feature: 'code_execution', fee_microusd: '30000', reserved_calls_per_request: 2 }],
    };
    const parsed = {
      ...storedPriceWire.contextTiers.element.shape.rates.parse(rates),
      context_tier_rule: wire.context_tier_rule,
      context_tiers: storedPriceWire.contextTiers.parse(wire.context_tiers),
      service_tiers: storedPriceWire.serviceTiers.parse(wire.service_tiers),
      per_call_fees: storedPriceWire.perCallFees.parse(wire.per_call_fees),
    };
    const price = priceRevisionFromWire('p', parsed);
    expect(price.outputPerMTokMicrousd).toBe(9_223_372_036_854_775_807n);
    expect(priceRevisionToWire(price)).toEqual(wire);
  });

  it('stored money is a decimal string: a JSON number is refused', () => {
    expect(() => storedPriceWire.perCallFees.parse([{ feature: 'web_search', fee_microusd: 10, reserved_calls_per_request: 1 }])).toThrow();
  });
});
