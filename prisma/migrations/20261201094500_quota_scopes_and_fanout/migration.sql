-- Token and spend limits per team and per environment (issue 16 A), fan-out per workflow (issue 16 B).

-- CreateTable
CREATE TABLE "scope_limit" (
    "scope" TEXT NOT NULL,
    "scope_id" TEXT NOT NULL,
    "tokens_per_minute" INTEGER,
    "token_rate_enforcement" TEXT NOT NULL DEFAULT 'organisation',
    "budget_microusd" BIGINT,
    "budget_period" TEXT NOT NULL DEFAULT 'month',
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_by" TEXT NOT NULL,
    "change_reason" TEXT NOT NULL,

    CONSTRAINT "scope_limit_pkey" PRIMARY KEY ("scope","scope_id")
);

-- AlterTable
ALTER TABLE "workload" ADD COLUMN "max_calls_per_workflow" INTEGER,
ADD COLUMN "workflow_window_seconds" INTEGER NOT NULL DEFAULT 60,
ADD COLUMN "workflow_id_field" TEXT;

-- AlterTable: a counter kept by one gateway instance says so ('' = the organisation-wide counter)
ALTER TABLE "quota_counter" ADD COLUMN "instance_id" TEXT NOT NULL DEFAULT '',
ADD COLUMN "calls" INTEGER NOT NULL DEFAULT 0;
ALTER TABLE "quota_counter" DROP CONSTRAINT "quota_counter_pkey",
ADD CONSTRAINT "quota_counter_pkey" PRIMARY KEY ("scope","scope_id","window_start","instance_id");

-- AlterTable
ALTER TABLE "reservation" ADD COLUMN "scope_account_ids" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- AlterTable
ALTER TABLE "action" ADD COLUMN "quota_scope" TEXT,
ADD COLUMN "workflow_id_hash" TEXT;
