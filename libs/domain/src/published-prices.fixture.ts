import { PriceRevision } from './pricing';

/**
 * Published prices of a few current models, as test fixtures (never read by the running gateway:
 * operators enter prices through the policy API). Micro-USD per million tokens, so `$1.25 / MTok`
 * is `1_250_000n`; per-call fees in micro-USD per call.
 *
 * Read 2026-12-02. This machine has no internet access: the figures come from the stored copies of
 * third-party summaries of the providers' pricing pages in the workplace's reference corpus
 * (deploybase.ai "Gemini API Pricing 2026" and "Gemini 2.5 Pricing", hivebook.wiki "Gemini 2.5",
 * chatgptpricing "OpenAI API Pricing", aipromptshub "GPT-5 cost"), cross-checked against the rates
 * the providers have published for these models for a long time. They exercise the shapes the
 * gateway must price (context tiers, service tiers, cache reads and writes, modality rates,
 * per-call fees); check the providers' own pages before copying a figure into a live price list.
 */
const usd = (dollarsPerMTok: string): bigint => {
  const [whole, frac = ''] = dollarsPerMTok.split('.');
  return BigInt(whole) * 1_000_000n + BigInt((frac + '000000').slice(0, 6));
};

export type PublishedPrice = { model: string; provider: 'openai' | 'gemini' | 'anthropic'; note: string; price: PriceRevision };

export const PUBLISHED_PRICES: readonly PublishedPrice[] = [
  {
    model: 'gemini-2.5-pro',
    provider: 'gemini',
    note: 'prompts above 200k tokens bill the whole request at the higher rates (input 2x, output 1.5x); thinking billed as output; Search grounding $35 per 1,000 grounded prompts',
    price: {
      id: 'fixture-gemini-2.5-pro',
      inputPerMTokMicrousd: usd('1.25'),
      cachedInputPerMTokMicrousd: usd('0.125'),
      outputPerMTokMicrousd: usd('10'),
      reasoningPerMTokMicrousd: usd('10'),
      contextTierRule: 'whole_request',
      contextTiers: [
        {
          aboveInputTokens: 200_000,
          rates: {
            inputPerMTokMicrousd: usd('2.50'),
            cachedInputPerMTokMicrousd: usd('0.25'),
            outputPerMTokMicrousd: usd('15'),
            reasoningPerMTokMicrousd: usd('15'),
          },
        },
      ],
      perCallFees: [{ feature: 'search_grounding', feeMicrousd: 35_000n, reservedCallsPerRequest: 1 }],
    },
  },
  {
    model: 'gemini-2.5-flash',
    provider: 'gemini',
    note: 'audio input $1.00; flex 50% of standard, priority 1.8x; Search grounding $35 per 1,000 grounded prompts',
    price: {
      id: 'fixture-gemini-2.5-flash',
      inputPerMTokMicrousd: usd('0.30'),
      cachedInputPerMTokMicrousd: usd('0.03'),
      outputPerMTokMicrousd: usd('2.50'),
      reasoningPerMTokMicrousd: usd('2.50'),
      audioInputPerMTokMicrousd: usd('1.00'),
      serviceTiers: {
        flex: {
          rates: {
            inputPerMTokMicrousd: usd('0.15'),
            cachedInputPerMTokMicrousd: usd('0.015'),
            outputPerMTokMicrousd: usd('1.25'),
            reasoningPerMTokMicrousd: usd('1.25'),
            audioInputPerMTokMicrousd: usd('0.50'),
          },
        },
        priority: {
          rates: {
            inputPerMTokMicrousd: usd('0.54'),
            cachedInputPerMTokMicrousd: usd('0.054'),
            outputPerMTokMicrousd: usd('4.50'),
            reasoningPerMTokMicrousd: usd('4.50'),
            audioInputPerMTokMicrousd: usd('1.80'),
          },
        },
      },
      perCallFees: [{ feature: 'search_grounding', feeMicrousd: 35_000n, reservedCallsPerRequest: 1 }],
    },
  },
  {
    model: 'gemini-2.5-flash-image',
    provider: 'gemini',
    note: 'image output $30 per MTok (1,290 tokens, $0.039, per image)',
    price: {
      id: 'fixture-gemini-2.5-flash-image',
      inputPerMTokMicrousd: usd('0.30'),
      cachedInputPerMTokMicrousd: usd('0.03'),
      outputPerMTokMicrousd: usd('2.50'),
      reasoningPerMTokMicrousd: usd('2.50'),
      imageOutputPerMTokMicrousd: usd('30'),
    },
  },
  {
    model: 'gpt-5',
    provider: 'openai',
    note: 'service_tier priority 2x, flex 0.5x; web search tool $10 per 1,000 calls',
    price: {
      id: 'fixture-gpt-5',
      inputPerMTokMicrousd: usd('1.25'),
      cachedInputPerMTokMicrousd: usd('0.125'),
      outputPerMTokMicrousd: usd('10'),
      reasoningPerMTokMicrousd: usd('10'),
      serviceTiers: {
        priority: {
          rates: {
            inputPerMTokMicrousd: usd('2.50'),
            cachedInputPerMTokMicrousd: usd('0.25'),
            outputPerMTokMicrousd: usd('20'),
            reasoningPerMTokMicrousd: usd('20'),
          },
        },
        flex: {
          rates: {
            inputPerMTokMicrousd: usd('0.625'),
            cachedInputPerMTokMicrousd: usd('0.0625'),
            outputPerMTokMicrousd: usd('5'),
            reasoningPerMTokMicrousd: usd('5'),
          },
        },
      },
      perCallFees: [{ feature: 'web_search', feeMicrousd: 10_000n, reservedCallsPerRequest: 4 }],
    },
  },
  {
    model: 'gpt-5.5',
    provider: 'openai',
    note: 'prompts above 272k tokens: input 2x and output 1.5x for the whole request',
    price: {
      id: 'fixture-gpt-5.5',
      inputPerMTokMicrousd: usd('5'),
      cachedInputPerMTokMicrousd: usd('0.50'),
      outputPerMTokMicrousd: usd('30'),
      reasoningPerMTokMicrousd: usd('30'),
      contextTierRule: 'whole_request',
      contextTiers: [
        {
          aboveInputTokens: 272_000,
          rates: {
            inputPerMTokMicrousd: usd('10'),
            cachedInputPerMTokMicrousd: usd('1'),
            outputPerMTokMicrousd: usd('45'),
            reasoningPerMTokMicrousd: usd('45'),
          },
        },
      ],
    },
  },
  {
    model: 'gpt-4o-audio-preview',
    provider: 'openai',
    note: 'text $2.50 / $10; audio input $40, audio output $80',
    price: {
      id: 'fixture-gpt-4o-audio-preview',
      inputPerMTokMicrousd: usd('2.50'),
      cachedInputPerMTokMicrousd: usd('1.25'),
      outputPerMTokMicrousd: usd('10'),
      reasoningPerMTokMicrousd: usd('10'),
      audioInputPerMTokMicrousd: usd('40'),
      audioOutputPerMTokMicrousd: usd('80'),
    },
  },
  {
    model: 'claude-sonnet-4.5 (openai-compatible route)',
    provider: 'anthropic',
    note: 'cache writes 1.25x input, cache reads 0.1x; above 200k input tokens every token at the long-context rates',
    price: {
      id: 'fixture-claude-sonnet-4.5',
      inputPerMTokMicrousd: usd('3'),
      cachedInputPerMTokMicrousd: usd('0.30'),
      outputPerMTokMicrousd: usd('15'),
      reasoningPerMTokMicrousd: usd('15'),
      cacheWritePerMTokMicrousd: usd('3.75'),
      contextTierRule: 'whole_request',
      contextTiers: [
        {
          aboveInputTokens: 200_000,
          rates: {
            inputPerMTokMicrousd: usd('6'),
            cachedInputPerMTokMicrousd: usd('0.60'),
            outputPerMTokMicrousd: usd('22.50'),
            reasoningPerMTokMicrousd: usd('22.50'),
            cacheWritePerMTokMicrousd: usd('7.50'),
          },
        },
      ],
    },
  },
];

export function publishedPrice(model: string): PriceRevision {
  const found = PUBLISHED_PRICES.find((p) => p.model === model);
  if (!found) throw new Error(`no published-price fixture for ${model}`);
  return found.price;
}
