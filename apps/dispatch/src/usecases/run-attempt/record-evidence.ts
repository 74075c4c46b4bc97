import type { Logger } from 'pino';
import type { AttemptOutcome } from '@gateway/db';
import { isTransientDatabaseError } from '@gateway/db';
import { InvalidTransitionError } from '@gateway/domain';
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
 * Writes an attempt's outcome until it lands. It is the most valuable row dispatch writes (usage
 * that already arrived), so a transient database error (unavailable, terminated connection,
 * timeout) is retried with capped backoff for as long as the process runs; the repository's write
 * recognises a run that committed before its caller heard so (`already_recorded`). Deterministic
 * errors (an attempt the sweeper already moved) are thrown. On shutdown the outcome is abandoned
 * with an error log of ids only; reconciliation's orphan sweep then opens the case.
 *
 * An attempt the orphan sweep ended first (its evidence came later than the action's deadline +
 * the sweep's grace: a long database outage, a stream held up by the broker) already has its
 * `orphaned_attempt` case, its exposure kept. The evidence in hand is then logged with its counts
 * (ids and numbers, never text), so that an operator can resolve that case from it
 * (`POST /cases/{id}/import-usage`) without waiting for the provider's export.
 */
export async function recordEvidence(
  store: Pick<AttemptStore, 'complete'>,
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
      if (err instanceof InvalidTransitionError && err.machine === 'attempt') logLateEvidence(outcome, log);
      if (!isTransientDatabaseError(err)) throw err;
      const ids = { action_id: outcome.actionId, attempt_id: outcome.attemptId, event_id: outcome.event.event_id, runs: run };
      if (lastTry) {
        log.error(ids, 'ATTEMPT EVIDENCE NOT RECORDED: shutting down while the database is unavailable; the orphan sweep will open a case');
        return 'abandoned';
      }
      log.warn({ ...ids, retry_in_ms: waitMs }, 'attempt evidence write failed transiently; retrying');
      await pause(waitMs, retry.stopping);
      waitMs = Math.min(waitMs * 2, retry.capMs);
    }
  }
}

/** The evidence of an attempt that had already ended; `evidence` is the body `POST /cases/{id}/import-usage` takes (null: no usage came). */
function logLateEvidence(outcome: AttemptOutcome, log: Logger): void {
  const e = outcome.event;
  log.error(
    {
      action_id: outcome.actionId,
      attempt_id: outcome.attemptId,
      status: outcome.status,
      http_status: outcome.httpStatus,
      usage_source: outcome.usageSource,
      evidence:
        e.input_tokens === null || e.output_tokens_total === null
          ? null
          : {
              provider_request_id: outcome.providerRequestId,
              input_tokens: e.input_tokens,
              cached_input_tokens: e.cached_input_tokens ?? 0,
              output_tokens_total: e.output_tokens_total,
              reasoning_tokens: e.reasoning_tokens ?? 0,
              cache_write_input_tokens: e.cache_write_input_tokens ?? 0,
              audio_input_tokens: e.audio_input_tokens ?? 0,
              audio_output_tokens: e.audio_output_tokens ?? 0,
              image_output_tokens: e.image_output_tokens ?? 0,
              service_tier: e.service_tier ?? undefined,
              feature_calls: e.feature_calls ?? undefined,
            },
    },
    'ATTEMPT EVIDENCE CAME AFTER THE ATTEMPT ENDED: the orphan sweep opened its case first; `evidence` resolves that case (POST /cases/{id}/import-usage)',
  );
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
