import type { Logger } from 'pino';
import type { AttemptOutcome } from '@gateway/db';
import { isTransientDatabaseError } from '@gateway/db';
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
