import type { PriceRevision } from '@gateway/domain';
import { priceFromRow, priceToRow } from './price-revision.row';

/** A revision with every part of the structure, amounts above 2^53 included. */
const structured: PriceRevision = {
  id: 'p-structured',
  inputPerMTokMicrousd: 1_250_000n,
  cachedInputPerMTokMicrousd: 125_000n,
  outputPerMTokMicrousd: 10_000_000n,
  reasoningPerMTokMicrousd: 10_000_000n,
  cacheWritePerMTokMicrousd: 1_562_500n,
  audioInputPerMTokMicrousd: 9_007_199_254_740_993n,
  contextTierRule: 'input_only',
  contextTiers: [
    {
      aboveInputTokens: 200_000,
      rates: {
        inputPerMTokMicrousd: 2_500_000n,
        cachedInputPerMTokMicrousd: 250_000n,
        outputPerMTokMicrousd: 15_000_000n,
        reasoningPerMTokMicrousd: 15_000_000n,
        cacheWritePerMTokMicrousd: 3_125_000n,
        audioInputPerMTokMicrousd: 1n,
      },
    },
  ],
  serviceTiers: {
    priority: {
      rates: {
        inputPerMTokMicrousd: 2_500_000n,
        cachedInputPerMTokMicrousd: 250_000n,
        outputPerMTokMicrousd: 20_000_000n,
        reasoningPerMTokMicrousd: 20_000_000n,
        cacheWritePerMTokMicrousd: 3_125_000n,
        audioInputPerMTokMicrousd: 0n,
      },
    },
    flex: {
      rates: {
        inputPerMTokMicrousd: 625_000n,
        cachedInputPerMTokMicrousd: 62_500n,
        outputPerMTokMicrousd: 5_000_000n,
        reasoningPerMTokMicrousd: 5_000_000n,
        cacheWritePerMTokMicrousd: 781_250n,
        audioInputPerMTokMicrousd: 2n,
      },
    },
  },
  perCallFees: [{ feature: 'web_search', feeMicrousd: 10_000n, reservedCallsPerRequest: 5 }],
};

/** What Postgres gives back: JSONB reorders object keys and knows no bigint. */
function throughJsonb(v: unknown): unknown {
  if (v === undefined) return null;
  const reorder = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(reorder)
      : x !== null && typeof x === 'object'
        ? Object.fromEntries(
            Object.entries(x)
              .reverse()
              .map(([k, y]) => [k, reorder(y)]),
          )
        : x;
  return reorder(JSON.parse(JSON.stringify(v)));
}

function stored(p: PriceRevision) {
  const row = priceToRow(p);
  return {
    ...row,
    cacheWritePerMTokMicrousd: row.cacheWritePerMTokMicrousd ?? null,
    audioInputPerMTokMicrousd: row.audioInputPerMTokMicrousd ?? null,
    audioOutputPerMTokMicrousd: row.audioOutputPerMTokMicrousd ?? null,
    imageOutputPerMTokMicrousd: row.imageOutputPerMTokMicrousd ?? null,
    contextTierRule: row.contextTierRule ?? null,
    contextTiers: throughJsonb(row.contextTiers) as never,
    serviceTiers: throughJsonb(row.serviceTiers) as never,
    perCallFees: throughJsonb(row.perCallFees) as never,
  };
}

describe('price_revision row ⇄ domain', () => {
  it('a structured revision round-trips exactly (bigint above 2^53 too)', () => {
    expect(priceFromRow(stored(structured))).toStrictEqual(structured);
  });

  it('a flat revision stays flat: no structure columns, no undefined keys', () => {
    const flat: PriceRevision = {
      id: 'p',
      inputPerMTokMicrousd: 1n,
      cachedInputPerMTokMicrousd: 0n,
      outputPerMTokMicrousd: 2n,
      reasoningPerMTokMicrousd: 2n,
    };
    const row = stored(flat);
    expect([row.contextTiers, row.serviceTiers, row.perCallFees, row.contextTierRule]).toEqual([null, null, null, null]);
    expect(priceFromRow(row)).toStrictEqual(flat);
  });

  it('money is stored as decimal strings, never JSON numbers', () => {
    expect(JSON.stringify(priceToRow(structured).perCallFees)).toBe(
      '[{"feature":"web_search","fee_microusd":"10000","reserved_calls_per_request":5}]',
    );
  });

  it('a malformed stored structure fails loudly', () => {
    expect(() =>
      priceFromRow({ ...stored(structured), perCallFees: [{ feature: 'web_search', fee_microusd: 10000, reserved_calls_per_request: 5 }] }),
    ).toThrow();
  });
});
