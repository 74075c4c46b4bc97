-- Hedging experiments (issue 11): a workload's randomised comparison of hedging against a
-- primary-only holdout, started by a four-eyes change request. The design is fixed when the
-- experiment starts (the sample plan is fixed in advance); only the status moves, to `stopped`.
-- At most one experiment runs per workload: writers lock the workload row (a partial unique
-- index would say it too, but the schema cannot declare one). Money is integer micro-USD.
CREATE TABLE "experiment" (
    "id" TEXT NOT NULL,
    "workload_id" TEXT NOT NULL,
    "hedge_policy_revision_id" TEXT NOT NULL,
    "owner" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "holdout_share_bps" INTEGER NOT NULL,
    "useful_deadline_ms" INTEGER NOT NULL,
    "accept_non_empty_content" BOOLEAN NOT NULL,
    "accept_finish_reasons" TEXT[],
    "accept_refusals_invalid" BOOLEAN NOT NULL,
    "min_actions_per_cohort" INTEGER NOT NULL,
    "max_unresolved_share_bps" INTEGER NOT NULL,
    "approved_premium_microusd" BIGINT NOT NULL,
    "overhead_microusd_per_attempt" BIGINT NOT NULL,
    "pause_holdout_p95_above_ms" INTEGER NOT NULL,
    "pause_route_error_per_mille_above" INTEGER NOT NULL,
    "pause_window_actions" INTEGER NOT NULL,
    "seed" BIGINT NOT NULL,
    "requested_by" TEXT NOT NULL,
    "approved_by" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "started_at" TIMESTAMPTZ(3) NOT NULL,
    "stopped_at" TIMESTAMPTZ(3),
    "stopped_by" TEXT,
    "stop_reason" TEXT,

    CONSTRAINT "experiment_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "experiment_status_check" CHECK (
        ("status" = 'running' AND "stopped_at" IS NULL) OR ("status" = 'stopped' AND "stopped_at" IS NOT NULL))
);

CREATE INDEX "experiment_workload_id_status_idx" ON "experiment"("workload_id", "status");

ALTER TABLE "experiment" ADD CONSTRAINT "experiment_workload_id_fkey" FOREIGN KEY ("workload_id") REFERENCES "workload"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

ALTER TABLE "experiment" ADD CONSTRAINT "experiment_hedge_policy_revision_id_fkey" FOREIGN KEY ("hedge_policy_revision_id") REFERENCES "hedge_policy_revision"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
