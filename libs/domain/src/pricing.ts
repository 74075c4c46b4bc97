/**
 * Turning token usage into money. All amounts are integer micro-USD (`bigint`); prices
 * are quoted per 1,000,000 tokens, so one token at $1/MTok is exactly 1 micro-USD.
 *
 * A price revision is the route's price list as the provider publishes it: base rates per billing
 * category, context-length tiers (above an input-token threshold a request costs more), rate sets
 * per service tier (priority, flex), per-call fees for billed tools, and modality rates (audio in
 * and out, image out). Settlement prices usage at the tier the request actually reached
 * (`priceUsage`); admission reserves at the worst tier the request can reach (`estimateCostMicrousd`).
 * This module is the one home of both rules, so the reservation provably covers the settlement.
 */
import { FEE_PRICED_FEATURES, FeatureUse, PRICED_FEATURES, PricedFeature } from './priced-features';
import { assertNonNegativeInteger, assertNonNegativeMicrousd } from './validation';

export const TOKENS_PER_PRICE_UNIT = 1_000_000n;

/** One set of per-million-token rates, in micro-USD. Optional categories absent: billed at the text rate. */
export type RateSet = {
  inputPerMTokMicrousd: bigint;
  cachedInputPerMTokMicrousd: bigint;
  outputPerMTokMicrousd: bigint;
  reasoningPerMTokMicrousd: bigint;
  /** prompt tokens written to the provider's cache; absent: billed as input */
  cacheWritePerMTokMicrousd?: bigint;
  /** absent: audio input billed at the input rate */
  audioInputPerMTokMicrousd?: bigint;
  /** absent: audio output is not priced (`audio_output` is refused) */
  audioOutputPerMTokMicrousd?: bigint;
  /** absent: image output is not priced (`image_output` is refused) */
  imageOutputPerMTokMicrousd?: bigint;
};

/** The rate categories a `RateSet` may leave out, in one list for validation and views. */
export const OPTIONAL_RATES = [
  'cacheWritePerMTokMicrousd',
  'audioInputPerMTokMicrousd',
  'audioOutputPerMTokMicrousd',
  'imageOutputPerMTokMicrousd',
] as const satisfies ReadonlyArray<keyof RateSet>;
const REQUIRED_RATES = [
  'inputPerMTokMicrousd',
  'cachedInputPerMTokMicrousd',
  'outputPerMTokMicrousd',
  'reasoningPerMTokMicrousd',
] as const satisfies ReadonlyArray<keyof RateSet>;

/** Above `aboveInputTokens` prompt tokens (cached included) the request is billed at `rates`. */
export type ContextTier = { aboveInputTokens: number; rates: RateSet };

/**
 * Which tokens a context tier's rates apply to, as the provider defines it:
 * - `whole_request`: every token of the request, output included (Gemini 2.5 Pro above 200k,
 *   OpenAI's long-context sessions, Anthropic's 1M-context beta);
 * - `input_only`: the input categories; output stays at the tier set's base rates.
 */
export type ContextTierRule = 'whole_request' | 'input_only';
export const CONTEXT_TIER_RULES = ['whole_request', 'input_only'] as const satisfies readonly ContextTierRule[];

/** A service tier's own rates and context tiers (OpenAI `service_tier: priority | flex`). */
export type ServiceTierPrices = { rates: RateSet; contextTiers?: readonly ContextTier[] };

/** A fee per call of a billed tool or feature; the reservation holds `reservedCallsPerRequest` calls. */
export type PerCallFee = { feature: PricedFeature; feeMicrousd: bigint; reservedCallsPerRequest: number };

/** The most calls one reservation may hold per feature. */
export const MAX_RESERVED_CALLS_PER_REQUEST = 1_000;

/** Service tier names the request and the provider use for the base rates. */
export const DEFAULT_SERVICE_TIER = 'default';
/** "Let the provider choose" (OpenAI): may land on any tier, so it reserves at the dearest. */
export const AUTO_SERVICE_TIER = 'auto';
export const SERVICE_TIER_NAME = /^[a-z][a-z0-9_]{0,31}$/;

/** One immutable revision of a route's price list. The base rates are the default service tier's. */
export type PriceRevision = RateSet & {
  id: string;
  /** default `whole_request` */
  contextTierRule?: ContextTierRule;
  contextTiers?: readonly ContextTier[];
  /** by tier name (not `default` or `auto`) */
  serviceTiers?: Readonly<Record<string, ServiceTierPrices>>;
  perCallFees?: readonly PerCallFee[];
};

export type Usage = {
  /** All prompt tokens, cached ones included. */
  inputTokens: number;
  /** Subset of `inputTokens` served from the provider's prompt cache. */
  cachedInputTokens: number;
  /** Aggregate over all candidates; includes reasoning when `outputIncludesReasoning`. */
  outputTokens: number;
  reasoningTokens: number;
  /** OpenAI counts reasoning inside completion_tokens; Gemini reports thoughts separately. */
  outputIncludesReasoning: boolean;
  /** Subset of `inputTokens` written to the prompt cache. */
  cacheWriteInputTokens?: number;
  /** Subset of `inputTokens`. */
  audioInputTokens?: number;
  /** Subset of `outputTokens`. */
  audioOutputTokens?: number;
  /** Subset of `outputTokens`. */
  imageOutputTokens?: number;
  /** The tier billed (provider-reported, else requested); absent or `default`: the base rates. */
  serviceTier?: string | null;
  /** Calls of per-call-billed features the provider reported. */
  featureCalls?: Partial<Record<PricedFeature, number>>;
};

/** Output tokens that are not reasoning, whichever way the provider counts (`outputIncludesReasoning`). */
export function nonReasoningOutputTokens(u: Pick<Usage, 'outputTokens' | 'reasoningTokens' | 'outputIncludesReasoning'>): number {
  return u.outputIncludesReasoning ? u.outputTokens - u.reasoningTokens : u.outputTokens;
}

/** Output tokens with reasoning included, as DESIGN §8's `output_tokens_total` and a usage import count them. */
export function outputTokensWithReasoning(u: Pick<Usage, 'outputTokens' | 'reasoningTokens' | 'outputIncludesReasoning'>): number {
  return u.outputIncludesReasoning ? u.outputTokens : u.outputTokens + u.reasoningTokens;
}

export type FeeLine = { feature: PricedFeature; calls: number; microusd: bigint };

export type UsageCost = {
  input: bigint;
  cachedInput: bigint;
  output: bigint;
  reasoning: bigint;
  cacheWrite: bigint;
  audioInput: bigint;
  audioOutput: bigint;
  imageOutput: bigint;
  /** the sum of `feeLines` */
  fees: bigint;
  total: bigint;
  feeLines: FeeLine[];
  /** the context tier's threshold the usage crossed, or null for the base rates */
  contextTier: number | null;
  /** the service tier whose rates priced the usage */
  serviceTier: string;
  /**
   * What the usage reported that the revision does not price: a feature's calls (billed at 0 here)
   * or a service tier (billed at the dearest priced tier). Settlement opens a case for either.
   */
  unpriced: string[];
};

/**
 * ceil(tokens × perMTok / 1e6). Rounding up keeps reservations and settlements from ever
 * understating what the provider will bill; the error is below 1 micro-USD per category.
 */
export function costOfTokensMicrousd(tokens: number, perMTokMicrousd: bigint): bigint {
  assertNonNegativeInteger(tokens, 'tokens');
  assertNonNegativeMicrousd(perMTokMicrousd, 'perMTokMicrousd');
  const numerator = BigInt(tokens) * perMTokMicrousd;
  return (numerator + TOKENS_PER_PRICE_UNIT - 1n) / TOKENS_PER_PRICE_UNIT;
}

export type PriceProblem = { path: string; message: string };

/**
 * Everything wrong with a price revision, each with the path of the field (camelCase, dotted):
 * negative rates, context tiers out of order or overlapping, a tier that leaves out a category its
 * base prices, service tier names, fees. Empty when the revision is usable.
 */
export function priceRevisionProblems(price: PriceRevision): PriceProblem[] {
  const problems: PriceProblem[] = [];
  const rateSet = (rates: RateSet, at: string, base: RateSet | null) => {
    for (const k of REQUIRED_RATES) {
      const v = rates[k];
      if (typeof v !== 'bigint' || v < 0n)
        problems.push({ path: `${at}${k}`, message: 'must be a non-negative integer (micro-USD per MTok)' });
    }
    for (const k of OPTIONAL_RATES) {
      const v = rates[k];
      if (v !== undefined && (typeof v !== 'bigint' || v < 0n)) {
        problems.push({ path: `${at}${k}`, message: 'must be a non-negative integer (micro-USD per MTok)' });
      }
      if (base && (v === undefined) !== (base[k] === undefined)) {
        problems.push({ path: `${at}${k}`, message: `a tier must price exactly the categories its base prices (${k} differs)` });
      }
    }
  };
  const tiers = (list: readonly ContextTier[] | undefined, at: string, base: RateSet) => {
    let previous = 0;
    (list ?? []).forEach((tier, i) => {
      const t = tier.aboveInputTokens;
      if (!Number.isSafeInteger(t) || t < 1) {
        problems.push({ path: `${at}[${i}].aboveInputTokens`, message: 'must be a positive integer (input tokens)' });
      } else if (t === previous) {
        problems.push({ path: `${at}[${i}].aboveInputTokens`, message: `overlaps the tier before it (both above ${t} input tokens)` });
      } else if (t < previous) {
        problems.push({
          path: `${at}[${i}].aboveInputTokens`,
          message: `tiers must be in ascending order of threshold (${t} after ${previous})`,
        });
      }
      if (Number.isSafeInteger(t)) previous = Math.max(previous, t);
      rateSet(tier.rates, `${at}[${i}].rates.`, base);
    });
  };
  rateSet(price, '', null);
  if (price.contextTierRule !== undefined && !CONTEXT_TIER_RULES.includes(price.contextTierRule)) {
    problems.push({ path: 'contextTierRule', message: `must be one of ${CONTEXT_TIER_RULES.join(', ')}` });
  }
  tiers(price.contextTiers, 'contextTiers', price);
  for (const [name, st] of Object.entries(price.serviceTiers ?? {})) {
    if (!SERVICE_TIER_NAME.test(name) || name === DEFAULT_SERVICE_TIER || name === AUTO_SERVICE_TIER) {
      problems.push({
        path: `serviceTiers.${name}`,
        message: `a service tier is named like "priority" or "flex" (not "default" or "auto")`,
      });
    }
    rateSet(st.rates, `serviceTiers.${name}.rates.`, price);
    tiers(st.contextTiers, `serviceTiers.${name}.contextTiers`, st.rates);
  }
  const seen = new Set<string>();
  (price.perCallFees ?? []).forEach((fee, i) => {
    const at = `perCallFees[${i}]`;
    if (!(FEE_PRICED_FEATURES as readonly string[]).includes(fee.feature)) {
      problems.push({ path: `${at}.feature`, message: `must be one of ${FEE_PRICED_FEATURES.join(', ')}` });
    } else if (seen.has(fee.feature)) {
      problems.push({ path: `${at}.feature`, message: `${fee.feature} is priced twice` });
    }
    seen.add(fee.feature);
    if (typeof fee.feeMicrousd !== 'bigint' || fee.feeMicrousd < 0n) {
      problems.push({ path: `${at}.feeMicrousd`, message: 'must be a non-negative integer (micro-USD per call)' });
    }
    const calls = fee.reservedCallsPerRequest;
    if (!Number.isSafeInteger(calls) || calls < 1 || calls > MAX_RESERVED_CALLS_PER_REQUEST) {
      problems.push({ path: `${at}.reservedCallsPerRequest`, message: `must be an integer from 1 to ${MAX_RESERVED_CALLS_PER_REQUEST}` });
    }
  });
  return problems;
}

export function assertPriceRevision(price: PriceRevision): void {
  const [first] = priceRevisionProblems(price);
  if (first) throw new RangeError(`price revision ${price.id}: ${first.path} ${first.message}`);
}

export function assertUsage(usage: Usage): void {
  assertNonNegativeInteger(usage.inputTokens, 'inputTokens');
  assertNonNegativeInteger(usage.cachedInputTokens, 'cachedInputTokens');
  assertNonNegativeInteger(usage.outputTokens, 'outputTokens');
  assertNonNegativeInteger(usage.reasoningTokens, 'reasoningTokens');
  for (const k of ['cacheWriteInputTokens', 'audioInputTokens', 'audioOutputTokens', 'imageOutputTokens'] as const) {
    assertNonNegativeInteger(usage[k] ?? 0, k);
  }
  for (const [feature, calls] of Object.entries(usage.featureCalls ?? {})) assertNonNegativeInteger(calls ?? 0, `featureCalls.${feature}`);
  if (usage.cachedInputTokens > usage.inputTokens) {
    throw new RangeError(`cachedInputTokens (${usage.cachedInputTokens}) cannot exceed inputTokens (${usage.inputTokens})`);
  }
  const special = (usage.cacheWriteInputTokens ?? 0) + (usage.audioInputTokens ?? 0);
  if (special > usage.inputTokens) {
    throw new RangeError(`cacheWriteInputTokens + audioInputTokens (${special}) cannot exceed inputTokens (${usage.inputTokens})`);
  }
  if (usage.outputIncludesReasoning && usage.reasoningTokens > usage.outputTokens) {
    throw new RangeError(
      `reasoningTokens (${usage.reasoningTokens}) cannot exceed outputTokens (${usage.outputTokens}) ` + 'when output includes reasoning',
    );
  }
  const media = (usage.audioOutputTokens ?? 0) + (usage.imageOutputTokens ?? 0);
  const textAndMedia = nonReasoningOutputTokens(usage);
  if (media > textAndMedia) {
    throw new RangeError(`audio and image output tokens (${media}) cannot exceed the non-reasoning output tokens (${textAndMedia})`);
  }
}

/** The rates for a request of `inputTokens` prompt tokens on one service tier's prices. */
type Reached = { inputSide: RateSet; outputSide: RateSet; contextTier: number | null };

function reachedTier(
  rates: RateSet,
  contextTiers: readonly ContextTier[] | undefined,
  rule: ContextTierRule,
  inputTokens: number,
): Reached {
  let reached: ContextTier | null = null;
  for (const tier of contextTiers ?? []) if (inputTokens > tier.aboveInputTokens) reached = tier;
  if (!reached) return { inputSide: rates, outputSide: rates, contextTier: null };
  return { inputSide: reached.rates, outputSide: rule === 'whole_request' ? reached.rates : rates, contextTier: reached.aboveInputTokens };
}

/** Every context tier a request with at most `inputTokens` prompt tokens can reach (the base included). */
function reachableTiers(
  rates: RateSet,
  contextTiers: readonly ContextTier[] | undefined,
  rule: ContextTierRule,
  inputTokens: number,
): Reached[] {
  const out = [reachedTier(rates, undefined, rule, 0)];
  for (const tier of contextTiers ?? []) {
    if (inputTokens > tier.aboveInputTokens) out.push(reachedTier(rates, [tier], rule, tier.aboveInputTokens + 1));
  }
  return out;
}

function serviceTierPrices(price: PriceRevision, name: string): ServiceTierPrices {
  if (name === DEFAULT_SERVICE_TIER) return { rates: price, contextTiers: price.contextTiers };
  const st = price.serviceTiers?.[name];
  if (!st) throw new RangeError(`service tier ${name} is not priced by price revision ${price.id}`);
  return st;
}

/** The service tiers a request asking for `tier` may be billed at. */
function serviceTiersFor(price: PriceRevision, tier: string | null | undefined): string[] {
  if (tier === undefined || tier === null || tier === DEFAULT_SERVICE_TIER) return [DEFAULT_SERVICE_TIER];
  if (tier !== AUTO_SERVICE_TIER && price.serviceTiers && Object.hasOwn(price.serviceTiers, tier)) return [tier];
  return [DEFAULT_SERVICE_TIER, ...Object.keys(price.serviceTiers ?? {})];
}

/** Whether `tier` (as a request names it) is priced by the revision: default, auto, or a priced tier. */
export function isServiceTierPriced(price: PriceRevision, tier: string | null | undefined): boolean {
  if (tier === undefined || tier === null || tier === DEFAULT_SERVICE_TIER) return true;
  if (tier === AUTO_SERVICE_TIER) return true;
  return price.serviceTiers !== undefined && Object.hasOwn(price.serviceTiers, tier);
}

/** The features the revision prices: rate-priced ones when their rates exist, and every per-call fee. */
export function pricedFeaturesOf(price: PriceRevision): PricedFeature[] {
  const out: PricedFeature[] = [];
  if (Object.keys(price.serviceTiers ?? {}).length > 0) out.push('service_tier');
  if (price.audioOutputPerMTokMicrousd !== undefined) out.push('audio_output');
  if (price.imageOutputPerMTokMicrousd !== undefined) out.push('image_output');
  for (const fee of price.perCallFees ?? []) out.push(fee.feature);
  return out;
}

/**
 * The first feature a request uses that the revision in force does not price, or null: a
 * rate-priced feature needs its rates, a per-call feature its fee, and `service_tier` needs the
 * very tier the request names (admission's rule, docs/decisions.md "Priced by the contract and
 * by the price").
 */
export function featureUnpricedBy(used: readonly FeatureUse[], shape: PricedShape, price: PriceRevision): FeatureUse | null {
  const priced = pricedFeaturesOf(price);
  return (
    used.find((u) => !priced.includes(u.feature) || (u.feature === 'service_tier' && !isServiceTierPriced(price, shape.serviceTier))) ??
    null
  );
}

/**
 * Token counts per billing category. A category whose rate the revision leaves out is billed at the
 * text rate, so its tokens stay in the text bucket (one rounding, as the provider bills it).
 */
function categoryTokens(usage: Usage, i: RateSet, o: RateSet) {
  const cacheWrite = i.cacheWritePerMTokMicrousd !== undefined ? (usage.cacheWriteInputTokens ?? 0) : 0;
  const audioInput = i.audioInputPerMTokMicrousd !== undefined ? (usage.audioInputTokens ?? 0) : 0;
  // Audio and cache-write tokens are the dearer kinds; a cached count that overlaps them is billed
  // as those kinds (never twice, never cheaper than reported).
  const cached = Math.min(usage.cachedInputTokens, usage.inputTokens - cacheWrite - audioInput);
  const audioOutput = o.audioOutputPerMTokMicrousd !== undefined ? (usage.audioOutputTokens ?? 0) : 0;
  const imageOutput = o.imageOutputPerMTokMicrousd !== undefined ? (usage.imageOutputTokens ?? 0) : 0;
  const nonReasoning = nonReasoningOutputTokens(usage);
  return {
    input: usage.inputTokens - cached - cacheWrite - audioInput,
    cached,
    cacheWrite,
    audioInput,
    output: nonReasoning - audioOutput - imageOutput,
    audioOutput,
    imageOutput,
  };
}

function priceAt(usage: Usage, reached: Reached, serviceTier: string, price: PriceRevision): UsageCost {
  const i = reached.inputSide;
  const o = reached.outputSide;
  const t = categoryTokens(usage, i, o);
  const input = costOfTokensMicrousd(t.input, i.inputPerMTokMicrousd);
  const cachedInput = costOfTokensMicrousd(t.cached, i.cachedInputPerMTokMicrousd);
  const cacheWrite = costOfTokensMicrousd(t.cacheWrite, i.cacheWritePerMTokMicrousd ?? 0n);
  const audioInput = costOfTokensMicrousd(t.audioInput, i.audioInputPerMTokMicrousd ?? 0n);
  const output = costOfTokensMicrousd(t.output, o.outputPerMTokMicrousd);
  const reasoning = costOfTokensMicrousd(usage.reasoningTokens, o.reasoningPerMTokMicrousd);
  const audioOutput = costOfTokensMicrousd(t.audioOutput, o.audioOutputPerMTokMicrousd ?? 0n);
  const imageOutput = costOfTokensMicrousd(t.imageOutput, o.imageOutputPerMTokMicrousd ?? 0n);

  const unpriced: string[] = [];
  const feeLines: FeeLine[] = [];
  for (const feature of PRICED_FEATURES) {
    const calls = usage.featureCalls?.[feature] ?? 0;
    if (calls === 0) continue;
    const fee = price.perCallFees?.find((f) => f.feature === feature);
    if (!fee) unpriced.push(`feature:${feature}`);
    feeLines.push({ feature, calls, microusd: fee ? fee.feeMicrousd * BigInt(calls) : 0n });
  }
  const fees = feeLines.reduce((sum, l) => sum + l.microusd, 0n);
  const total = input + cachedInput + cacheWrite + audioInput + output + reasoning + audioOutput + imageOutput + fees;
  return {
    input,
    cachedInput,
    output,
    reasoning,
    cacheWrite,
    audioInput,
    audioOutput,
    imageOutput,
    fees,
    total,
    feeLines,
    contextTier: reached.contextTier,
    serviceTier,
    unpriced,
  };
}

/**
 * Prices usage at the tier it actually reached: the service tier billed (a tier the revision does
 * not price, or `auto` unresolved, is billed at the dearest priced tier and listed in `unpriced`
 * when unknown), the context tier its prompt crossed, and each category at its own rate, rounded up
 * on its own. Categories are disjoint, so no token is priced twice: cached, cache-write and audio
 * tokens leave the input bucket; included reasoning, audio and image tokens leave the output bucket.
 */
export function priceUsage(usage: Usage, price: PriceRevision): UsageCost {
  assertUsage(usage);
  assertPriceRevision(price);
  const rule = price.contextTierRule ?? 'whole_request';
  const tier = usage.serviceTier;
  const unknownTier = tier !== undefined && tier !== null && !isServiceTierPriced(price, tier);
  let best: UsageCost | null = null;
  for (const name of serviceTiersFor(price, tier)) {
    const st = serviceTierPrices(price, name);
    const cost = priceAt(usage, reachedTier(st.rates, st.contextTiers, rule, usage.inputTokens), name, price);
    if (!best || cost.total > best.total) best = cost;
  }
  const cost = best as UsageCost;
  return unknownTier ? { ...cost, unpriced: [`service_tier:${tier}`, ...cost.unpriced] } : cost;
}

/** What a request asks for that changes its worst-case price (from the request body). */
export type PricedShape = {
  /** the requested service tier; absent or `default` for the base rates */
  serviceTier?: string | null;
  /** the prompt carries audio */
  audioInput?: boolean;
  /** the request asks for audio output */
  audioOutput?: boolean;
  /** the request asks for image output */
  imageOutput?: boolean;
  /** per-call-billed features the request enables */
  features?: readonly PricedFeature[];
};

const maxOf = (...xs: bigint[]): bigint => xs.reduce((a, b) => (b > a ? b : a));

/**
 * The worst cost of a request of at most `inputTokens` prompt tokens and `outputTokens` output
 * tokens: every reachable service tier (a named one, or all for `auto`) and every context tier the
 * estimate can cross; any input token may be billed at the dearest input-side rate the shape allows
 * and any output token at the dearest output-side rate; each enabled per-call feature at its
 * reserved calls. Settlement rounds each category up on its own, so one micro-USD per extra
 * category a side may be split into is added: the result is never below `priceUsage` of a usage
 * within these counts and this shape (property-tested in pricing.spec.ts).
 */
export function estimateCostMicrousd(inputTokens: number, outputTokens: number, price: PriceRevision, shape: PricedShape = {}): bigint {
  assertNonNegativeInteger(inputTokens, 'inputTokens');
  assertNonNegativeInteger(outputTokens, 'outputTokens');
  assertPriceRevision(price);
  const rule = price.contextTierRule ?? 'whole_request';
  const defined = (...rates: Array<bigint | undefined>) => rates.filter((r): r is bigint => r !== undefined);
  const inputRates = (r: RateSet) =>
    defined(
      r.inputPerMTokMicrousd,
      r.cachedInputPerMTokMicrousd,
      r.cacheWritePerMTokMicrousd,
      shape.audioInput ? r.audioInputPerMTokMicrousd : undefined,
    );
  const outputRates = (r: RateSet) =>
    defined(
      r.outputPerMTokMicrousd,
      r.reasoningPerMTokMicrousd,
      shape.audioOutput ? r.audioOutputPerMTokMicrousd : undefined,
      shape.imageOutput ? r.imageOutputPerMTokMicrousd : undefined,
    );
  // Settlement rounds each category up on its own. Against one ceiling at the dearest rate, a
  // category whose rate is at least 1 micro-USD per token cheaper pays its own rounding out of that
  // margin, and a whole-micro-USD rate never rounds; each of the G others can add under 1 micro-USD,
  // so a split can exceed the single ceiling by at most G - 1 (pricing.spec.ts checks this bound).
  const roundingAllowance = (rates: bigint[], tokens: number) => {
    const top = maxOf(...rates);
    const uncovered = rates.filter((r) => r % TOKENS_PER_PRICE_UNIT !== 0n && top - r < TOKENS_PER_PRICE_UNIT).length;
    return BigInt(Math.max(0, Math.min(uncovered, tokens) - 1));
  };
  const sideCost = (tokens: number, rates: bigint[]) => costOfTokensMicrousd(tokens, maxOf(...rates)) + roundingAllowance(rates, tokens);
  let worst = 0n;
  for (const name of serviceTiersFor(price, shape.serviceTier)) {
    const st = serviceTierPrices(price, name);
    for (const reached of reachableTiers(st.rates, st.contextTiers, rule, inputTokens)) {
      const cost = sideCost(inputTokens, inputRates(reached.inputSide)) + sideCost(outputTokens, outputRates(reached.outputSide));
      if (cost > worst) worst = cost;
    }
  }
  let fees = 0n;
  for (const feature of shape.features ?? []) {
    const fee = price.perCallFees?.find((f) => f.feature === feature);
    if (fee) fees += fee.feeMicrousd * BigInt(fee.reservedCallsPerRequest);
  }
  return worst + fees;
}

/** The shape that reaches every rate and fee of a revision: the worst any request could reserve. */
export function worstPricedShape(price: PriceRevision): PricedShape {
  return {
    serviceTier: AUTO_SERVICE_TIER,
    audioInput: true,
    audioOutput: true,
    imageOutput: true,
    features: (price.perCallFees ?? []).map((f) => f.feature),
  };
}
