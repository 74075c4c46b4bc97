-- The hedging experiment's pauses (issue 11). While a pause is open, dispatch runs the
-- experiment's hedged cohort primary-only; the report lists every pause with the figures that
-- opened and closed it. At most one open pause per experiment: `open_experiment_id` carries the
-- experiment id exactly while the pause is open, and is unique (NULLs never collide), so a second
-- concurrent opener fails even if it got past the evaluator's lock on the experiment row. (A partial
-- unique index would say the same, but the schema cannot declare one.)
CREATE TABLE "experiment_pause" (
    "id" TEXT NOT NULL,
    "experiment_id" TEXT NOT NULL,
    "open_experiment_id" TEXT,
    "rule" TEXT NOT NULL,
    "started_at" TIMESTAMPTZ(3) NOT NULL,
    "ended_at" TIMESTAMPTZ(3),
    "start_holdout_p95_ms" INTEGER NOT NULL,
    "start_route_error_per_mille" INTEGER NOT NULL,
    "start_samples" INTEGER NOT NULL,
    "end_holdout_p95_ms" INTEGER,
    "end_route_error_per_mille" INTEGER,
    "end_samples" INTEGER,
    "threshold_holdout_p95_ms" INTEGER NOT NULL,
    "threshold_route_error_per_mille" INTEGER NOT NULL,
    "window_actions" INTEGER NOT NULL,

    CONSTRAINT "experiment_pause_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "experiment_pause_rule_check" CHECK ("rule" IN ('holdout_p95_above_ms', 'route_error_per_mille_above')),
    CONSTRAINT "experiment_pause_open_check" CHECK (
        ("ended_at" IS NULL AND "open_experiment_id" = "experiment_id" AND "end_samples" IS NULL)
        OR ("ended_at" IS NOT NULL AND "open_experiment_id" IS NULL AND "end_samples" IS NOT NULL
            AND "end_holdout_p95_ms" IS NOT NULL AND "end_route_error_per_mille" IS NOT NULL AND "ended_at" >= "started_at"))
);

CREATE UNIQUE INDEX "experiment_pause_open_experiment_id_key" ON "experiment_pause"("open_experiment_id");
CREATE INDEX "experiment_pause_experiment_id_started_at_idx" ON "experiment_pause"("experiment_id", "started_at");

ALTER TABLE "experiment_pause" ADD CONSTRAINT "experiment_pause_experiment_id_fkey" FOREIGN KEY ("experiment_id") REFERENCES "experiment"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- The pause that was open when dispatch claimed the attempt's action (both cohorts: the hedged
-- cohort ran primary-only under it, the holdout as always); null when none was.
ALTER TABLE "attempt" ADD COLUMN "experiment_pause_id" TEXT;

-- The pause window: the most recent holdout actions of an experiment, newest first. It replaces
-- the experiment-only index, whose every use (the report) the new one's prefix serves.
DROP INDEX "action_experiment_id_idx";
CREATE INDEX "action_experiment_id_cohort_created_at_idx" ON "action"("experiment_id", "cohort", "created_at");
