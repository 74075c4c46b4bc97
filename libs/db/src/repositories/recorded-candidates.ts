import { z } from 'zod';

/**
 * An attempt's recorded candidates (`attempt.candidate_outcomes`, copied onto experiment ledger
 * rows) as the experiment's acceptance reads them: finish reason as the provider spelled it and
 * outcome. Null when the attempt recorded none or the JSON is not that shape.
 */
const recordedCandidates = z.array(z.object({ finish_reason: z.string().nullable(), outcome: z.string() }));

export function recordedCandidatesOf(json: unknown): Array<{ finish_reason: string | null; outcome: string }> | null {
  const parsed = recordedCandidates.safeParse(json);
  return parsed.success ? parsed.data.map((c) => ({ finish_reason: c.finish_reason, outcome: c.outcome })) : null;
}
