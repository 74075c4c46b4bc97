-- Hedge policy revisions (issue 10): a workload's policy for hedges, retries and fallbacks,
-- optionally scoped to one route. Rows are immutable; every change is a new revision, numbered
-- per (workload, route) scope. The revision in force on a route is the latest of that route's
-- scope, else the latest workload-wide one (route_id NULL). Writers lock the workload row to
-- number revisions, so the workload-wide scope (where NULL defeats the unique index) stays
-- gap-free and unique too. Money is integer micro-USD.
CREATE TABLE "hedge_policy_revision" (
    "id" TEXT NOT NULL,
    "workload_id" TEXT NOT NULL,
    "route_id" TEXT,
    "revision" INTEGER NOT NULL,
    "owner" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL,
    "delay_kind" TEXT NOT NULL,
    "delay_ms" INTEGER,
    "delay_quantile_per_mille" INTEGER,
    "delay_floor_ms" INTEGER,
    "delay_ceiling_ms" INTEGER,
    "delay_min_samples" INTEGER,
    "max_hedges" INTEGER NOT NULL,
    "retry_transient" TEXT[],
    "max_retries" INTEGER NOT NULL,
    "max_attempts" INTEGER NOT NULL,
    "max_extra_spend_microusd" BIGINT NOT NULL,
    "spend_floor_microusd" BIGINT NOT NULL,
    "max_route_error_per_mille" INTEGER NOT NULL,
    "max_route_in_flight" INTEGER NOT NULL,
    "min_useful_remaining_ms" INTEGER NOT NULL,
    "bucket_max_milli_tokens" INTEGER NOT NULL,
    "bucket_success_refill_milli_tokens" INTEGER NOT NULL,
    "approved_premium_microusd" BIGINT NOT NULL,
    "experiment_budget_microusd" BIGINT,
    "experiment_budget_period" TEXT,
    "read_only_tools" TEXT[],
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "created_by" TEXT NOT NULL,
    "reason" TEXT NOT NULL,

    CONSTRAINT "hedge_policy_revision_pkey" PRIMARY KEY ("id"),
    CONSTRAINT "hedge_policy_revision_delay_check" CHECK (
        ("delay_kind" = 'fixed' AND "delay_ms" IS NOT NULL)
        OR ("delay_kind" = 'quantile' AND "delay_quantile_per_mille" IS NOT NULL AND "delay_floor_ms" IS NOT NULL
            AND "delay_ceiling_ms" IS NOT NULL AND "delay_min_samples" IS NOT NULL)),
    CONSTRAINT "hedge_policy_revision_experiment_check" CHECK (
        ("experiment_budget_microusd" IS NULL) = ("experiment_budget_period" IS NULL))
);

CREATE UNIQUE INDEX "hedge_policy_revision_workload_id_route_id_revision_key" ON "hedge_policy_revision"("workload_id", "route_id", "revision");

ALTER TABLE "hedge_policy_revision" ADD CONSTRAINT "hedge_policy_revision_workload_id_fkey" FOREIGN KEY ("workload_id") REFERENCES "workload"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "hedge_policy_revision" ADD CONSTRAINT "hedge_policy_revision_route_id_fkey" FOREIGN KEY ("route_id") REFERENCES "route"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
