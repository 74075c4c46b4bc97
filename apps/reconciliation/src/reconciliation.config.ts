import { z } from 'zod';

export interface SweepConfig {
  /** how often the sweeper runs; 0 disables the timer (tests call the use case directly) */
  intervalMs: number;
  /**
   * the longest wait between sweeps once they find nothing (default 6 × intervalMs): each empty
   * sweep doubles the wait up to this, one that voids or reconciles something resets it
   */
  idleMaxMs?: number;
  /** how long past its action deadline an in-flight attempt must be before it counts as orphaned */
  orphanGraceMs: number;
  /**
   * margin past the dispatch deadline before an admitted action is voided, so a dispatcher whose
   * clock runs slightly behind ours cannot still be claiming it
   */
  dispatchClockSkewMs: number;
  /** rows examined per kind and sweep */
  batchSize: number;
}

export const SWEEP_CONFIG = 'RECONCILIATION_SWEEP_CONFIG';

const ms = z.coerce.number().int().nonnegative();
const schema = z.object({
  RECONCILIATION_SWEEP_MS: ms.default(5000),
  RECONCILIATION_SWEEP_IDLE_MAX_MS: ms.optional(),
  RECONCILIATION_ORPHAN_GRACE_MS: ms.default(60000),
  RECONCILIATION_DISPATCH_SKEW_MS: ms.default(2000),
  RECONCILIATION_SWEEP_BATCH: z.coerce.number().int().min(1).max(10000).default(200),
});

export function sweepConfigFromEnv(env: NodeJS.ProcessEnv = process.env): SweepConfig {
  const present = Object.fromEntries(
    Object.entries(env).filter(([k, v]) => k.startsWith('RECONCILIATION_') && v !== undefined && v !== ''),
  );
  const parsed = schema.parse(present);
  return {
    intervalMs: parsed.RECONCILIATION_SWEEP_MS,
    idleMaxMs: parsed.RECONCILIATION_SWEEP_IDLE_MAX_MS ?? 6 * parsed.RECONCILIATION_SWEEP_MS,
    orphanGraceMs: parsed.RECONCILIATION_ORPHAN_GRACE_MS,
    dispatchClockSkewMs: parsed.RECONCILIATION_DISPATCH_SKEW_MS,
    batchSize: parsed.RECONCILIATION_SWEEP_BATCH,
  };
}

export interface ExportCompleteConfig {
  /**
   * how long an attempt's case must have been open before an export stated complete may settle it
   * at zero: an attempt that only just ended may still be on its way into the provider's export
   */
  graceMs: number;
}

export const EXPORT_COMPLETE_CONFIG = 'RECONCILIATION_EXPORT_COMPLETE_CONFIG';

export function exportCompleteConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ExportCompleteConfig {
  const raw = env.RECONCILIATION_EXPORT_COMPLETE_GRACE_MS;
  return { graceMs: raw === undefined || raw === '' ? 600_000 : ms.parse(raw) };
}

export interface ControlsConfig {
  /** how often yesterday's daily controls run (idempotent); 0 disables the timer */
  runIntervalMs: number;
}

export const CONTROLS_CONFIG = 'RECONCILIATION_CONTROLS_CONFIG';

export function controlsConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ControlsConfig {
  const raw = env.CONTROLS_RUN_MS;
  return { runIntervalMs: raw === undefined || raw === '' ? 3_600_000 : ms.parse(raw) };
}
