-- Daily controls (issue 13): per-day tallies fed from gateway.admission.decisions.v1, per-workload
-- thresholds, and the alerts (one per workload x route x day x kind).
CREATE TABLE "control_day_tally" (
    "day" DATE NOT NULL,
    "workload_id" TEXT NOT NULL,
    "route_id" TEXT NOT NULL,
    "metric" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "n" BIGINT NOT NULL,
    CONSTRAINT "control_day_tally_pkey" PRIMARY KEY ("day","workload_id","route_id","metric","key")
);

CREATE TABLE "control_threshold" (
    "workload_id" TEXT NOT NULL,
    "thresholds" JSONB NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_by" TEXT NOT NULL,
    "change_reason" TEXT NOT NULL,
    CONSTRAINT "control_threshold_pkey" PRIMARY KEY ("workload_id")
);

CREATE TABLE "control_alert" (
    "id" TEXT NOT NULL,
    "day" DATE NOT NULL,
    "workload_id" TEXT NOT NULL,
    "route_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "details" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    CONSTRAINT "control_alert_pkey" PRIMARY KEY ("id")
);

CREATE UNIQUE INDEX "control_alert_day_workload_id_route_id_kind_key" ON "control_alert"("day", "workload_id", "route_id", "kind");
CREATE INDEX "control_alert_workload_id_day_idx" ON "control_alert"("workload_id", "day");
