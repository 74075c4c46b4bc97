import { z } from 'zod';
import { MAX_TOKENS_PER_MINUTE } from '@gateway/domain';
import { budgetMicrousd, int, text } from '../input';

/**
 * PUT /scope-limits/{scope}/{id}: the whole set of limits of a team or an environment (as
 * workloads declare them). null = no limit of that kind. The token rate is enforced on one counter
 * the whole organisation shares, or (`instance`) on one counter per gateway instance.
 */
export const putScopeLimitBody = z
  .object({
    tokens_per_minute: int(1, MAX_TOKENS_PER_MINUTE).nullable().default(null),
    token_rate_enforcement: z.enum(['organisation', 'instance']).default('organisation'),
    budget_microusd: budgetMicrousd.nullable().default(null),
    budget_period: z.enum(['day', 'month']).default('month'),
    reason: text(500).optional(),
  })
  .strict();
export type PutScopeLimitCommand = z.output<typeof putScopeLimitBody>;
