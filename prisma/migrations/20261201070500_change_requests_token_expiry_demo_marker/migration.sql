-- Four-eyes for changes that raise spend (issue 8 §5): one row per requested change, decided once
-- by someone other than the requester; the change itself is applied in the approving transaction.
CREATE TABLE "change_request" (
    "id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "target_id" TEXT NOT NULL,
    "proposed" JSONB NOT NULL,
    "raises" TEXT[],
    "status" TEXT NOT NULL,
    "requested_by" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "requested_at" TIMESTAMPTZ(3) NOT NULL,
    "decided_by" TEXT,
    "decided_at" TIMESTAMPTZ(3),
    "decision_reason" TEXT,

    CONSTRAINT "change_request_pkey" PRIMARY KEY ("id")
);

CREATE INDEX "change_request_status_requested_at_idx" ON "change_request"("status", "requested_at");

-- Operator tokens expire (issue 8 §11); null = no expiry (tokens issued before this migration).
ALTER TABLE "operator_token" ADD COLUMN "expires_at" TIMESTAMPTZ(3);

-- Facts about the database itself; `demo_database` marks one the demo seed may write to.
CREATE TABLE "gateway_meta" (
    "key" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "gateway_meta_pkey" PRIMARY KEY ("key")
);
