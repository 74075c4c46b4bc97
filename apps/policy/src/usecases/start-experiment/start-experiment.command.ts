import { z } from 'zod';
import { experimentDesignFromWire, experimentDesignWireFields, wirePathOf } from '@gateway/contracts';
import { experimentDesignProblems } from '@gateway/domain';
import { microusd, resourceId, text } from '../input';

/**
 * POST /workloads/{id}/experiments: a hedging experiment's design (issue 11), fixed in advance.
 * Money is integer micro-USD. The domain's `experimentDesignProblems` is the one check of the
 * ranges; each problem is refused on its snake_case field.
 */
export const startExperimentBody = z
  .object({ ...experimentDesignWireFields(microusd, resourceId), reason: text(500).optional() })
  .strict()
  .superRefine((d, ctx) => {
    for (const problem of experimentDesignProblems(experimentDesignFromWire(d)))
      ctx.addIssue({ code: 'custom', path: wirePathOf(problem.path), message: problem.message });
  });
export type StartExperimentCommand = z.output<typeof startExperimentBody>;
