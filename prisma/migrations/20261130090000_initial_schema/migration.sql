-- CreateTable
CREATE TABLE "route" (
    "id" TEXT NOT NULL,
    "alias" TEXT NOT NULL,
    "current_version" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "route_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "route_contract_version" (
    "id" TEXT NOT NULL,
    "route_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "provider_kind" TEXT NOT NULL,
    "upstream_base_url" TEXT NOT NULL,
    "upstream_model" TEXT NOT NULL,
    "candidate_param" TEXT,
    "max_candidates" INTEGER NOT NULL,
    "output_cap_param" TEXT NOT NULL,
    "output_cap_semantics" TEXT,
    "usage_shape" TEXT NOT NULL,
    "streaming_usage" TEXT NOT NULL,
    "gateway_version" TEXT NOT NULL,
    "client_library_version" TEXT NOT NULL,
    "verified_at" TIMESTAMPTZ(3),
    "verified_by" TEXT,
    "verification_notes" JSONB,
    "verification_ttl_seconds" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "created_by" TEXT NOT NULL,
    "change_reason" TEXT NOT NULL,

    CONSTRAINT "route_contract_version_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "price_revision" (
    "id" TEXT NOT NULL,
    "route_id" TEXT NOT NULL,
    "effective_from" TIMESTAMPTZ(3) NOT NULL,
    "input_per_mtok_microusd" BIGINT NOT NULL,
    "cached_input_per_mtok_microusd" BIGINT NOT NULL,
    "output_per_mtok_microusd" BIGINT NOT NULL,
    "reasoning_per_mtok_microusd" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "created_by" TEXT NOT NULL,
    "reason" TEXT NOT NULL,

    CONSTRAINT "price_revision_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "workload" (
    "id" TEXT NOT NULL,
    "team" TEXT NOT NULL,
    "environment" TEXT NOT NULL,
    "default_max_candidates" INTEGER NOT NULL,
    "per_candidate_output_ceiling" INTEGER NOT NULL,
    "budget_microusd" BIGINT NOT NULL,
    "budget_period" TEXT NOT NULL,
    "allowed_aliases" TEXT[],
    "fallback_chain" TEXT[],
    "allow_length" BOOLEAN NOT NULL,
    "allow_content_filter" BOOLEAN NOT NULL,
    "deadline_ms" INTEGER NOT NULL,
    "max_in_flight" INTEGER NOT NULL,
    "tokens_per_minute" INTEGER,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_by" TEXT NOT NULL,
    "change_reason" TEXT NOT NULL,

    CONSTRAINT "workload_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_key" (
    "id" TEXT NOT NULL,
    "workload_id" TEXT NOT NULL,
    "key_hash" TEXT NOT NULL,
    "key_prefix" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "created_by" TEXT NOT NULL,
    "revoked_at" TIMESTAMPTZ(3),
    "revoked_by" TEXT,
    "revoked_reason" TEXT,

    CONSTRAINT "api_key_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "operator_token" (
    "id" TEXT NOT NULL,
    "subject" TEXT NOT NULL,
    "roles" TEXT[],
    "token_hash" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "revoked_at" TIMESTAMPTZ(3),

    CONSTRAINT "operator_token_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "candidate_exception" (
    "id" TEXT NOT NULL,
    "workload_id" TEXT NOT NULL,
    "route_id" TEXT,
    "owner" TEXT NOT NULL,
    "max_candidates" INTEGER NOT NULL,
    "per_candidate_output_ceiling" INTEGER NOT NULL,
    "budget_microusd" BIGINT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "justification" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "requested_by" TEXT NOT NULL,
    "requested_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "candidate_exception_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "candidate_exception_event" (
    "id" TEXT NOT NULL,
    "exception_id" TEXT NOT NULL,
    "event" TEXT NOT NULL,
    "from_status" TEXT,
    "to_status" TEXT NOT NULL,
    "actor" TEXT NOT NULL,
    "reason" TEXT NOT NULL,
    "at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "candidate_exception_event_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "budget_account" (
    "id" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "scope_id" TEXT NOT NULL,
    "period_start" TIMESTAMPTZ(3) NOT NULL,
    "budget_microusd" BIGINT NOT NULL,
    "pending_microusd" BIGINT NOT NULL DEFAULT 0,
    "unresolved_microusd" BIGINT NOT NULL DEFAULT 0,
    "settled_microusd" BIGINT NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "budget_account_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "quota_counter" (
    "scope" TEXT NOT NULL,
    "scope_id" TEXT NOT NULL,
    "window_start" TIMESTAMPTZ(3) NOT NULL,
    "tokens" INTEGER NOT NULL DEFAULT 0,
    "in_flight" INTEGER NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "quota_counter_pkey" PRIMARY KEY ("scope","scope_id","window_start")
);

-- CreateTable
CREATE TABLE "action" (
    "id" TEXT NOT NULL,
    "workload_id" TEXT NOT NULL,
    "environment" TEXT NOT NULL,
    "route_id" TEXT NOT NULL,
    "route_version" INTEGER NOT NULL,
    "model_alias" TEXT NOT NULL,
    "api_kind" TEXT NOT NULL,
    "stream_mode" TEXT NOT NULL,
    "requested_candidates" INTEGER,
    "effective_candidates" INTEGER NOT NULL,
    "returned_candidates" INTEGER,
    "output_ceiling" INTEGER NOT NULL,
    "input_tokens_estimate" INTEGER NOT NULL,
    "exception_id" TEXT,
    "idempotency_key" TEXT,
    "request_fingerprint" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "status_reason" TEXT NOT NULL,
    "deadline_at" TIMESTAMPTZ(3) NOT NULL,
    "dispatch_deadline_at" TIMESTAMPTZ(3) NOT NULL,
    "outcome" JSONB,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "action_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "reservation" (
    "id" TEXT NOT NULL,
    "action_id" TEXT NOT NULL,
    "workload_account_id" TEXT NOT NULL,
    "exception_account_id" TEXT,
    "reserved_output_tokens" INTEGER NOT NULL,
    "reserved_microusd" BIGINT NOT NULL,
    "settled_microusd" BIGINT NOT NULL DEFAULT 0,
    "unresolved_microusd" BIGINT NOT NULL DEFAULT 0,
    "released_microusd" BIGINT NOT NULL DEFAULT 0,
    "price_revision_id" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "status_reason" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "reservation_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "attempt" (
    "id" TEXT NOT NULL,
    "action_id" TEXT NOT NULL,
    "attempt_no" INTEGER NOT NULL,
    "role" TEXT NOT NULL,
    "route_id" TEXT NOT NULL,
    "route_version" INTEGER NOT NULL,
    "status" TEXT NOT NULL,
    "status_reason" TEXT NOT NULL,
    "provider_request_id" TEXT,
    "effective_candidates" INTEGER NOT NULL,
    "returned_candidates" INTEGER,
    "candidate_outcomes" JSONB,
    "prompt_block_reason" TEXT,
    "http_status" INTEGER,
    "input_tokens" INTEGER,
    "cached_input_tokens" INTEGER,
    "output_tokens_total" INTEGER,
    "reasoning_tokens" INTEGER,
    "usage_source" TEXT,
    "started_at" TIMESTAMPTZ(3) NOT NULL,
    "ended_at" TIMESTAMPTZ(3),
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "attempt_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "dispatch_claim" (
    "action_id" TEXT NOT NULL,
    "attempt_no" INTEGER NOT NULL,
    "claimed_by" TEXT NOT NULL,
    "claimed_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "dispatch_claim_pkey" PRIMARY KEY ("action_id","attempt_no")
);

-- CreateTable
CREATE TABLE "ledger_entry" (
    "id" TEXT NOT NULL,
    "attempt_id" TEXT NOT NULL,
    "action_id" TEXT NOT NULL,
    "attempt_role" TEXT NOT NULL,
    "workload_id" TEXT NOT NULL,
    "environment" TEXT NOT NULL,
    "route_id" TEXT NOT NULL,
    "route_version" INTEGER NOT NULL,
    "model_alias" TEXT NOT NULL,
    "provider_request_id" TEXT,
    "requested_candidates" INTEGER,
    "effective_candidates" INTEGER NOT NULL,
    "returned_candidates" INTEGER NOT NULL,
    "input_tokens" INTEGER NOT NULL,
    "cached_input_tokens" INTEGER NOT NULL,
    "output_tokens_total" INTEGER NOT NULL,
    "reasoning_tokens" INTEGER NOT NULL,
    "total_tokens" INTEGER NOT NULL,
    "stream_mode" TEXT NOT NULL,
    "usage_source" TEXT NOT NULL,
    "price_revision_id" TEXT NOT NULL,
    "input_microusd" BIGINT NOT NULL,
    "cached_input_microusd" BIGINT NOT NULL,
    "output_microusd" BIGINT NOT NULL,
    "reasoning_microusd" BIGINT NOT NULL,
    "cost_microusd" BIGINT NOT NULL,
    "settled_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "ledger_entry_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "reconciliation_case" (
    "id" TEXT NOT NULL,
    "action_id" TEXT NOT NULL,
    "attempt_id" TEXT,
    "reason" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "provider_request_id" TEXT,
    "exposure_microusd" BIGINT NOT NULL,
    "details" JSONB NOT NULL,
    "opened_at" TIMESTAMPTZ(3) NOT NULL,
    "resolved_at" TIMESTAMPTZ(3),
    "resolved_by" TEXT,
    "resolution" TEXT,

    CONSTRAINT "reconciliation_case_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "outbox_message" (
    "id" BIGSERIAL NOT NULL,
    "event_id" TEXT NOT NULL,
    "topic" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "payload" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "published_at" TIMESTAMPTZ(3),

    CONSTRAINT "outbox_message_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "processed_event" (
    "consumer" TEXT NOT NULL,
    "event_id" TEXT NOT NULL,
    "processed_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "processed_event_pkey" PRIMARY KEY ("consumer","event_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "route_alias_key" ON "route"("alias");

-- CreateIndex
CREATE UNIQUE INDEX "route_contract_version_route_id_version_key" ON "route_contract_version"("route_id", "version");

-- CreateIndex
CREATE INDEX "price_revision_route_id_effective_from_idx" ON "price_revision"("route_id", "effective_from");

-- CreateIndex
CREATE UNIQUE INDEX "api_key_key_hash_key" ON "api_key"("key_hash");

-- CreateIndex
CREATE UNIQUE INDEX "operator_token_token_hash_key" ON "operator_token"("token_hash");

-- CreateIndex
CREATE INDEX "candidate_exception_workload_id_status_idx" ON "candidate_exception"("workload_id", "status");

-- CreateIndex
CREATE INDEX "candidate_exception_event_exception_id_idx" ON "candidate_exception_event"("exception_id");

-- CreateIndex
CREATE UNIQUE INDEX "budget_account_scope_scope_id_period_start_key" ON "budget_account"("scope", "scope_id", "period_start");

-- CreateIndex
CREATE INDEX "action_status_dispatch_deadline_at_idx" ON "action"("status", "dispatch_deadline_at");

-- CreateIndex
CREATE UNIQUE INDEX "action_workload_id_idempotency_key_key" ON "action"("workload_id", "idempotency_key");

-- CreateIndex
CREATE UNIQUE INDEX "reservation_action_id_key" ON "reservation"("action_id");

-- CreateIndex
CREATE INDEX "reservation_status_idx" ON "reservation"("status");

-- CreateIndex
CREATE UNIQUE INDEX "attempt_action_id_attempt_no_key" ON "attempt"("action_id", "attempt_no");

-- CreateIndex
CREATE UNIQUE INDEX "ledger_entry_attempt_id_key" ON "ledger_entry"("attempt_id");

-- CreateIndex
CREATE INDEX "ledger_entry_workload_id_settled_at_idx" ON "ledger_entry"("workload_id", "settled_at");

-- CreateIndex
CREATE INDEX "ledger_entry_action_id_idx" ON "ledger_entry"("action_id");

-- CreateIndex
CREATE INDEX "reconciliation_case_status_idx" ON "reconciliation_case"("status");

-- CreateIndex
CREATE UNIQUE INDEX "reconciliation_case_attempt_id_reason_key" ON "reconciliation_case"("attempt_id", "reason");

-- CreateIndex
CREATE UNIQUE INDEX "outbox_message_event_id_key" ON "outbox_message"("event_id");

-- CreateIndex
CREATE INDEX "outbox_message_published_at_id_idx" ON "outbox_message"("published_at", "id");

-- AddForeignKey
ALTER TABLE "route_contract_version" ADD CONSTRAINT "route_contract_version_route_id_fkey" FOREIGN KEY ("route_id") REFERENCES "route"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "price_revision" ADD CONSTRAINT "price_revision_route_id_fkey" FOREIGN KEY ("route_id") REFERENCES "route"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "api_key" ADD CONSTRAINT "api_key_workload_id_fkey" FOREIGN KEY ("workload_id") REFERENCES "workload"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "candidate_exception" ADD CONSTRAINT "candidate_exception_workload_id_fkey" FOREIGN KEY ("workload_id") REFERENCES "workload"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "candidate_exception_event" ADD CONSTRAINT "candidate_exception_event_exception_id_fkey" FOREIGN KEY ("exception_id") REFERENCES "candidate_exception"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reservation" ADD CONSTRAINT "reservation_action_id_fkey" FOREIGN KEY ("action_id") REFERENCES "action"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "attempt" ADD CONSTRAINT "attempt_action_id_fkey" FOREIGN KEY ("action_id") REFERENCES "action"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
