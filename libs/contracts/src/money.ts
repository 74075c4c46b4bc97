import type { UsageCost } from '@gateway/domain';

/** The settled-usage cost fields as finance reads them: integer micro-USD as decimal strings. */
export function settledCostFields(cost: UsageCost): {
  cost_microusd: string;
  cost_microusd_by_category: { input: string; cached_input: string; output: string; reasoning: string };
} {
  return {
    cost_microusd: cost.total.toString(),
    cost_microusd_by_category: {
      input: cost.input.toString(),
      cached_input: cost.cachedInput.toString(),
      output: cost.output.toString(),
      reasoning: cost.reasoning.toString(),
    },
  };
}
