import type { Prisma } from '../generated/prisma/client';
import { priceRevisionFromWire, priceRevisionToWire, storedPriceWire } from '@gateway/contracts';
import type { PriceRevision } from '@gateway/domain';

/** The `price_revision` columns that hold the prices (Prisma's names). */
export interface PriceRow {
  id: string;
  inputPerMTokMicrousd: bigint;
  cachedInputPerMTokMicrousd: bigint;
  outputPerMTokMicrousd: bigint;
  reasoningPerMTokMicrousd: bigint;
  cacheWritePerMTokMicrousd: bigint | null;
  audioInputPerMTokMicrousd: bigint | null;
  audioOutputPerMTokMicrousd: bigint | null;
  imageOutputPerMTokMicrousd: bigint | null;
  contextTierRule: string | null;
  contextTiers: Prisma.JsonValue | null;
  serviceTiers: Prisma.JsonValue | null;
  perCallFees: Prisma.JsonValue | null;
}

/**
 * The one mapping between a `price_revision` row and a domain `PriceRevision`. Base rates are
 * columns; the structure is JSONB in the policy API's snake_case shape with money as decimal
 * strings (libs/contracts price-revision.ts), parsed strictly so a bad row fails loudly here.
 */
export function priceFromRow(row: PriceRow): PriceRevision {
  const some = <T>(v: T | null): T | undefined => (v === null ? undefined : v);
  return priceRevisionFromWire(row.id, {
    input_per_mtok_microusd: row.inputPerMTokMicrousd,
    cached_input_per_mtok_microusd: row.cachedInputPerMTokMicrousd,
    output_per_mtok_microusd: row.outputPerMTokMicrousd,
    reasoning_per_mtok_microusd: row.reasoningPerMTokMicrousd,
    cache_write_per_mtok_microusd: some(row.cacheWritePerMTokMicrousd),
    audio_input_per_mtok_microusd: some(row.audioInputPerMTokMicrousd),
    audio_output_per_mtok_microusd: some(row.audioOutputPerMTokMicrousd),
    image_output_per_mtok_microusd: some(row.imageOutputPerMTokMicrousd),
    context_tier_rule: row.contextTierRule === null ? undefined : storedPriceWire.contextTierRule.parse(row.contextTierRule),
    context_tiers: row.contextTiers === null ? undefined : storedPriceWire.contextTiers.parse(row.contextTiers),
    service_tiers: row.serviceTiers === null ? undefined : storedPriceWire.serviceTiers.parse(row.serviceTiers),
    per_call_fees: row.perCallFees === null ? undefined : storedPriceWire.perCallFees.parse(row.perCallFees),
  });
}

/** The columns for a new row; absent parts are left out (NULL). */
export function priceToRow(p: PriceRevision) {
  const w = priceRevisionToWire(p);
  return {
    id: p.id,
    inputPerMTokMicrousd: p.inputPerMTokMicrousd,
    cachedInputPerMTokMicrousd: p.cachedInputPerMTokMicrousd,
    outputPerMTokMicrousd: p.outputPerMTokMicrousd,
    reasoningPerMTokMicrousd: p.reasoningPerMTokMicrousd,
    cacheWritePerMTokMicrousd: p.cacheWritePerMTokMicrousd,
    audioInputPerMTokMicrousd: p.audioInputPerMTokMicrousd,
    audioOutputPerMTokMicrousd: p.audioOutputPerMTokMicrousd,
    imageOutputPerMTokMicrousd: p.imageOutputPerMTokMicrousd,
    contextTierRule: p.contextTierRule,
    contextTiers: w.context_tiers,
    serviceTiers: w.service_tiers,
    perCallFees: w.per_call_fees,
  } satisfies Partial<Record<keyof PriceRow, unknown>>;
}
