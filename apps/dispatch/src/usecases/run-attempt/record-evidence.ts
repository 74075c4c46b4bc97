import type { Logger } from 'pino';
import type { AttemptOutcome } from '@gateway/db';
import { isTransientDatabaseError } from '@gateway/db';
import { lateEvidenceOf, usageOfReport } from '@gateway/contracts';
import { InvalidTransitionError, outputTokensWithReasoning } from '@gateway/domain';
import type { AttemptStore } from './ports';

export interface EvidenceRetry {
  /** first backoff wait; doubles up to `capMs` */
  baseMs: number;
  capMs: number;
  /** aborted when the process shuts down: one last try, then give up (loudly) */
  stopping: AbortSignal;
}

export const EVIDENCE_RETRY = { baseMs: 100, capMs: 5_000 };

export type EvidenceResult = 'recorded' | 'already_recorded' | 'abandoned';

/**
 * The attempt had already ended when its outcome came to be recorded (the orphan sweep cut it),
 * and `recordEvidence` has dealt with the evidence (offered to the orphan case, or logged): the
 * attempt's run stops here without another error line.
 */
export class AttemptEndedFirst extends Error {
  constructor(readonly refusal: InvalidTransitionError) {
    super(refusal.message);
    this.name = 'AttemptEndedFirst';
  }
}

/**
 * Writes an attempt's outcome until it lands. It is the most valuable row dispatch writes (usage
 * that already arrived), so a transient database error (unavailable, terminated connection,
 * timeout) is retried with capped backoff for as long as the process runs; the repository's write
 * recognises a run that committed before its caller heard so (`already_recorded`). Deterministic
 * errors (an attempt the sweeper already moved) are thrown. On shutdown the outcome is abandoned
 * with an error line holding its usage as the import body; reconciliation's orphan sweep then
 * opens the case, and an operator resolves it from that line.
 *
 * An attempt the orphan sweep ended first (its evidence came later than the action's deadline +
 * the sweep's grace: a long database outage, a stream held up by the broker) already has its
 * `orphaned_attempt` case, its exposure kept. The evidence in hand is offered to that case, and
 * reconciliation settles the case from it (`offerLateEvidence`).
 */
export async function recordEvidence(
  store: Pick<AttemptStore, 'complete' | 'offerLateEvidence'>,
  outcome: AttemptOutcome,
  retry: EvidenceRetry,
  log: Logger,
): Promise<EvidenceResult> {
  let waitMs = retry.baseMs;
  for (let run = 1; ; run++) {
    const lastTry = retry.stopping.aborted;
    try {
      const result = await store.complete(outcome);
      if (run > 1)
        log.warn({ action_id: outcome.actionId, attempt_id: outcome.attemptId, runs: run }, 'attempt evidence recorded after retries');
      return result;
    } catch (err) {
      if (err instanceof InvalidTransitionError && err.machine === 'attempt') {
        await offerLateEvidence(store, outcome, log);
        throw new AttemptEndedFirst(err);
      }
      if (!isTransientDatabaseError(err)) throw err;
      const ids = { action_id: outcome.actionId, attempt_id: outcome.attemptId, event_id: outcome.event.event_id, runs: run };
      if (lastTry) {
        log.error(
          { ...ids, evidence: importUsageBodyOf(outcome) },
          'ATTEMPT EVIDENCE NOT RECORDED: shutting down while the database is unavailable; the orphan sweep will open a case, and `evidence` is the body that resolves it (POST /cases/{id}/import-usage)',
        );
        return 'abandoned';
      }
      log.warn({ ...ids, retry_in_ms: waitMs }, 'attempt evidence write failed transiently; retrying');
      await pause(waitMs, retry.stopping);
      waitMs = Math.min(waitMs * 2, retry.capMs);
    }
  }
}

/**
 * The evidence of an attempt the orphan sweep ended first, offered to its open case (reconciliation
 * settles the case from it). When no open case takes it, or the offer fails, the evidence goes into
 * the log at error level as the body `POST /cases/{id}/import-usage` takes (output including
 * reasoning, as that body counts it; ids and counts, never text).
 */
async function offerLateEvidence(store: Pick<AttemptStore, 'offerLateEvidence'>, outcome: AttemptOutcome, log: Logger): Promise<void> {
  const ids = {
    action_id: outcome.actionId,
    attempt_id: outcome.attemptId,
    status: outcome.status,
    stream_mode: outcome.event.stream_mode,
    attempt_role: outcome.event.attempt_role,
  };
  const evidence = lateEvidenceOf(outcome.event, outcome.now);
  if (!evidence) {
    log.warn(ids, 'attempt ended by the orphan sweep before its outcome was recorded; the outcome carried no usage');
    return;
  }
  const caseId = await store.offerLateEvidence(outcome.attemptId, evidence).catch((err: Error) => {
    log.error({ ...ids, error: err.message }, 'late attempt evidence could not be offered to its case');
    return null;
  });
  if (caseId) {
    log.warn(
      { ...ids, case_id: caseId },
      'attempt evidence came after the orphan sweep; offered to its case, which reconciliation settles from it',
    );
    return;
  }
  log.error(
    { ...ids, evidence: importUsageBodyOf(outcome) },
    'ATTEMPT EVIDENCE CAME AFTER THE ATTEMPT ENDED and no open orphan case took it: if the attempt has no ledger row, `evidence` is the body for POST /cases/{id}/import-usage (a retry of a write whose commit went unacknowledged, once its outbox row was published, ends here too, and then nothing is missing)',
  );
}

/**
 * The outcome's usage as the body `POST /cases/{id}/import-usage` takes (output counted with its
 * reasoning, as that body counts it; ids and counts, never text), for a log line that an operator
 * resolves the attempt's case from; null when the outcome carried no usage.
 */
function importUsageBodyOf(outcome: AttemptOutcome): Record<string, unknown> | null {
  const evidence = lateEvidenceOf(outcome.event, outcome.now);
  if (!evidence) return null;
  const usage = usageOfReport(evidence, evidence.output_includes_reasoning);
  return {
    provider_request_id: evidence.provider_request_id,
    input_tokens: usage.inputTokens,
    cached_input_tokens: usage.cachedInputTokens,
    output_tokens_total: outputTokensWithReasoning(usage),
    reasoning_tokens: usage.reasoningTokens,
    cache_write_input_tokens: usage.cacheWriteInputTokens,
    audio_input_tokens: usage.audioInputTokens,
    audio_output_tokens: usage.audioOutputTokens,
    image_output_tokens: usage.imageOutputTokens,
    service_tier: usage.serviceTier ?? undefined,
    feature_calls: usage.featureCalls,
  };
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
  });
}
