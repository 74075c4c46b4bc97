-- Weekly audit (issue 13): what finance received on gateway.usage.settled.v1, one row per event
-- (a redelivery inserts nothing), and each provider-export line the import has seen, one row per
-- provider request id (importing the line again rewrites the same row): the audit's export side and
-- the export-complete rule's "has a line". No text: ids, counts, money.
CREATE TABLE "audit_settled_event" (
    "event_id" TEXT NOT NULL,
    "attempt_id" TEXT,
    "action_id" TEXT NOT NULL,
    "workload_id" TEXT NOT NULL,
    "route_id" TEXT NOT NULL,
    "cost_microusd" BIGINT NOT NULL,
    "settled_at" TIMESTAMPTZ(3) NOT NULL,
    "received_at" TIMESTAMPTZ(3) NOT NULL,
    CONSTRAINT "audit_settled_event_pkey" PRIMARY KEY ("event_id")
);

CREATE INDEX "audit_settled_event_settled_at_idx" ON "audit_settled_event"("settled_at");
CREATE INDEX "audit_settled_event_attempt_id_idx" ON "audit_settled_event"("attempt_id");

CREATE TABLE "usage_export_line" (
    "provider_request_id" TEXT NOT NULL,
    "client_request_id" TEXT,
    "attempt_id" TEXT,
    "outcome" TEXT NOT NULL,
    "input_tokens" INTEGER NOT NULL,
    "cached_input_tokens" INTEGER NOT NULL,
    "output_tokens_total" INTEGER NOT NULL,
    "reasoning_tokens" INTEGER NOT NULL,
    "export_cost_microusd" BIGINT,
    "line_at" TIMESTAMPTZ(3),
    "imported_at" TIMESTAMPTZ(3) NOT NULL,
    "imported_by" TEXT NOT NULL,
    CONSTRAINT "usage_export_line_pkey" PRIMARY KEY ("provider_request_id")
);

CREATE INDEX "usage_export_line_attempt_id_idx" ON "usage_export_line"("attempt_id");
CREATE INDEX "usage_export_line_imported_at_idx" ON "usage_export_line"("imported_at");
