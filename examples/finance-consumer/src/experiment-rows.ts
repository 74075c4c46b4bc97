import type { UsageSettledV1 } from '@gateway/contracts';
import type { ExperimentReportRow } from '@gateway/domain';

/** What this app keeps of one settled attempt of an experiment action (the topic's experiment fields). */
export interface ExperimentAttemptFact {
  attemptId: string;
  eventId: string;
  experimentId: string;
  actionId: string;
  cohort: ExperimentReportRow['cohort'];
  winner: boolean;
  /** how many attempts the action had when this one ended (the gateway's count; null: not said) */
  attemptsTotal: number | null;
  admittedAt: Date;
  endedAt: Date | null;
  acceptanceVerdict: string | null;
  candidates: Array<{ finish_reason: string | null; outcome: string }> | null;
  costMicrousd: bigint;
  /** the experiment pause the attempt was dispatched under (null: none, or an event without the field) */
  pauseId: string | null;
}

/**
 * The experiment facts of a settled event, or null when the attempt is not of an experiment
 * (or the event predates the fields). Needs the attempt id: one fact per attempt.
 */
export function experimentAttemptOf(e: UsageSettledV1): ExperimentAttemptFact | null {
  if (!e.experiment_id || !e.action_admitted_at || !e.cohort || !e.attempt_id) return null;
  return {
    attemptId: e.attempt_id,
    eventId: e.event_id,
    experimentId: e.experiment_id,
    actionId: e.action_id,
    cohort: e.cohort,
    winner: e.winner === true,
    attemptsTotal: e.attempts_total ?? null,
    admittedAt: new Date(e.action_admitted_at),
    endedAt: e.attempt_ended_at ? new Date(e.attempt_ended_at) : null,
    acceptanceVerdict: e.action_acceptance_verdict ?? null,
    candidates: e.attempt_candidates ?? null,
    costMicrousd: BigInt(e.cost_microusd),
    pauseId: e.experiment_pause_id ?? null,
  };
}

/** What the topic says about how complete the rebuilt rows are. */
export interface TopicCoverage {
  /** actions of the experiment with at least one settled attempt */
  actions: number;
  settled_attempts: number;
  /**
   * attempts the gateway said the actions had (attempts_total, the largest one seen) beyond those
   * settled: known to exist, their money not on the topic yet (reconciliation still holds it)
   */
  attempts_not_yet_settled: number;
}

/**
 * One report row per action from its settled attempts, as `ExperimentRepository.reportRows` builds
 * it from the gateway's tables: the winner's end, verdict and candidates; the attempts and the sum
 * of their cost. The topic carries settled money only, so the exposure of attempts not settled yet
 * is unknown here (0): the rows equal the gateway's once every attempt is settled (see README).
 */
export function experimentRowsOf(facts: readonly ExperimentAttemptFact[]): { rows: ExperimentReportRow[]; coverage: TopicCoverage } {
  const byAction = new Map<string, ExperimentAttemptFact[]>();
  for (const f of facts) {
    const list = byAction.get(f.actionId);
    if (list) list.push(f);
    else byAction.set(f.actionId, [f]);
  }
  const rows: ExperimentReportRow[] = [];
  let missing = 0;
  for (const [actionId, attempts] of [...byAction.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const winner = attempts.find((a) => a.winner) ?? null;
    const told = Math.max(0, ...attempts.map((a) => a.attemptsTotal ?? 0));
    missing += Math.max(0, told - attempts.length);
    rows.push({
      actionId,
      cohort: attempts[0].cohort,
      admittedAt: attempts[0].admittedAt,
      answeredAt: winner?.endedAt ?? null,
      acceptanceVerdict: winner?.acceptanceVerdict ?? null,
      winnerCandidates: winner?.candidates?.map((c) => ({ finishReason: c.finish_reason, outcome: c.outcome })) ?? null,
      attempts: attempts.length,
      settledMicrousd: attempts.reduce((sum, a) => sum + a.costMicrousd, 0n),
      unresolvedMicrousd: 0n,
      // as the gateway counts it: some attempt of the action was dispatched under an open pause
      ranPaused: attempts.some((a) => a.pauseId !== null),
    });
  }
  return { rows, coverage: { actions: rows.length, settled_attempts: facts.length, attempts_not_yet_settled: missing } };
}
