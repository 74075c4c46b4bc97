import { z } from 'zod';
import type { ContextTier, ContextTierRule, PerCallFee, PricedFeature, PriceRevision, RateSet, ServiceTierPrices } from '@gateway/domain';
import { CONTEXT_TIER_RULES } from '@gateway/domain';

/**
 * A price revision's wire shape: snake_case, as the policy API takes and shows it and as
 * `price_revision`'s JSONB columns store it (money as decimal strings there, so bigint
 * micro-USD round-trips exactly). The one translation between it and the domain `PriceRevision`;
 * what a structure may contain (tier order, names, fees) is `priceRevisionProblems`' to say.
 */

/** Each domain rate with its wire name. */
export const RATE_WIRE_NAMES = {
  inputPerMTokMicrousd: 'input_per_mtok_microusd',
  cachedInputPerMTokMicrousd: 'cached_input_per_mtok_microusd',
  outputPerMTokMicrousd: 'output_per_mtok_microusd',
  reasoningPerMTokMicrousd: 'reasoning_per_mtok_microusd',
  cacheWritePerMTokMicrousd: 'cache_write_per_mtok_microusd',
  audioInputPerMTokMicrousd: 'audio_input_per_mtok_microusd',
  audioOutputPerMTokMicrousd: 'audio_output_per_mtok_microusd',
  imageOutputPerMTokMicrousd: 'image_output_per_mtok_microusd',
} as const satisfies Record<keyof RateSet, string>;

type RateKey = keyof typeof RATE_WIRE_NAMES;
const RATE_KEYS = Object.keys(RATE_WIRE_NAMES) as RateKey[];

export const MAX_CONTEXT_TIERS = 16;
export const MAX_SERVICE_TIERS = 8;
export const MAX_PER_CALL_FEES = 16;

export type RatesWire<M> = {
  input_per_mtok_microusd: M;
  cached_input_per_mtok_microusd: M;
  output_per_mtok_microusd: M;
  reasoning_per_mtok_microusd: M;
  cache_write_per_mtok_microusd?: M;
  audio_input_per_mtok_microusd?: M;
  audio_output_per_mtok_microusd?: M;
  image_output_per_mtok_microusd?: M;
};
export type ContextTierWire<M> = { above_input_tokens: number; rates: RatesWire<M> };
export type PriceStructureWire<M> = {
  context_tier_rule?: ContextTierRule;
  context_tiers?: ContextTierWire<M>[];
  service_tiers?: Record<string, { rates: RatesWire<M>; context_tiers?: ContextTierWire<M>[] }>;
  per_call_fees?: Array<{ feature: string; fee_microusd: M; reserved_calls_per_request: number }>;
};

/**
 * The zod schemas of the wire shape, with `money` parsing each amount (the API accepts a JSON
 * integer or a string of digits; storage holds strings). Every object is strict and every list
 * bounded; the numbers inside are only checked to be integers, the domain checks the rest.
 */
export function priceWireSchemas<M extends z.ZodType<bigint>>(money: M) {
  const rateFields = {
    input_per_mtok_microusd: money,
    cached_input_per_mtok_microusd: money,
    output_per_mtok_microusd: money,
    reasoning_per_mtok_microusd: money,
    cache_write_per_mtok_microusd: money.optional(),
    audio_input_per_mtok_microusd: money.optional(),
    audio_output_per_mtok_microusd: money.optional(),
    image_output_per_mtok_microusd: money.optional(),
  };
  const rates = z.object(rateFields).strict();
  const contextTiers = z
    .array(z.object({ above_input_tokens: z.number().int(), rates }).strict())
    .max(MAX_CONTEXT_TIERS, `at most ${MAX_CONTEXT_TIERS} context tiers`);
  const serviceTiers = z
    .record(z.string().max(64), z.object({ rates, context_tiers: contextTiers.optional() }).strict())
    .refine((tiers) => Object.keys(tiers).length <= MAX_SERVICE_TIERS, `at most ${MAX_SERVICE_TIERS} service tiers`);
  const perCallFees = z
    .array(z.object({ feature: z.string().max(64), fee_microusd: money, reserved_calls_per_request: z.number().int() }).strict())
    .max(MAX_PER_CALL_FEES, `at most ${MAX_PER_CALL_FEES} per-call fees`);
  const contextTierRule = z.enum(CONTEXT_TIER_RULES);
  return {
    rateFields,
    contextTiers,
    serviceTiers,
    perCallFees,
    contextTierRule,
    /** the optional structure beside the base rates, as the API body and the view carry it */
    structureFields: {
      context_tier_rule: contextTierRule.optional(),
      context_tiers: contextTiers.optional(),
      service_tiers: serviceTiers.optional(),
      per_call_fees: perCallFees.optional(),
    },
  };
}

/** Non-negative integer micro-USD as a decimal string, kept a string (JSON messages that carry money). */
export const microusdText = z.string().regex(/^\d{1,19}$/, 'integer micro-USD as a decimal string');

/** Integer micro-USD as a decimal string, how stored JSON holds money. */
export const decimalMicrousd = microusdText.transform((s) => BigInt(s));

/** The stored JSON's schemas. */
export const storedPriceWire = priceWireSchemas(decimalMicrousd);

export function ratesFromWire(w: RatesWire<bigint>): RateSet {
  const out: Partial<Record<RateKey, bigint>> = {};
  for (const k of RATE_KEYS) {
    const v = w[RATE_WIRE_NAMES[k]];
    if (v !== undefined) out[k] = v;
  }
  return out as RateSet;
}

export function ratesToWire(r: RateSet): RatesWire<string> {
  const out: Partial<Record<string, string>> = {};
  for (const k of RATE_KEYS) {
    const v = r[k];
    if (v !== undefined) out[RATE_WIRE_NAMES[k]] = v.toString();
  }
  return out as RatesWire<string>;
}

export function contextTiersFromWire(w: readonly ContextTierWire<bigint>[] | undefined): ContextTier[] | undefined {
  if (!w || w.length === 0) return undefined;
  return w.map((t) => ({ aboveInputTokens: t.above_input_tokens, rates: ratesFromWire(t.rates) }));
}

export function contextTiersToWire(tiers: readonly ContextTier[] | undefined): ContextTierWire<string>[] | undefined {
  if (!tiers || tiers.length === 0) return undefined;
  return tiers.map((t) => ({ above_input_tokens: t.aboveInputTokens, rates: ratesToWire(t.rates) }));
}

export function serviceTiersFromWire(w: PriceStructureWire<bigint>['service_tiers']): Record<string, ServiceTierPrices> | undefined {
  const entries = Object.entries(w ?? {});
  if (entries.length === 0) return undefined;
  return Object.fromEntries(
    entries.map(([name, st]) => {
      const contextTiers = contextTiersFromWire(st.context_tiers);
      return [name, { rates: ratesFromWire(st.rates), ...(contextTiers ? { contextTiers } : {}) }];
    }),
  );
}

export function serviceTiersToWire(tiers: PriceRevision['serviceTiers']): PriceStructureWire<string>['service_tiers'] {
  const entries = Object.entries(tiers ?? {});
  if (entries.length === 0) return undefined;
  return Object.fromEntries(
    entries.map(([name, st]) => {
      const contextTiers = contextTiersToWire(st.contextTiers);
      return [name, { rates: ratesToWire(st.rates), ...(contextTiers ? { context_tiers: contextTiers } : {}) }];
    }),
  );
}

export function perCallFeesFromWire(w: PriceStructureWire<bigint>['per_call_fees']): PerCallFee[] | undefined {
  if (!w || w.length === 0) return undefined;
  // The feature name is checked by `priceRevisionProblems` (one message for every caller).
  return w.map((f) => ({
    feature: f.feature as PricedFeature,
    feeMicrousd: f.fee_microusd,
    reservedCallsPerRequest: f.reserved_calls_per_request,
  }));
}

export function perCallFeesToWire(fees: readonly PerCallFee[] | undefined): PriceStructureWire<string>['per_call_fees'] {
  if (!fees || fees.length === 0) return undefined;
  return fees.map((f) => ({
    feature: f.feature,
    fee_microusd: f.feeMicrousd.toString(),
    reserved_calls_per_request: f.reservedCallsPerRequest,
  }));
}

/**
 * A domain revision from its wire form (base rates at the top level beside the structure). Empty
 * lists and maps read as absent, so a revision has one form whichever way it was written.
 */
export function priceRevisionFromWire(id: string, w: RatesWire<bigint> & PriceStructureWire<bigint>): PriceRevision {
  const contextTiers = contextTiersFromWire(w.context_tiers);
  const serviceTiers = serviceTiersFromWire(w.service_tiers);
  const perCallFees = perCallFeesFromWire(w.per_call_fees);
  return {
    id,
    ...ratesFromWire(w),
    ...(w.context_tier_rule !== undefined ? { contextTierRule: w.context_tier_rule } : {}),
    ...(contextTiers ? { contextTiers } : {}),
    ...(serviceTiers ? { serviceTiers } : {}),
    ...(perCallFees ? { perCallFees } : {}),
  };
}

/** The wire form of a revision's prices (no id): what the policy API shows, money as strings. */
export function priceRevisionToWire(p: PriceRevision): RatesWire<string> & PriceStructureWire<string> {
  const contextTiers = contextTiersToWire(p.contextTiers);
  const serviceTiers = serviceTiersToWire(p.serviceTiers);
  const perCallFees = perCallFeesToWire(p.perCallFees);
  return {
    ...ratesToWire(p),
    ...(p.contextTierRule !== undefined ? { context_tier_rule: p.contextTierRule } : {}),
    ...(contextTiers ? { context_tiers: contextTiers } : {}),
    ...(serviceTiers ? { service_tiers: serviceTiers } : {}),
    ...(perCallFees ? { per_call_fees: perCallFees } : {}),
  };
}

const WIRE_FIELD_NAMES: Record<string, string> = {
  ...RATE_WIRE_NAMES,
  contextTierRule: 'context_tier_rule',
  contextTiers: 'context_tiers',
  aboveInputTokens: 'above_input_tokens',
  rates: 'rates',
  serviceTiers: 'service_tiers',
  perCallFees: 'per_call_fees',
  feature: 'feature',
  feeMicrousd: 'fee_microusd',
  reservedCallsPerRequest: 'reserved_calls_per_request',
};

/**
 * The wire path of a domain path (`priceRevisionProblems`' camelCase, dotted, `[i]` for list
 * items), e.g. `serviceTiers.flex.contextTiers[0].rates.inputPerMTokMicrousd` →
 * `['service_tiers', 'flex', 'context_tiers', 0, 'rates', 'input_per_mtok_microusd']`.
 * Service tier names are kept as they are.
 */
export function priceWirePath(domainPath: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const part of domainPath.split('.')) {
    const [name, ...indexes] = part.split('[');
    const previous = out.at(-1);
    out.push(previous === 'service_tiers' ? name : (WIRE_FIELD_NAMES[name] ?? name));
    for (const index of indexes) out.push(Number(index.replace(']', '')));
  }
  return out;
}
